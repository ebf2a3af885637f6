"""Overlap of data loading and compute (ML-R24): the bucketed lower bound of ``analysis.md``.

Per bucket of width ``w``: ``overlap = max(0, busyA + busyB - w)`` where ``busy`` is the
largest per-process busy time of a class in the bucket (:mod:`~dftpass.traces.busy`). Two
activities that together keep the bucket busier than ``w`` must run at the same time for
at least the excess (pigeonhole), so the sum over buckets is a lower bound of the time
loading ran while compute ran. As a share of compute time it can never pass 1 (busyB <= w
in every bucket); a value above 1 is a bug and raises.

Bucket width: by default the median duration of the class with the shorter events (see
:func:`default_width_ns`); pass ``width_s`` to override. Events of one process are serial unless threaded, so a class A
event and a class B event of the *same* process never make overlap; that is why the
DataLoader worker processes must be traced. When no worker process has loading events
(spawn start method without ``initialize_log`` in the workers, or ``num_workers=0``), the
verdict is "cannot judge", never 0.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dftpass.traces import names as N
from dftpass.traces.busy import ClassBusy, Sparse
from dftpass.traces.classes import (BATCHES, CATEGORY_NAMES, CATEGORY_SERIES, COMPUTE, FETCH_BODY, FETCH_WAIT, LOADING,
                                    LOADING_IN_MAIN, LOADING_IN_WORKERS, NONE, classify)
from dftpass.traces.phases import LABELS, PhaseTimeline
from dftpass.traces.sampling import GATED_CATS, Sampling
from dftpass.traces.sketch import LogHistogram
from dftpass.traces.summary import PHASE_CODES, Summary

NO_OVERLAP_BELOW = 0.1
TARGET = 0.5
#: the narrowest default bucket (1 us), for traces of zero-length events
MIN_WIDTH_NS = 1_000
#: at most about this many bucket pieces of busy time (memory and time of the busy pass)
PIECE_BUDGET = 2_000_000

NO_OVERLAP, BELOW_TARGET, TARGET_MET, CANNOT_JUDGE = "no overlap", "below target", "target met", "cannot judge"
#: compute-bound: loading is short next to compute, so its share of compute stays low, but most
#: of it runs while the model computes
LOADING_HIDDEN = "loading hidden"
#: loading and compute in one process, one after the other: nothing can overlap
SERIAL = "no overlap"
#: the loop waits for data this share of its time or more: a data stall, whatever the overlap
STALL_SHARE = 0.2


@dataclass(frozen=True)
class PhaseOverlap:
    """One phase's figures (seconds) and its own verdict: each measured on the buckets whose
    middle falls in the phase."""

    phase: str
    verdict: str
    reason: str
    span_s: float                    # time the phase's regions cover
    compute_s: float
    loading_s: float                 # data loading, any process (busiest one per bucket)
    loading_main_s: float            # ... in the training process(es)
    loading_workers_s: float         # ... in worker processes (added up over them)
    overlap_s: float
    fetch_wait_s: float              # the batch loop waiting for a batch
    fetch_block_s: float             # the batch loop's body
    categories: dict[str, float]     # category -> time, nested events once, added over processes
    overlap_fraction: float | None = None
    first_fetch_s: float = 0.0       # the waits for a loop's first batch (workers starting, caches filling)
    first_fetches: int = 0
    batches: int = 0                 # the batches the phase's loops received (one per wait)

    @property
    def batches_per_s(self) -> float | None:
        """The phase's throughput: batches over the time its regions cover."""
        return self.batches / self.span_s if self.batches and self.span_s else None

    @property
    def fetch_stall_share(self) -> float | None:
        return stall_share(self.fetch_wait_s, self.fetch_block_s, self.span_s)

    def to_dict(self) -> dict:
        out = {k: getattr(self, k) for k in self.__dataclass_fields__}
        out["fetch_stall_share"] = self.fetch_stall_share
        out["batches_per_s"] = self.batches_per_s
        return out


