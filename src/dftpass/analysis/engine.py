"""Where trace files are read: in this machine's processes (default) or on a Dask cluster.

Both engines compute the same thing in the same two passes (see :mod:`dftpass.traces.analysis`):

1. map :func:`~dftpass.traces.summarize_file` over the files, reduce with ``Summary.merge``;
2. pick the bucket width from the merged summary, then map the busy times of each group of
   files that share a process, reduce with ``ClassBusy.merge``, and judge the overlap.

The local engine spills each file's class events in pass 1 and reads them back in pass 2.
The Dask engine reads the files again in pass 2 instead: its workers need not share a
scratch folder with this process, only the trace files (a parallel file system).
``--engine dask`` starts a local cluster; ``--scheduler ADDRESS`` uses an existing one.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterable

from dftpass.core.errors import UserError
from dftpass.traces import Analysis, ClassBusy, Summary, analyze, busy_of_events, class_events, judge, summarize_file
from dftpass.traces.files import trace_files
from dftpass.traces.overlap import default_width_ns

ENGINES = ("local", "dask")
#: how long to try to reach ``--scheduler`` (Dask retries a refused connection until then)
SCHEDULER_TIMEOUT_S = 10


class EngineError(UserError):
    """The engine cannot run (Dask missing, scheduler unreachable)."""


def analyze_traces(paths: Iterable[str | Path], engine: str = "local", jobs: int = 1,
                   scheduler: str | None = None, width_s: float | None = None, cache=None,
                   progress=None) -> Analysis:
    """``cache``: a :class:`~dftpass.traces.cache.TraceCache` (the local engine only: Dask
    workers need not see this machine's workspace); ``progress``: told of each file read
    (the local engine)."""
    paths = [str(p) for p in paths]
    if engine == "local":
        return analyze(paths, jobs=jobs, width_s=width_s, cache=cache, progress=progress)
    if engine == "dask":
        return _dask(paths, jobs, scheduler, width_s)
    raise EngineError(f"unknown engine {engine!r} (choose from {', '.join(ENGINES)})")


def _busy_of_files(files: list[str], width_s: float, worker_pids: set | None = None) -> ClassBusy:
    # not ``workers=``: Client.map takes that keyword itself (where tasks may run)
    return busy_of_events(class_events(files), width_s, workers=worker_pids)


def _process_groups(summary: Summary, files: list[str]) -> list[list[str]]:
    """Files grouped so that all files of one process, (host, pid), are in one group."""
    parent = {f: f for f in files}

    def root(f: str) -> str:
        while parent[f] != f:
            parent[f] = parent[parent[f]]
            f = parent[f]
        return f

    owner: dict[tuple[str | None, int], str] = {}
    for (path, pid), proc in summary.processes.items():
        if path not in parent:
            continue
        key = (proc.host, pid)
        if key in owner:
            parent[root(path)] = root(owner[key])
        else:
            owner[key] = path
    groups: dict[str, list[str]] = {}
    for f in files:
        groups.setdefault(root(f), []).append(f)
    return list(groups.values())


def _dask(paths: list[str], jobs: int, scheduler: str | None, width_s: float | None) -> Analysis:
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError as exc:  # pragma: no cover - the dev install has it
        raise EngineError("--engine dask needs Dask: pip install 'dask[distributed]'") from exc
    found: list = []
    files = [str(p) for p in trace_files(paths, found)]
    cluster = None
    try:
        if scheduler:
            client = Client(scheduler, timeout=f"{SCHEDULER_TIMEOUT_S}s")
        else:
            # ":0": any free port (None still takes 8787, which a second analysis would collide on)
            cluster = LocalCluster(n_workers=max(1, jobs), threads_per_worker=1, processes=True,
                                   dashboard_address=":0")
            client = Client(cluster)
    except (OSError, ValueError) as exc:  # ValueError: not an address ("missing port number", bad scheme)
        raise EngineError(f"cannot reach the Dask scheduler {scheduler}: {exc}") from exc
    try:
        try:
            client.wait_for_workers(1, timeout=SCHEDULER_TIMEOUT_S)
        except (TimeoutError, OSError) as exc:
            raise EngineError(f"the Dask scheduler {scheduler or 'started here'} has no workers "
                              f"after {SCHEDULER_TIMEOUT_S} s") from exc
        summary = Summary(problems=found)
        for part in client.gather(client.map(summarize_file, files, pure=False)):
            summary.merge(part)
        width = width_s if width_s else default_width_ns(summary) / 1e9
        busy = ClassBusy(round(width * 1e9))
        groups = _process_groups(summary, files)
        workers = {(p.host, p.pid) for p in summary.workers()}
        for part in client.gather(client.map(_busy_of_files, groups, width_s=width, worker_pids=workers, pure=False)):
            busy.merge(part)
        return Analysis(summary, judge(summary, busy))
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
