"""Summarize one trace file in one pass: a :class:`~dftpass.traces.summary.Summary` of it.

Why numpy here: a Python loop that updates dicts per event costs ~0.5 us/event, as much as
decoding. Instead each batch of events is turned into a few arrays (one generator pass per
field) and counted with ``bincount`` per (process, key) and per duration bucket. Memory is
one batch plus per-key/per-process tables.

When given a :class:`~dftpass.traces.spill.SpillWriter`, the class events of the overlap
(:mod:`~dftpass.traces.classes`) are written to it in the same pass.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from dftpass.core import emitter as E
from dftpass.traces import names as N
from dftpass.traces import problems as P
from dftpass.traces.classes import FETCH_WAIT, NONE, category_of, classify, fetch_series
from dftpass.traces.files import role_of
from dftpass.traces.reader import TraceMeta, TraceReader
from dftpass.traces.sampling import GATED_CATS, Sampling
from dftpass.traces.schema import AGGREGATED, COMPLETE, LEAN, METADATA, LeanEvent
from dftpass.traces.sketch import NBINS, LogHistogram, bins_of
from dftpass.traces.spill import SpillWriter
from dftpass.traces.summary import MAX_INTERVALS, PHASE_CODES, Cell, FileInfo, Key, ProcessSummary, Stats, Summary

#: above this many (keys x buckets) one batch's histogram is counted sparsely
_DENSE_HIST_LIMIT = 1 << 22
_EXACT_FLOAT = 1 << 53
_NO_MIN = np.iinfo(np.int64).max
#: a sampled file's step events weighed one by one at most (beyond: the process's ratios)
MAX_WEIGHED = 5_000_000
#: the metadata line a sampled process writes first (its k)
SAMPLED_KEY = E.SAMPLING_META_PREFIX + "every"


def summarize_file(path: str | Path, spill: SpillWriter | None = None) -> Summary:
    """Read one file and return its summary (problems included); the file is never fatal."""
    reader = TraceReader(path, LEAN)
    agg = _FileAggregator(reader.meta, spill)
    for batch in reader.batches():
        agg.add(batch.events, batch.phases)
    return agg.finish(reader)


class _Process:
    """Per-process running sums, indexed by key id."""

    def __init__(self, capacity: int) -> None:
        self.count = np.zeros(capacity, np.int64)
        self.dur = np.zeros(capacity, np.int64)
        self.bytes = np.zeros(capacity, np.int64)
        self.hist = np.zeros(NBINS, np.int64)
        self.min_dur: int | None = None  # exact bounds of the durations (sketch quantiles are clamped to them)
        self.max_dur: int | None = None
        self.first: int | None = None
        self.last: int | None = None
        self.ppid: int | None = None
        self.hostname: str | None = None  # dlio-era events name their host

    def grow(self, capacity: int) -> None:
        self.count, self.dur, self.bytes = (_grown(a, capacity) for a in (self.count, self.dur, self.bytes))


class _FileAggregator:
    def __init__(self, meta: TraceMeta, spill: SpillWriter | None) -> None:
        self.meta = meta
        self.spill = spill
        self.keys: list[Key] = []
        self.ids: dict[str, dict[str, int]] = {}  # cat -> name -> key id (plain dicts: fastest)
        self.capacity = 64
        self.key_class = np.full(self.capacity, NONE, np.int8)
        self.key_fetch = np.full(self.capacity, NONE, np.int8)
        self.key_cat = np.full(self.capacity, NONE, np.int8)
        self.key_phase = np.full(self.capacity, NONE, np.int8)  # a phase or the root: its code
        self.intervals: list[tuple[int, int, int, int]] = []  # (pid, phase code, start ns, end ns)
        self.dropped_intervals = 0
        self.first_fetch = [0, 0, 0]  # waits for an epoch's first batch: count, ns, longest ns
        self.key_moves_bytes = np.zeros(self.capacity, bool)  # POSIX/STDIO read/write: bytes = ret
        self.key_hist = np.zeros((self.capacity, NBINS), np.int64)
        self.key_min = np.full(self.capacity, _NO_MIN, np.int64)
        self.key_max = np.full(self.capacity, -1, np.int64)
        self.procs: dict[int, _Process] = {}
        # a sampled file's step events (:mod:`~dftpass.traces.sampling`), kept to be weighed by
        # their pass at the end, when the passes are known: (key id, pid, ts, dur, bytes) arrays
        self.key_gated = np.zeros(self.capacity, bool)
        self.gated: list[tuple[np.ndarray, ...]] = []
        self.gated_kept = 0
        self.phases = np.zeros(5, np.int64)
        self.start_id = self._key_id(N.META_CAT, N.START_EVENT)

    def _key_ids(self, events: list[LeanEvent]) -> np.ndarray:
        ids = self.ids
        try:
            return np.fromiter((ids[e.cat][e.name] for e in events), np.int64, len(events))
        except KeyError:
            for e in events:
                self._key_id(e.cat, e.name)
            return np.fromiter((ids[e.cat][e.name] for e in events), np.int64, len(events))

    def _key_id(self, cat: str, name: str) -> int:
        names = self.ids.setdefault(cat, {})
        if name in names:
            return names[name]
        key_id = names[name] = len(self.keys)
        self.keys.append((cat, name))
        if key_id >= self.capacity:
            self.capacity *= 2
            self.key_class = _grown(self.key_class, self.capacity, NONE)
            self.key_fetch = _grown(self.key_fetch, self.capacity, NONE)
            self.key_cat = _grown(self.key_cat, self.capacity, NONE)
            self.key_phase = _grown(self.key_phase, self.capacity, NONE)
            self.key_moves_bytes = _grown(self.key_moves_bytes, self.capacity)
            self.key_hist = _grown(self.key_hist, self.capacity)
            self.key_min = _grown(self.key_min, self.capacity, _NO_MIN)
            self.key_max = _grown(self.key_max, self.capacity, -1)
            self.key_gated = _grown(self.key_gated, self.capacity)
            for proc in self.procs.values():
                proc.grow(self.capacity)
        self.key_class[key_id] = classify(cat, name)
        self.key_fetch[key_id] = fetch_series(cat, name)
        self.key_cat[key_id] = category_of(cat)
        phase = N.PHASE_EVENTS.get((cat, name)) or ("root" if (cat, name) == N.ROOT_EVENT else None)
        self.key_phase[key_id] = PHASE_CODES[phase] if phase else NONE
        self.key_gated[key_id] = cat in GATED_CATS
        self.key_moves_bytes[key_id] = cat in N.SYSCALL_CATS and (name in N.READ_OPS or name in N.WRITE_OPS)
        return key_id

    def _proc(self, pid: int, event: LeanEvent) -> _Process:
        proc = self.procs.get(pid)
        if proc is None:
            proc = self.procs[pid] = _Process(self.capacity)
        if proc.hostname is None and event.args.hostname is not None:
            proc.hostname = str(event.args.hostname)
        return proc

    # -- one batch ------------------------------------------------------------------------
    def add(self, events: list[LeanEvent], ph: np.ndarray) -> None:
        n = len(events)
        if not n:
            return
        kid = self._key_ids(events)
        self.phases += np.bincount(np.where((ph > 0) & (ph <= METADATA), ph, 0), minlength=5)
        pid = np.fromiter((e.pid for e in events), np.int64, n)
        scale = self.meta.time_metric.ns
        ts = np.fromiter((e.ts for e in events), np.int64, n) * scale
        dur = np.fromiter((e.dur for e in events), np.int64, n) * scale
        ret = np.fromiter((e.args.ret for e in events), np.int64, n)
        place = np.fromiter((e.args.count for e in events), np.int64, n)
        size = np.fromiter((e.args.image_size for e in events), np.float64, n)
        rows = np.arange(n)  # position of each array entry in ``events``
        complete = ph == COMPLETE
        if not complete.all():  # metadata lines, counters, aggregated records
            for i in np.flatnonzero(ph == AGGREGATED):
                self._add_aggregated(events[int(i)], int(kid[i]))
            rows = np.flatnonzero(complete)
            if not len(rows):
                return
            kid, pid, ts, dur, ret, size, place = (a[rows] for a in (kid, pid, ts, dur, ret, size, place))
        moved = np.where(self.key_moves_bytes[kid], np.maximum(ret, 0), np.maximum(size, 0).astype(np.int64))
        bins = bins_of(dur)
        self._count_key_hist(kid, bins)
        np.minimum.at(self.key_min, kid, dur)  # ~0.05 ms per 25k events
        np.maximum.at(self.key_max, kid, dur)
        if (pid == pid[0]).all():  # the rule: one process per file
            self._add_to_process(self._proc(int(pid[0]), events[int(rows[0])]), kid, ts, dur, moved, bins)
        else:
            for proc_pid in np.unique(pid):
                mine = np.flatnonzero(pid == proc_pid)
                self._add_to_process(self._proc(int(proc_pid), events[int(rows[mine[0]])]),
                                     kid[mine], ts[mine], dur[mine], moved[mine], bins[mine])
        if self.meta.custom.get(SAMPLED_KEY) not in (None, "1") and self.gated_kept < MAX_WEIGHED:
            gated = self.key_gated[kid]
            if gated.any():
                self.gated.append((kid[gated], pid[gated], ts[gated], dur[gated], moved[gated], place[gated]))
                self.gated_kept += int(gated.sum())
        for i in rows[kid == self.start_id]:
            event = events[int(i)]
            if event.args.ppid >= 0:
                self.procs[event.pid].ppid = event.args.ppid
        first = (self.key_fetch[kid] == FETCH_WAIT) & (place == 1)
        if first.any():  # the wait for an epoch's first batch (workers start, caches fill)
            self.first_fetch[0] += int(first.sum())
            self.first_fetch[1] += int(dur[first].sum())
            self.first_fetch[2] = max(self.first_fetch[2], int(dur[first].max()))
            for i in np.flatnonzero(first):
                if len(self.intervals) < MAX_INTERVALS:
                    self.intervals.append((int(pid[i]), PHASE_CODES["first_fetch"], int(ts[i]), int(ts[i] + dur[i])))
        phase = self.key_phase[kid]
        for i in np.flatnonzero(phase != NONE):
            if len(self.intervals) < MAX_INTERVALS:
                self.intervals.append((int(pid[i]), int(phase[i]), int(ts[i]), int(ts[i] + dur[i])))
            else:
                self.dropped_intervals += 1
        if self.spill is not None:
            cats = self.key_cat[kid]
            keep = cats != NONE  # every complete event but dftracer's own records
            if keep.any():
                self.spill.write(pid[keep], ts[keep], dur[keep], self.key_class[kid][keep], self.key_fetch[kid][keep],
                                 cats[keep])

    def _count_key_hist(self, kid: np.ndarray, bins: np.ndarray) -> None:
        width = (int(kid.max()) + 1) * NBINS
        flat = kid * NBINS + bins
        if width <= _DENSE_HIST_LIMIT:
            self.key_hist.reshape(-1)[:width] += np.bincount(flat, minlength=width)
        else:
            cells, counts = np.unique(flat, return_counts=True)
            np.add.at(self.key_hist.reshape(-1), cells, counts)

    def _add_to_process(self, proc: _Process, kid, ts, dur, moved, bins) -> None:
        k = len(self.keys)
        proc.count[:k] += np.bincount(kid, minlength=k)
        proc.dur[:k] += _sum_by(kid, dur, k)
        proc.bytes[:k] += _sum_by(kid, moved, k)
        proc.hist += np.bincount(bins, minlength=NBINS)
        low, high = int(dur.min()), int(dur.max())
        proc.min_dur = low if proc.min_dur is None else min(proc.min_dur, low)
        proc.max_dur = high if proc.max_dur is None else max(proc.max_dur, high)
        first, last = int(ts.min()), int((ts + dur).max())
        proc.first = first if proc.first is None else min(proc.first, first)
        proc.last = last if proc.last is None else max(proc.last, last)

    def _add_aggregated(self, event: LeanEvent, key_id: int) -> None:
        """A ph 3 record stands for ``dft_cnt`` events with ``dur_sum`` (or ``dur``) in total;
        its durations enter the sketch at their mean."""
        args = event.args
        count = max(args.dft_cnt, 1)
        total = (args.dur_sum if args.dur_sum >= 0 else args.dur if args.dur >= 0 else event.dur)
        total *= self.meta.time_metric.ns
        proc = self._proc(event.pid, event)
        proc.count[key_id] += count
        proc.dur[key_id] += total
        mean = total // count
        mean_bin = int(bins_of(np.array([mean]))[0])
        proc.hist[mean_bin] += count
        self.key_hist[key_id, mean_bin] += count
        # its events' own durations are not known: the bounds are those of the mean
        self.key_min[key_id] = min(int(self.key_min[key_id]), mean)
        self.key_max[key_id] = max(int(self.key_max[key_id]), mean)
        proc.min_dur = mean if proc.min_dur is None else min(proc.min_dur, mean)
        proc.max_dur = mean if proc.max_dur is None else max(proc.max_dur, mean)

    def _weigh(self, summary: Summary, sampling: Sampling) -> Sampling:
        """The step events' cells for all steps, each event weighed by the traced step it is in
        (:meth:`Sampling.with_steps`: the steps found from the batch loop's events kept by
        :meth:`add`); the sketches keep the traced durations. Returns the sampling with its steps."""
        kid, pid, ts, dur, moved, place = (np.concatenate(parts) for parts in zip(*self.gated))
        ids = self.ids.get(N.DATALOADER_CAT, {})

        def of(name: str) -> np.ndarray:
            return np.flatnonzero(kid == ids[name]) if name in ids else np.zeros(0, np.int64)

        waits, bodies, regions = of(N.FETCH_ITER), of(N.FETCH_BLOCK), of(N.FETCH)
        sampling = sampling.with_steps(ts[waits], (ts + dur)[waits], place[waits], ts[bodies], (ts + dur)[bodies],
                                       ts[regions], (ts + dur)[regions])
        weight = sampling.weights(ts)
        whole = _weighed_cells(kid, dur, moved, weight, self.keys)
        for key, cell in whole.items():
            stats = summary.by_key[key]
            stats.count, stats.dur_ns, stats.bytes = cell.count, cell.dur_ns, cell.bytes
        for (_, proc_pid), proc in summary.processes.items():
            mine = pid == proc_pid
            proc.by_key.update(_weighed_cells(kid[mine], dur[mine], moved[mine], weight[mine], self.keys))
            proc.total.count = sum(c.count for c in proc.by_key.values())
            proc.total.dur_ns = sum(c.dur_ns for c in proc.by_key.values())
        return sampling

    # -- the end ----------------------------------------------------------------------------
    def finish(self, reader: TraceReader) -> Summary:
        path = reader.path
        role = role_of(path)
        summary = Summary()
        for key_id, key in enumerate(self.keys):
            count = sum(int(p.count[key_id]) for p in self.procs.values())
            if count:
                stats = summary.by_key[key] = Stats(
                    count, sum(int(p.dur[key_id]) for p in self.procs.values()),
                    sum(int(p.bytes[key_id]) for p in self.procs.values()),
                    LogHistogram.from_dense(self.key_hist[key_id], int(self.key_min[key_id]),
                                            int(self.key_max[key_id])))
                assert stats.sketch.total == count
        for pid, proc in self.procs.items():
            host = proc.hostname or self.meta.host
            by_key = {self.keys[i]: Cell(int(proc.count[i]), int(proc.dur[i]), int(proc.bytes[i]))
                      for i in np.flatnonzero(proc.count[:len(self.keys)])}
            total = Stats(int(proc.count.sum()), int(proc.dur.sum()), int(proc.bytes.sum()),
                          LogHistogram.from_dense(proc.hist, proc.min_dur, proc.max_dur))
            summary.processes[(path, pid)] = ProcessSummary(
                path, pid, host, role, proc.ppid, proc.first, proc.last, total, by_key)
        summary.sampling = Sampling.of_metadata(self.meta.custom, self.meta.time_metric.ns)
        if summary.sampling is not None and summary.sampling.sampled:
            if self.gated and self.gated_kept < MAX_WEIGHED and summary.sampling.passes:
                summary.sampling = self._weigh(summary, summary.sampling)
            else:
                _scale(summary, summary.sampling)
        hosts = {pid: proc.hostname or self.meta.host for pid, proc in self.procs.items()}
        summary.first_fetch = tuple(self.first_fetch)
        summary.intervals = [(hosts.get(pid), pid, code, start, end) for pid, code, start, end in self.intervals]
        if self.dropped_intervals:
            summary.problems.append(P.Problem(path, P.TOO_MANY_PHASES, f"more than {MAX_INTERVALS} phase events: "
                                              "the phases of the rest are not told apart", self.dropped_intervals))
        phases = {ph: int(c) for ph, c in enumerate(self.phases) if c}
        summary.files[path] = FileInfo(path, role, self.meta.time_metric.name, reader.lines, phases,
                                       reader.malformed, sorted(set(self.meta.hosts.values())))
        summary.problems.extend(reader.problems)
        if phases.get(AGGREGATED):
            summary.problems.append(P.Problem(
                path, P.AGGREGATED, f"aggregated records ({N.ENV_AGGREGATION}): counted in the summary "
                "at their mean duration, absent from the overlap timeline", phases[AGGREGATED]))
        return summary


def _weighed_cells(kid, dur, moved, weight, keys) -> dict[tuple, Cell]:
    """Counts, times and bytes of each key, every event counted ``weight`` times."""
    n = len(keys)
    counts = np.bincount(kid, weight, n)
    durs = np.bincount(kid, dur * weight, n)
    moved_w = np.bincount(kid, moved * weight, n)
    return {keys[k]: Cell(round(counts[k]), round(durs[k]), round(moved_w[k])) for k in np.flatnonzero(counts)}


def _scale(summary: Summary, sampling: Sampling) -> None:
    """A sampled file whose steps cannot be told apart (its passes missing, or too many events
    to keep): its step events scaled by the process's steps over its traced ones."""
    scale = sampling.count_scale
    cells = [summary.by_key.items()] + [p.by_key.items() for p in summary.processes.values()]
    for items in cells:
        for (cat, _), cell in items:
            if cat in GATED_CATS:
                cell.count, cell.dur_ns, cell.bytes = (round(cell.count * scale), round(cell.dur_ns * scale),
                                                       round(cell.bytes * scale))
    for proc in summary.processes.values():
        proc.total.count = sum(c.count for c in proc.by_key.values())
        proc.total.dur_ns = sum(c.dur_ns for c in proc.by_key.values())


def _sum_by(kid: np.ndarray, values: np.ndarray, k: int) -> np.ndarray:
    """Exact int64 sums of ``values`` per key id (float bincount is exact below 2^53)."""
    if int(np.abs(values).sum()) < _EXACT_FLOAT:
        return np.bincount(kid, weights=values, minlength=k).astype(np.int64)
    out = np.zeros(k, np.int64)
    np.add.at(out, kid, values)
    return out


def _grown(array: np.ndarray, capacity: int, fill: object = 0) -> np.ndarray:
    out = np.full((capacity,) + array.shape[1:], fill, array.dtype)
    out[:len(array)] = array
    return out
