"""The ``traces`` analysis: every repeat of the run being analysed, read and summarized once.

Available in ``dftpass analyze`` (the context carries the run); the runtime rules ML-R15,
ML-R16 and ML-R24 and the proposals all read this one cached result.
"""

from __future__ import annotations

import statistics
from typing import Any

import attrs

from dftpass.core.passes import Pass, PassKind


@attrs.define
class RepeatAnalysis:
    repeat: int
    record: dict
    analysis: Any  # dftpass.traces.Analysis
    metrics: dict[str, float | None]
    #: what the repeat did (:func:`dftpass.analysis.work.work_of`)
    work: dict = attrs.field(factory=dict)


@attrs.define
class RunAnalysis:
    run: Any  # RunDir
    repeats: list[RepeatAnalysis]

    @property
    def primary(self) -> RepeatAnalysis:
        """The repeat every table shows: the median one by wall time (the lower median of an
        even number; the first repeat when no wall time was recorded)."""
        timed = sorted((r for r in self.repeats if r.record.get("wall_s") is not None),
                       key=lambda r: (r.record["wall_s"], r.repeat))
        return timed[(len(timed) - 1) // 2] if timed else self.repeats[0]

    def median(self, metric: str) -> float | None:
        values = [r.metrics[metric] for r in self.repeats if r.metrics.get(metric) is not None]
        return statistics.median(values) if values else None

    def spread(self, metric: str) -> tuple[float, float] | None:
        values = [r.metrics[metric] for r in self.repeats if r.metrics.get(metric) is not None]
        return (min(values), max(values)) if values else None

    def medians(self) -> dict[str, float | None]:
        return {name: self.median(name) for name in self.primary.metrics}


def analyze_run(run, engine: str = "local", jobs: int = 1, scheduler: str | None = None,
                width_s: float | None = None, cache: bool = True, progress=None) -> RunAnalysis:
    """Every repeat of ``run`` read and summarized; a run of a workspace keeps what it read in
    ``<workspace>/.dftpass-cache``, a bare folder of traces in the user's cache directory
    (``cache=False``: neither read nor written). ``progress`` (``start(total)``, one call per
    file read, ``close()``) is told about the files read."""
    # imported here: numpy and msgspec are not needed by the annotation commands
    from dftpass.analysis.engine import analyze_traces
    from dftpass.analysis.metrics import run_metrics
    from dftpass.analysis.work import work_of

    import time

    import structlog

    from dftpass.runs.layout import RunDir
    from dftpass.traces.cache import CACHE_DIR, TraceCache, user_cache

    log = structlog.get_logger("dftpass")
    record = run.record()
    # a workspace keeps its own cache beside its runs; a bare folder of traces uses the user's
    store = None if not cache else TraceCache(run.workspace / CACHE_DIR / "traces") if isinstance(run, RunDir) \
        else TraceCache(user_cache())
    out = []
    for rep in record["repeats"]:
        k = rep["repeat"]
        start = time.perf_counter()
        analysis = analyze_traces(run.trace_dirs(k), engine, jobs, scheduler, width_s, cache=store,
                                  progress=progress)
        log.info("traces read", label=run.label, repeat=k, engine=engine, files=len(analysis.summary.files),
                 events=analysis.summary.events, problems=len(analysis.summary.problems),
                 seconds=round(time.perf_counter() - start, 3),
                 cached=f"{store.hits}/{store.hits + store.misses}" if store is not None else "off")
        out.append(RepeatAnalysis(k, rep, analysis, run_metrics(analysis.summary, analysis.overlap, rep.get("wall_s")),
                                  work_of(analysis)))
    if not out:
        raise ValueError(f"{run.path}: run.json lists no repeats")
    return RunAnalysis(run, out)


class TracesAnalysis(Pass):
    """The traced run's summary, overlap and metrics, per repeat."""

    id = "traces"
    title = "Trace summary"
    kind = PassKind.ANALYSIS

    def run(self, ctx) -> RunAnalysis:
        if ctx.run is None:
            raise RuntimeError("the traces analysis needs a run (dftpass analyze RUN)")
        opts = ctx.trace_options
        return analyze_run(ctx.run, opts.get("engine", "local"), opts.get("jobs", 1), opts.get("scheduler"),
                           opts.get("width_s"), opts.get("cache", True), opts.get("progress"))