@dataclass(frozen=True)
class Overlap:
    """The overlap report. Fractions are None when the verdict is "cannot judge"."""

    verdict: str
    reason: str
    overlap_fraction: float | None   # overlap / compute time (share of A)
    stall_share: float | None        # 1 - overlap_fraction
    loading_share: float | None      # overlap / loading time (share of B)
    compute_s: float
    loading_s: float
    overlap_s: float
    bucket_width_s: float
    fetch_iter_s: float              # the loop waiting for batches
    fetch_block_s: float             # the loop body
    loading_workers: int             # worker processes with loading events
    #: per phase (train, evaluate, test, outside), when the trace has phase regions
    phases: dict = None  # type: ignore[assignment]
    #: the phase the run's verdict is about: train when there is one
    primary_phase: str | None = None
    #: category -> time over the whole run, nested events once, added over processes
    categories: dict = None  # type: ignore[assignment]
    #: the whole run's figures as one phase ("all"), for runs without phase regions
    whole: PhaseOverlap | None = None

    @property
    def fetch_stall_share(self) -> float | None:
        """Share of the batch loop spent waiting for data: iter / (iter + block)."""
        loop = self.fetch_iter_s + self.fetch_block_s
        return self.fetch_iter_s / loop if loop else None


def default_width_ns(summary: Summary) -> int:
    """The median duration of the class whose events are shorter (from the summary's
    sketches), at least 1 us, and wide enough that the busy pieces of both classes stay under
    :data:`PIECE_BUDGET` buckets.

    Why the shorter median and not 2 x p99: the bound loses, in each bucket, what the two
    classes' busy times could have fit side by side; buckets short next to the short class's
    events make it tight. On the fixture app (compute events ~30-200 ms, sample loads ~0.7 ms)
    2 x p99 (0.4 s buckets) reported 0.01% overlap, the median width 3.9%, and 0.1 ms buckets
    3.9%: the bound had converged (docs/traces.md)."""
    by_class = {COMPUTE: LogHistogram(), LOADING: LogHistogram()}
    total_ns = 0
    for (cat, name), stats in summary.by_key.items():
        cls = classify(cat, name)
        if cls != NONE:
            by_class[cls].merge(stats.sketch)
            total_ns += stats.dur_ns
    medians = [h.quantile(0.5) for h in by_class.values() if h.total]
    if not medians:
        return MIN_WIDTH_NS
    return max(MIN_WIDTH_NS, round(min(medians)), -(-total_ns // PIECE_BUDGET))


def _in(series: Sparse, labels_of, phase: int | None) -> tuple[np.ndarray, np.ndarray]:
    """The buckets of ``series`` in one phase (all of them for None)."""
    buckets, values = series
    if phase is None or not len(buckets):
        return buckets, values
    keep = labels_of(buckets) == phase
    return buckets[keep], values[keep]


def _figures(busy: ClassBusy, labels_of, phase: int | None, instants_of=None, sampling: Sampling | None = None) -> dict:
    """One phase's figures: the busy series by the buckets ``labels_of`` puts in ``phase``,
    the counts (batches) by the instants ``instants_of`` does (all of them for None).

    A sampled run's figures are for all its steps (:mod:`~dftpass.traces.sampling`): each
    bucket of what runs in the loop's body (compute, the overlap beside it) weighs its pass's
    ratio of all bodies to the traced ones, the wait and the loading the training process does
    in it the waits' ratio, a batch its pass's steps per traced step; the workers trace every
    sample and weigh 1."""
    width = busy.width_ns
    sampled = sampling is not None and sampling.sampled

    def weight(buckets: np.ndarray, kind: str, instants: bool = False) -> np.ndarray | float:
        if not sampled:
            return 1.0
        return sampling.weights(buckets if instants else buckets * width + width // 2, kind)

    a_idx, a = _in(busy.get(COMPUTE), labels_of, phase)
    b_idx, b = _in(busy.get(LOADING), labels_of, phase)
    _, ia, ib = np.intersect1d(a_idx, b_idx, assume_unique=True, return_indices=True)

    def seconds(series: Sparse, kind: str = "body") -> float:
        buckets, values = _in(series, labels_of, phase)
        return float((values * weight(buckets, kind)).sum()) / 1e9

    # the workers are never sampled: loading seen only in the training process is its own
    workers_s = seconds(busy.total(LOADING_IN_WORKERS), "none")
    in_main = sampled and not workers_s
    batch_idx, batch_n = _in(busy.total(BATCHES), instants_of, phase)
    scales = {N.COMPUTE_CAT: "body", N.DATALOADER_CAT: "loop", N.DATA_CAT: "wait" if in_main else "none"}
    return dict(compute_s=float((a * weight(a_idx, "body")).sum()) / 1e9,
                loading_s=float((b * weight(b_idx, "wait")).sum() if in_main else b.sum()) / 1e9,
                overlap_s=float((np.maximum(a[ia] + b[ib] - width, 0) * weight(a_idx[ia], "body")).sum()) / 1e9,
                loading_main_s=seconds(busy.total(LOADING_IN_MAIN), "wait"),
                loading_workers_s=workers_s,
                fetch_wait_s=seconds(busy.get(FETCH_WAIT), "wait"), fetch_block_s=seconds(busy.get(FETCH_BODY)),
                batches=int(round(float((batch_n * weight(batch_idx, "count", instants=True)).sum()))),
                categories={name: round(seconds(busy.total(CATEGORY_SERIES + i),
                                                scales.get(name, "body") if name in GATED_CATS else "none"), 9)
                            for i, name in enumerate(CATEGORY_NAMES) if len(busy.total(CATEGORY_SERIES + i)[0])})


def stall_share(wait_s: float, block_s: float, span_s: float) -> float | None:
    """The share of its loop a batch loop waits for data: wait / (wait + body) with
    ``fetch.iter``; a loop whose waits are fetch regions (``next(it)`` between
    ``fetch.start()`` and ``.stop()``) records no body, so its phase's span is the loop."""
    if block_s:
        return wait_s / (wait_s + block_s)
    if wait_s and span_s:
        return min(1.0, wait_s / span_s)
    return None


def _phase_verdict(f: dict, workers: int, span_s: float) -> tuple[str, str, float | None]:
    """(verdict, reason, overlap fraction) of one phase's figures."""
    wait, block = f["fetch_wait_s"], f["fetch_block_s"]
    stall = stall_share(wait, block, span_s)
    stall_text = f"; the batch loop waits for data {stall:.1%} of its time" if stall is not None else ""
    compute, loading = f["compute_s"], f["loading_s"]
    if not compute and not wait:
        return CANNOT_JUDGE, "no compute events and no batch loop in this phase", None
    if not compute:
        if stall is not None and stall >= STALL_SHARE:
            return NO_OVERLAP, f"no compute events{stall_text}", None
        return CANNOT_JUDGE, f"no compute events (cat {N.COMPUTE_CAT}) in this phase{stall_text}", None
    fraction = f["overlap_s"] / compute
    if not f["loading_workers_s"]:
        if f["loading_main_s"]:
            return SERIAL, ("no worker process loads: batches are loaded in the training process itself, one "
                            f"after the other with compute{stall_text}"), 0.0
        return CANNOT_JUDGE, (f"no worker process left loading events{stall_text}" if workers == 0 else
                              f"no loading events in this phase{stall_text}"), None
    if stall is not None and stall >= STALL_SHARE and fraction >= NO_OVERLAP_BELOW:
        return BELOW_TARGET, (f"loading overlaps {fraction:.1%} of compute, but the workers do not keep up"
                              f"{stall_text}"), fraction
    loading_share = f["overlap_s"] / loading if loading else 0.0
    if fraction < TARGET and loading_share >= TARGET:
        return LOADING_HIDDEN, (f"{loading_share:.1%} of the loading runs while compute runs (loading takes "
                                f"{loading / compute:.1%} of compute's time){stall_text}"), fraction
    if fraction < NO_OVERLAP_BELOW:
        return NO_OVERLAP, f"loading overlaps {fraction:.1%} of compute (< {NO_OVERLAP_BELOW:.0%}){stall_text}", fraction
    if fraction >= TARGET:
        return TARGET_MET, f"loading overlaps {fraction:.1%} of compute (>= {TARGET:.0%}){stall_text}", fraction
    return BELOW_TARGET, f"loading overlaps {fraction:.1%} of compute (target {TARGET:.0%}){stall_text}", fraction


def phases_of(summary: Summary, busy: ClassBusy, workers: int) -> tuple[dict[str, PhaseOverlap], str | None]:
    """Every phase's figures and verdict, and the phase the run's verdict is about (train
    when there is one; else the phase with the most compute)."""
    timeline = PhaseTimeline.of(summary)
    if not timeline.has_phases:
        return {}, None

    def labels_of(buckets: np.ndarray) -> np.ndarray:
        return timeline.label_buckets(buckets, busy.width_ns)

    firsts = [(start, end) for _, _, code, start, end in summary.intervals if code == PHASE_CODES["first_fetch"]]
    first_labels = timeline.label(np.array([(s + e) // 2 for s, e in firsts], np.int64)) if firsts else np.zeros(0)
    out: dict[str, PhaseOverlap] = {}
    for code, name in enumerate(LABELS):
        f = _figures(busy, labels_of, code, timeline.label, summary.sampling)
        mine = [e - s for (s, e), label in zip(firsts, first_labels) if label == code]
        f.update(first_fetch_s=sum(mine) / 1e9, first_fetches=len(mine))
        if not (f["compute_s"] or f["loading_s"] or f["fetch_wait_s"] or f["fetch_block_s"] or
                timeline.spans.get(name)):
            continue
        verdict, reason, fraction = _phase_verdict(f, workers, timeline.spans.get(name, 0) / 1e9)
        out[name] = PhaseOverlap(name, verdict, reason, timeline.spans.get(name, 0) / 1e9, **f,
                                 overlap_fraction=fraction)
    primary = "train" if "train" in out else max(
        (p for p in out if p != "outside"), key=lambda p: out[p].compute_s + out[p].fetch_wait_s, default=None)
    return out, primary


def judge(summary: Summary, busy: ClassBusy) -> Overlap:
    """The overlap report from a run's summary and the busy times of its classes."""
    width = busy.width_ns
    (a_idx, a), (b_idx, b) = busy.get(COMPUTE), busy.get(LOADING)
    _, ia, ib = np.intersect1d(a_idx, b_idx, assume_unique=True, return_indices=True)
    overlap_ns = int(np.maximum(a[ia] + b[ib] - width, 0).sum())
    compute_ns, loading_ns = int(a.sum()), int(b.sum())
    iter_stats, block_stats = (summary.by_key.get((N.DATALOADER_CAT, name)) for name in (N.FETCH_ITER, N.FETCH_BLOCK))
    # a process split over several files (compacted chunks) is one worker: count (host, pid)
    workers = {(p.host, p.pid) for p in summary.workers() if any(classify(*key) == LOADING for key in p.by_key)}
    phases, primary = phases_of(summary, busy, len(workers))
    whole = _figures(busy, None, None, sampling=summary.sampling)
    if summary.sampling is not None and summary.sampling.sampled:  # the run's figures for all its steps
        compute_ns, loading_ns = round(whole["compute_s"] * 1e9), round(whole["loading_s"] * 1e9)
        overlap_ns = min(round(whole["overlap_s"] * 1e9), compute_ns, loading_ns)
    verdict, reason, fraction = _phase_verdict(whole, len(workers), summary.span_s)
    whole.update(first_fetch_s=summary.first_fetch[1] / 1e9, first_fetches=summary.first_fetch[0])
    whole_phase = PhaseOverlap("all", verdict, reason, summary.span_s, **whole, overlap_fraction=fraction)
    common = dict(compute_s=compute_ns / 1e9, loading_s=loading_ns / 1e9, overlap_s=overlap_ns / 1e9,
                  bucket_width_s=width / 1e9,
                  fetch_iter_s=iter_stats.total_s if iter_stats else 0.0,
                  fetch_block_s=block_stats.total_s if block_stats else 0.0,
                  loading_workers=len(workers), phases=phases, primary_phase=primary,
                  categories=whole["categories"], whole=whole_phase)
    if not compute_ns:
        return Overlap(CANNOT_JUDGE, f"no compute events (cat {N.COMPUTE_CAT}) with a timeline in the trace",
                       None, None, None, **common)
    if not workers:
        # the same judgement as a phase's: loading seen in the training process is serial with
        # compute ("no overlap"); no loading anywhere cannot be judged (the diagnosis says why)
        if whole_phase.verdict == SERIAL:
            return Overlap(SERIAL, whole_phase.reason, 0.0, 1.0, 0.0, **common)
        return Overlap(CANNOT_JUDGE, whole_phase.reason, None, None, None, **common)
    fraction = overlap_ns / compute_ns
    assert 0.0 <= fraction <= 1.0, f"overlap fraction {fraction} outside [0, 1]: a bug in the bucket method"
    loading_share = overlap_ns / loading_ns
    assert loading_share <= 1.0, f"loading share {loading_share} above 1: a bug in the bucket method"
    if fraction < TARGET and loading_share >= TARGET:
        # the fraction cannot exceed loading/compute: judge by the share of loading hidden
        verdict, reason = LOADING_HIDDEN, (f"{loading_share:.1%} of the loading runs while compute runs; it "
                                           f"overlaps only {fraction:.1%} of compute because loading takes "
                                           f"{loading_ns / compute_ns:.1%} of compute's time")
    elif fraction < NO_OVERLAP_BELOW:
        verdict, reason = NO_OVERLAP, f"loading overlaps {fraction:.1%} of compute (< {NO_OVERLAP_BELOW:.0%})"
    elif fraction >= TARGET:
        verdict, reason = TARGET_MET, f"loading overlaps {fraction:.1%} of compute (>= {TARGET:.0%})"
    else:
        verdict, reason = BELOW_TARGET, f"loading overlaps {fraction:.1%} of compute (target {TARGET:.0%})"
    return Overlap(verdict, reason, fraction, 1.0 - fraction, loading_share, **common)
