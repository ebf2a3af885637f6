"""Per-bucket busy time of each event class: the mergeable middle of the overlap method.

For a bucket width ``w`` (ns) and each class, ``busy[bucket]`` is the largest time any one
process spent in that class inside the bucket. Per process it is the length of the *union*
of its class intervals, cut at bucket boundaries (step 3 of the method in ``analysis.md``):
nested events (``data.item`` around a ``read``, ``compute`` around ``forward``) and threads
of one process count once, so a process is never busier than ``w``.

The union is taken per block of the input (a million events, sorted there); intervals that
nest across a block boundary would count twice, so each process's bucket total is also
capped at ``w``. Sums per (process, bucket) are kept sparse (sorted numpy arrays), so memory
is bounded by the buckets a process touched (at most span / w), never by the event count.

:class:`ClassBusy` merges by a per-bucket maximum, which is right only when both sides hold
different processes: a process's events must all go through one accumulator
(:func:`~dftpass.traces.analysis.analyze` groups files that share a process).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

import numpy as np

from dftpass.traces.classes import (BATCHES, CATEGORY_SERIES, FETCH_REGION, FETCH_WAIT, LOADING, LOADING_IN_MAIN,
                                    LOADING_IN_WORKERS, NONE, ClassEvent)

Sparse = tuple[np.ndarray, np.ndarray]  # (sorted bucket indices, values)
_EMPTY: Sparse = (np.zeros(0, np.int64), np.zeros(0, np.int64))
#: pending pieces per (process, class) before they are folded together
_COMPACT_AT = 1 << 20


@dataclass
class ClassBusy:
    """Per series (the classes COMPUTE and LOADING, the fetch series, the categories):
    buckets and the max-over-processes busy ns in each (``by_class``), and the sum over
    processes (``totals``: a category's time added up over processes, nested events once)."""

    width_ns: int
    by_class: dict[int, Sparse] = field(default_factory=dict)
    totals: dict[int, Sparse] = field(default_factory=dict)

    def get(self, cls: int) -> Sparse:
        return self.by_class.get(cls, _EMPTY)

    def total(self, series: int) -> Sparse:
        return self.totals.get(series, _EMPTY)

    def merge(self, other: ClassBusy) -> ClassBusy:
        assert other.width_ns == self.width_ns, "merging busy times of different bucket widths"
        for cls, part in other.by_class.items():
            self.by_class[cls] = _fold([self.get(cls), part], np.maximum)
        for series, part in other.totals.items():
            self.totals[series] = _fold([self.total(series), part], np.add)
        return self


#: series per process in one group key (series ids stay below this)
_SERIES = 64


class BusyAccumulator:
    """Takes blocks of events (process index, ts ns, dur ns, series) and yields a
    :class:`ClassBusy` for the processes it saw."""

    def __init__(self, width_ns: int) -> None:
        self.width = int(width_ns)
        self._parts: dict[tuple[int, int], list[Sparse]] = {}
        self._pending: dict[tuple[int, int], int] = {}
        self._counts: dict[int, list[Sparse]] = {}

    def count(self, series: int, at_ns: np.ndarray) -> None:
        """Count events of ``series`` at the instants ``at_ns`` (a count, not busy time: kept
        in :attr:`ClassBusy.totals`, added over processes). The index of a count is its instant
        in ns, not a bucket: a bucket is labelled with a phase by its middle, which put a batch
        that arrived at a phase's last instant into the next phase (eval_bound: 7 training
        batches of 8); an instant is labelled exactly. One entry per distinct instant: memory
        grows with the batches, not the events."""
        if len(at_ns):
            buckets, counts = np.unique(at_ns, return_counts=True)
            self._counts.setdefault(series, []).append((buckets.astype(np.int64), counts.astype(np.int64)))

    def add(self, proc: np.ndarray, ts: np.ndarray, dur: np.ndarray, cls: np.ndarray) -> None:
        keep = cls >= 0
        if not keep.all():
            proc, ts, dur, cls = proc[keep], ts[keep], dur[keep], cls[keep]
        if not len(cls):
            return
        end = ts + np.maximum(dur, 0)
        group = proc.astype(np.int64) * _SERIES + cls
        order = np.argsort(group, kind="stable")
        group, ts, end = group[order], ts[order], end[order]
        bounds = np.flatnonzero(np.r_[True, group[1:] != group[:-1], True])
        for first, last in zip(bounds[:-1], bounds[1:]):
            g = int(group[first])
            start, stop = _union(ts[first:last], end[first:last])
            part = _pieces(start, stop, self.width)
            key = (g // _SERIES, g % _SERIES)
            self._parts.setdefault(key, []).append(part)
            self._pending[key] = self._pending.get(key, 0) + len(part[0])
            if self._pending[key] > _COMPACT_AT:
                folded = _fold(self._parts[key], np.add)
                self._parts[key], self._pending[key] = [folded], len(folded[0])

    def result(self) -> ClassBusy:
        per_class: dict[int, list[Sparse]] = {}
        for (_, cls), parts in self._parts.items():
            buckets, total = _fold(parts, np.add)
            per_class.setdefault(cls, []).append((buckets, np.minimum(total, self.width)))
        totals = {cls: _fold(parts, np.add) for cls, parts in per_class.items()}
        totals.update({series: _fold(parts, np.add) for series, parts in self._counts.items()})
        return ClassBusy(self.width, {cls: _fold(parts, np.maximum) for cls, parts in per_class.items()}, totals)


def busy_of_events(events: Iterable[ClassEvent], width_s: float, block: int = 1 << 16,
                   workers: set[tuple[str | None, int]] | None = None) -> ClassBusy:
    """:class:`ClassBusy` of a stream of :class:`~dftpass.traces.classes.ClassEvent`,
    processes told apart by (host, pid); ``workers``: the (host, pid) of worker processes."""
    acc = BusyAccumulator(round(width_s * 1e9))
    procs: dict[tuple[str | None, int], int] = {}
    rows: list[tuple[int, ...]] = []
    workers = workers or set()

    def flush() -> None:
        table = np.array(rows, np.int64).T
        add_series(acc, *table[:6], table[6].astype(bool))

    for ev in events:
        proc = procs.setdefault((ev.host, ev.pid), len(procs))
        rows.append((proc, ev.ts * ev.metric.ns, ev.dur * ev.metric.ns, ev.cls, ev.fetch, ev.category,
                     (ev.host, ev.pid) in workers))
        if len(rows) >= block:
            flush()
            rows = []
    if rows:
        flush()
    return acc.result()


def add_series(acc: BusyAccumulator, proc: np.ndarray, ts: np.ndarray, dur: np.ndarray, cls: np.ndarray,
               fetch: np.ndarray, cat: np.ndarray, worker: np.ndarray | None = None) -> None:
    """One block of timeline rows into ``acc``: each row in its overlap class (if any), its
    fetch series (if any) and its category's series; a loading row also by where it ran
    (``worker``: per row, whether its process is a worker; None: none is). A fetch region in
    a training process is its wait for a batch, not loading: loading there is serial with
    compute by construction, as ``fetch.iter`` is."""
    region = fetch == FETCH_REGION
    if region.any():
        waits = region if worker is None else region & ~worker
        cls = np.where(waits, NONE, cls)
        fetch = np.where(waits, FETCH_WAIT, fetch)  # a worker's stays FETCH_REGION: in no fetch series
    acc.add(proc, ts, dur, cls)
    acc.add(proc, ts, dur, fetch)
    waited = fetch == FETCH_WAIT
    if waited.any():  # one wait, one batch: counted where the batch arrived
        acc.count(BATCHES, ts[waited] + np.maximum(dur[waited], 0))
    acc.add(proc, ts, dur, np.where(cat >= 0, cat + CATEGORY_SERIES, -1))
    loading = cls == LOADING
    if loading.any():
        where = np.where(worker, LOADING_IN_WORKERS, LOADING_IN_MAIN) if worker is not None else \
            np.full(len(cls), LOADING_IN_MAIN)
        acc.add(proc, ts, dur, np.where(loading, where, -1))


def _union(start: np.ndarray, end: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The union of intervals as sorted, disjoint (start, end) arrays."""
    order = np.argsort(start, kind="stable")
    start, end = start[order], end[order]
    reach = np.maximum.accumulate(end)
    first = np.flatnonzero(np.r_[True, start[1:] > reach[:-1]])
    return start[first], np.maximum.reduceat(end, first)


def _pieces(start: np.ndarray, end: np.ndarray, width: int) -> Sparse:
    """Sorted disjoint intervals cut at multiples of ``width``: (bucket, ns in bucket)."""
    keep = end > start
    start, end = start[keep], end[keep]
    if not len(start):
        return _EMPTY
    first, last = start // width, (end - 1) // width
    count = last - first + 1
    owner = np.repeat(np.arange(len(start)), count)
    bucket = first[owner] + (np.arange(int(count.sum())) - np.repeat(np.cumsum(count) - count, count))
    piece = np.minimum(end[owner], (bucket + 1) * width) - np.maximum(start[owner], bucket * width)
    return _reduce_sorted(bucket, piece, np.add)


def _fold(parts: list[Sparse], op: np.ufunc) -> Sparse:
    """Several sparse series as one: values of equal buckets combined with ``op``."""
    parts = [p for p in parts if len(p[0])]
    if not parts:
        return _EMPTY
    if len(parts) == 1:
        return parts[0]
    buckets = np.concatenate([p[0] for p in parts])
    values = np.concatenate([p[1] for p in parts])
    order = np.argsort(buckets, kind="stable")
    return _reduce_sorted(buckets[order], values[order], op)


def _reduce_sorted(buckets: np.ndarray, values: np.ndarray, op: np.ufunc) -> Sparse:
    first = np.flatnonzero(np.r_[True, buckets[1:] != buckets[:-1]])
    return buckets[first], op.reduceat(values, first)
