"""Summarize trace files and judge the overlap, one worker process per file at a time.

Pass 1 reads every file once (the expensive part: JSON), in ``jobs`` forked processes,
returning each file's :class:`~dftpass.traces.summary.Summary` to be merged here, and
writing each file's class events to a spill file (:mod:`~dftpass.traces.spill`). Pass 2
picks the bucket width from the merged summary and turns the spill files into busy times
(:mod:`~dftpass.traces.busy`), files that share a process in the same task. Each worker
holds one file's batch and tables at a time, so peak memory does not grow with the trace.

The same map/reduce shape fits Dask: map :func:`~dftpass.traces.aggregate.summarize_file`,
reduce with ``Summary.merge``; map :class:`~dftpass.traces.busy.BusyAccumulator` over spill
groups, reduce with ``ClassBusy.merge``.
"""

from __future__ import annotations

import multiprocessing
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Iterable, Iterator, TypeVar

import numpy as np

from dftpass.traces.aggregate import summarize_file
from dftpass.traces.busy import BusyAccumulator, ClassBusy, add_series
from dftpass.traces.cache import TraceCache, file_key, set_key
from dftpass.traces.files import trace_files
from dftpass.traces.overlap import Overlap, default_width_ns, judge
from dftpass.traces.spill import SpillWriter, read_spill
from dftpass.traces.summary import Summary

T = TypeVar("T")
R = TypeVar("R")


@dataclass
class Analysis:
    """What :func:`analyze` found: the summary (with every file's problems) and the overlap."""

    summary: Summary
    overlap: Overlap | None


def summarize(paths: Iterable[str | Path], jobs: int = 1) -> Summary:
    """The merged summary of the trace files in ``paths`` (directories searched)."""
    return analyze(paths, jobs, overlap=False).summary


def analyze(paths: Iterable[str | Path], jobs: int = 1, width_s: float | None = None,
            overlap: bool = True, cache: TraceCache | None = None, progress=None) -> Analysis:
    """Summary and (unless ``overlap=False``) overlap of the trace files in ``paths``.
    ``width_s`` overrides the bucket width of the overlap (default: the shorter class's
    median event). With a ``cache`` (:mod:`~dftpass.traces.cache`), files read before and
    unchanged since are not read again, nor is pass 2 redone for the same files and width.
    ``progress`` (``start(total)``, a call per file read, ``close()``: the command's progress
    bar) is told of every file pass 1 reads."""
    found: list = []  # problems of the search: links to nowhere, FIFOs, folders that cannot be listed
    files = sorted(trace_files(paths, found), key=_size, reverse=True)  # biggest first: even load
    keys = {str(f): file_key(f) for f in files} if cache is not None else {}
    with tempfile.TemporaryDirectory(prefix="dftpass-spill-") as tmp:
        summary = Summary(problems=found)
        spills: dict[str, str] = {}
        tasks = []
        for i, f in enumerate(files):
            key = keys.get(str(f))
            hit = cache.load_file(key, overlap) if key and cache is not None else None
            if hit is not None:
                part, spill = hit
                summary.merge(part)
                if spill:
                    spills[str(f)] = spill
                continue
            target = (cache.new_spill(key) if key and cache is not None else None) or os.path.join(tmp, f"{i}.spill")
            tasks.append((str(f), target if overlap else None))
        if progress is not None:
            progress.start(len(tasks))
        for path, spill, part in _map(_pass1, tasks, jobs):
            if progress is not None:
                progress(os.path.basename(path))
            key = keys.get(path)
            if key and cache is not None:
                spill = cache.store_file(key, part, spill)
            summary.merge(part)
            if spill:
                spills[path] = spill
        if progress is not None:
            progress.close()
        if not overlap:
            return Analysis(summary, None)
        width = round(width_s * 1e9) if width_s else default_width_ns(summary)
        busy_key = set_key([k or "" for k in keys.values()], width) if cache is not None and all(keys.values()) \
            else None
        cached = cache.load_busy(busy_key) if busy_key else None
        if cached is not None:
            return Analysis(summary, judge(summary, cached))
        busy = ClassBusy(width)
        workers = {(p.host, p.pid) for p in summary.workers()}
        groups = [(group, width, workers) for group in _groups(summary, spills)]
        for part in _map(_pass2, groups, jobs):
            busy.merge(part)
        if busy_key:
            cache.store_busy(busy_key, busy)
        return Analysis(summary, judge(summary, busy))


def _pass1(task: tuple[str, str | None]) -> tuple[str, str | None, Summary]:
    path, spill_path = task
    if spill_path is None:
        return path, None, summarize_file(path)
    spill = SpillWriter(spill_path)
    try:
        summary = summarize_file(path, spill)
    except BaseException:
        spill.close()
        os.unlink(spill_path)
        raise
    spill.close()
    if not spill.rows:
        os.unlink(spill_path)
        return path, None, summary
    return path, spill_path, summary


#: one pass-2 task: spill files with, per file, pid -> process index and pid -> host
Group = list[tuple[str, dict[int, int], dict[int, str | None]]]


def _groups(summary: Summary, spills: dict[str, str]) -> list[Group]:
    """Spill files grouped so that every process, (host, pid), is in exactly one group."""
    index: dict[tuple[str | None, int], int] = {}
    pid_maps: dict[str, dict[int, int]] = {path: {} for path in spills}
    hosts: dict[str, dict[int, str | None]] = {path: {} for path in spills}
    for (path, pid), proc in summary.processes.items():
        if path in spills:
            pid_maps[path][pid] = index.setdefault((proc.host, pid), len(index))
            hosts[path][pid] = proc.host
    parent = list(range(len(index)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for procs in pid_maps.values():
        ids = list(procs.values())
        for other in ids[1:]:
            parent[root(other)] = root(ids[0])
    groups: dict[int, Group] = {}
    for path, procs in pid_maps.items():
        if procs:
            groups.setdefault(root(next(iter(procs.values()))), []).append((spills[path], procs, hosts[path]))
    return list(groups.values())


def _pass2(task: tuple[Group, int, set]) -> ClassBusy:
    group, width, workers = task
    acc = BusyAccumulator(width)
    for spill_path, pid_map, host in group:
        pids = np.array(sorted(pid_map), np.int64)
        procs = np.array([pid_map[p] for p in sorted(pid_map)], np.int64)
        is_worker = np.array([(host.get(p), p) in workers for p in sorted(pid_map)], bool)
        for block in read_spill(spill_path):
            at = np.searchsorted(pids, block["pid"])
            add_series(acc, procs[at], block["ts"], block["dur"], block["cls"].astype(np.int64),
                       block["fetch"].astype(np.int64), block["cat"].astype(np.int64), is_worker[at])
    return acc.result()


def _map(fn: Callable[[T], R], tasks: list[T], jobs: int) -> Iterator[R]:
    """``fn`` over ``tasks``: in this process for one job, else in forked workers (fork keeps
    start-up cheap: the workers inherit the imported modules)."""
    if jobs <= 1 or len(tasks) <= 1:
        yield from map(fn, tasks)
        return
    with multiprocessing.get_context("fork").Pool(min(jobs, len(tasks))) as pool:
        yield from pool.imap_unordered(fn, tasks, chunksize=1)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0
