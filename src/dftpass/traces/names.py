"""The dftracer names the trace analysis looks for, derived from :mod:`dftpass.core.emitter`.

The emitter is the one module that spells dftracer's names; this module only gives the
analysis its own vocabulary (which cat is compute, which name is the loop's wait), so a
rename in dftracer is a change to the emitter alone.
"""

from __future__ import annotations

from dftpass.core import emitter as E

COMPUTE_CAT = E.NODES["compute"][0]
DATA_CAT = E.NODES["data.item"][0]
DATALOADER_CAT, FETCH_ITER = E.event("dataloader.fetch", E.ITER_SUFFIX)
FETCH_BLOCK = E.event("dataloader.fetch", E.BLOCK_SUFFIX)[1]
#: the fetch region itself (``fetch.start()`` / ``.stop()`` around ``next(it)``)
FETCH = E.event("dataloader.fetch")[1]
ITER_SUFFIX, BLOCK_SUFFIX = E.ITER_SUFFIX, E.BLOCK_SUFFIX

META_CAT = E.TRACE_META_CAT
META_HOST, META_FILE, META_STRING, META_CUSTOM = (
    E.TRACE_META_HOST, E.TRACE_META_FILE, E.TRACE_META_STRING, E.TRACE_META_CUSTOM)
TIME_METRIC_KEY = E.TRACE_TIME_METRIC_KEY
TIME_METRICS = E.TRACE_TIME_METRICS
START_EVENT = E.TRACE_START_EVENT
SYSCALL_CATS = frozenset(E.TRACE_SYSCALL_CATS)
FILE_ROLES = E.TRACE_FILE_ROLES
ROLE_APP, ROLE_PRELOAD, ROLE_FORK = FILE_ROLES
FILE_SUFFIXES = E.TRACE_SUFFIXES

ENV_AGGREGATION = E.ENV_AGGREGATION

READ_OPS = frozenset(E.TRACE_READ_OPS)
WRITE_OPS = frozenset(E.TRACE_WRITE_OPS)
METADATA_OPS = frozenset(E.TRACE_METADATA_OPS)

#: the phase events (cat, name -> phase) and the root's
PIPELINE_CAT = E.NODES["pipeline.train"][0]
PHASE_EVENTS: dict[tuple[str, str], str] = {E.NODES[f"pipeline.{p}"]: p for p in ("train", "evaluate", "test")}
ROOT_EVENT = E.NODES[""]
#: the categories whose time is reported on its own (nested events of one category count once)
CHECKPOINT_CAT = E.NODES["checkpoint.capture"][0]
CATEGORIES = tuple(dict.fromkeys(cat for cat, _ in E.NODES.values()))
#: the data events that are preprocessing (transforms, collate), not reads
PREPROCESS_EVENTS = frozenset({E.NODES["data.preprocess"], *E.DERIVED.values()})
#: the data events that are reads of samples (``data.io.read``)
SAMPLE_READ_EVENTS = frozenset({pair for node, pair in E.NODES.items() if node.startswith("data.io.")})

#: application-level I/O regions (``ai.data.io.read`` ...): (cat, name) -> "read"/"write"/"open"/"close"
APP_IO_OPS: dict[tuple[str, str], str] = {
    pair: node.rsplit(".", 1)[1] for node, pair in E.NODES.items() if ".io." in node
}
