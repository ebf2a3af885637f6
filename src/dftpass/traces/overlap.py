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
from dftpass.traces.busy import ClassBusy
from dftpass.traces.classes import COMPUTE, LOADING, NONE, classify
from dftpass.traces.sketch import LogHistogram
from dftpass.traces.summary import Summary

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
    common = dict(compute_s=compute_ns / 1e9, loading_s=loading_ns / 1e9, overlap_s=overlap_ns / 1e9,
                  bucket_width_s=width / 1e9,
                  fetch_iter_s=iter_stats.total_s if iter_stats else 0.0,
                  fetch_block_s=block_stats.total_s if block_stats else 0.0,
                  loading_workers=len(workers))
    if not compute_ns:
        return Overlap(CANNOT_JUDGE, f"no compute events (cat {N.COMPUTE_CAT}) with a timeline in the trace",
                       None, None, None, **common)
    if not workers:
        return Overlap(CANNOT_JUDGE, "no worker process left loading events: DataLoader workers under the "
                       "spawn/forkserver start method write no trace unless they call initialize_log "
                       "(worker_init_fn), and num_workers=0 loads in the training process itself",
                       None, None, None, **common)
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
