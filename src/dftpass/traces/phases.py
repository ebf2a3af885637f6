"""The phases of a run on one timeline: which phase each instant belongs to.

The program's ``ai.pipeline.train`` / ``.evaluate`` / ``.test`` regions (kept by the
summary as intervals) cut the run into phases. Phases nest (Lightning and Keras validate
inside the training of an epoch; a training function may evaluate): an instant belongs to
the innermost phase around it, which is the evaluation or test one when both are open.
Worker processes have no phase events of their own: their events take the phase of the
time they happen in, which is the phase of the loop their batches are for. An instant in no
phase is ``outside`` (start-up, data preparation, the time around the loops).

:class:`PhaseTimeline` labels buckets of the overlap's timeline (by their middle), so every
per-bucket figure (overlap, busy time, the loop's wait) splits by phase.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from dftpass.traces.summary import PHASE_CODES, PHASES, Summary

OUTSIDE = "outside"
#: the phases in report order; the label of a bucket is an index into it
LABELS = (*PHASES, OUTSIDE)
_OUTSIDE = len(PHASES)
#: which phase wins where phases overlap (higher wins): the inner one
_PRIORITY = {"train": 1, "evaluate": 2, "test": 2}


@dataclass
class PhaseTimeline:
    #: sorted start times (ns) of the segments, and the label of each (index into LABELS)
    starts: np.ndarray
    labels: np.ndarray
    #: per phase: the time it covers (ns) and how many regions it had
    spans: dict[str, int]
    regions: dict[str, int]
    #: the root region's [start, end) ns, across processes (None: no root event)
    root: tuple[int, int] | None = None
    root_ns: int = 0

    @classmethod
    def of(cls, summary: Summary) -> "PhaseTimeline":
        phase_ivs = [(code, start, end) for _, _, code, start, end in summary.intervals
                     if code < len(PHASES) and end > start]
        roots = [(start, end) for _, _, code, start, end in summary.intervals if code == PHASE_CODES["root"]]
        root = (min(s for s, _ in roots), max(e for _, e in roots)) if roots else None
        root_ns = max((e - s for s, e in roots), default=0)
        regions = {p: sum(1 for code, _, _ in phase_ivs if code == PHASE_CODES[p]) for p in PHASES}
        if not phase_ivs:
            return cls(np.zeros(1, np.int64), np.full(1, _OUTSIDE, np.int64), {p: 0 for p in PHASES}, regions, root,
                       root_ns)
        edges = np.unique(np.array([t for _, s, e in phase_ivs for t in (s, e)], np.int64))
        best = np.full(len(edges), _OUTSIDE, np.int64)
        rank = np.zeros(len(edges), np.int64)
        for code, start, end in phase_ivs:
            name = PHASES[code]
            first, last = np.searchsorted(edges, [start, end])
            segment = slice(first, last)  # the segments [edges[i], edges[i+1]) it covers
            better = rank[segment] < _PRIORITY[name]
            best[segment] = np.where(better, code, best[segment])
            rank[segment] = np.where(better, _PRIORITY[name], rank[segment])
        spans = {p: 0 for p in PHASES}
        lengths = np.diff(edges)
        for code in range(len(PHASES)):
            spans[PHASES[code]] = int(lengths[best[:-1] == code].sum())
        # segments start at every edge; before the first edge is outside too
        starts = np.r_[np.iinfo(np.int64).min, edges]
        labels = np.r_[_OUTSIDE, best]
        return cls(starts, labels, spans, regions, root, root_ns)

    @property
    def has_phases(self) -> bool:
        return any(self.regions.values())

    def label(self, times_ns: np.ndarray) -> np.ndarray:
        """The phase label (index into :data:`LABELS`) of each instant."""
        return self.labels[np.searchsorted(self.starts, times_ns, side="right") - 1]

    def label_buckets(self, buckets: np.ndarray, width_ns: int) -> np.ndarray:
        """The phase label of each bucket, by its middle."""
        return self.label(buckets * width_ns + width_ns // 2)
