"""Overlap of data loading and compute (ML-R24): the bucketed lower bound of ``analysis.md``.

Per bucket of width ``w``: ``overlap = max(0, busyA + busyB - w)`` where ``busy`` is the
largest per-process busy time of a class in the bucket (:mod:`~dftpass.traces.busy`). Two
activities that together keep the bucket busier than ``w`` must run at the same time for
at least the excess (pigeonhole), so the sum over buckets is a lower bound of the time
loading ran while compute ran. As a share of compute time it can never pass 1 (busyB <= w
in every bucket); a value above 1 is a bug and raises.

Bucket width: by default twice the 99th percentile of the durations of both classes (from
the summary's sketches), so almost every event spans at most two buckets; pass
``width_s`` to override. Events of one process are serial unless threaded, so a class A
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

NO_OVERLAP, BELOW_TARGET, TARGET_MET, CANNOT_JUDGE = "no overlap", "below target", "target met", "cannot judge"


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
    """2 x p99 of the durations of the compute and loading events of the summary."""
    merged = LogHistogram()
    for (cat, name), stats in summary.by_key.items():
        if classify(cat, name) != NONE:
            merged.merge(stats.sketch)
    p99 = merged.quantile(0.99)
    return max(MIN_WIDTH_NS, round(2 * p99)) if merged.total else MIN_WIDTH_NS


def judge(summary: Summary, busy: ClassBusy) -> Overlap:
    """The overlap report from a run's summary and the busy times of its classes."""
    width = busy.width_ns
    (a_idx, a), (b_idx, b) = busy.get(COMPUTE), busy.get(LOADING)
    _, ia, ib = np.intersect1d(a_idx, b_idx, assume_unique=True, return_indices=True)
    overlap_ns = int(np.maximum(a[ia] + b[ib] - width, 0).sum())
    compute_ns, loading_ns = int(a.sum()), int(b.sum())
    iter_stats, block_stats = (summary.by_key.get((N.DATALOADER_CAT, name)) for name in (N.FETCH_ITER, N.FETCH_BLOCK))
    workers = [p for p in summary.workers()
               if any(classify(*key) == LOADING for key in p.by_key)]
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
    if fraction < NO_OVERLAP_BELOW:
        verdict, reason = NO_OVERLAP, f"loading overlaps {fraction:.1%} of compute (< {NO_OVERLAP_BELOW:.0%})"
    elif fraction >= TARGET:
        verdict, reason = TARGET_MET, f"loading overlaps {fraction:.1%} of compute (>= {TARGET:.0%})"
    else:
        verdict, reason = BELOW_TARGET, f"loading overlaps {fraction:.1%} of compute (target {TARGET:.0%})"
    return Overlap(verdict, reason, fraction, 1.0 - fraction, loading_share, **common)
