"""A sampled trace (issue 31): what the runtime's gate wrote (:mod:`dftpass.runtime.sampling`),
and how the traced steps' events stand for all steps.

The training process of a sampled run writes its step regions for one step in k, and ends its
trace with ``CM`` lines ``dftpass.sampling.*``: every step's wait for its batch and its body,
timed with or without events. Totals are estimated with those as ratio estimators, not by
multiplying by k: the first steps and each pass's first and last are always traced and are
not typical (a worker start-up wait is the first step's), so

* the loop's wait (``fetch.iter``) is scaled by all waits over the traced waits: exact;
* the loop's body and what runs in it (compute, device, comm, data loaded in the training
  process) by all bodies over the traced bodies;
* counts by all steps over the traced steps.

An estimate is unsafe when a step that was not traced was much longer than the traced ones:
the longest untraced wait and body are in the metadata, and :meth:`Sampling.warnings` says so.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field, fields

import numpy as np

from dftpass.core import emitter as E

#: the cats of the regions the gate samples (the training process's own events of them)
GATED_CATS = frozenset(cat for node, (cat, _) in E.NODES.items()
                       for path in (*E.SAMPLED_SUBTREES, E.SAMPLING_CLOCK) if node == path or node.startswith(path + "."))
#: an untraced step this many times the traced mean (and over :data:`OUTLIER_MIN_NS`) is an outlier
OUTLIER_RATIO = 3.0
OUTLIER_MIN_NS = 1_000_000


@dataclass(frozen=True)
class Sampling:
    """One training process's sampling, or several added up."""

    every: int
    warmup: int = 0
    steps: int = 0
    traced: int = 0
    wait_ns: int = 0
    wait_traced_ns: int = 0
    body_ns: int = 0
    body_traced_ns: int = 0
    untraced_wait_max_ns: int = 0
    untraced_body_max_ns: int = 0
    #: the passes over a loader: (start ns, end ns, steps, traced, wait ns, traced wait ns,
    #: body ns, traced body ns), a nested pass's steps not in its parent's
    passes: tuple[tuple[int, ...], ...] = field(default=(), repr=False)

    @classmethod
    def of_metadata(cls, custom: dict, ns_per_unit: int = 1000) -> Sampling | None:
        """The sampling a file's custom metadata records, None for a trace of every step;
        ``ns_per_unit``: the file's time unit (the passes are on dftracer's clock)."""
        values: dict = {}
        for f in fields(cls):
            raw = custom.get(E.SAMPLING_META_PREFIX + f.name)
            if raw is None:
                continue
            try:
                if f.name == "passes":
                    values[f.name] = tuple((int(p[0]) * ns_per_unit, int(p[1]) * ns_per_unit, *map(int, p[2:8]))
                                           for p in json.loads(str(raw)) if len(p) >= 8)
                else:
                    values[f.name] = int(str(raw))
            except (ValueError, TypeError):
                pass
        if values.get("every", 1) <= 1:
            return None
        return cls(**values)

    def merge(self, other: Sampling | None) -> Sampling:
        if other is None:
            return self
        peak = ("every", "warmup", "untraced_wait_max_ns", "untraced_body_max_ns")
        values = {f.name: (max if f.name in peak else int.__add__)(getattr(self, f.name), getattr(other, f.name))
                  for f in fields(self) if f.name != "passes"}
        return Sampling(**values, passes=tuple(sorted(self.passes + other.passes)))

    @functools.cached_property
    def _segments(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(segment starts, index of the pass each is in or -1, per-pass scales (count, wait,
        body, loop) with a last row of ones): the innermost pass wins where passes nest."""
        passes = sorted(self.passes)
        edges = np.unique(np.array([t for p in passes for t in p[:2]] or [0], np.int64))
        owner = np.full(len(edges), -1, np.int64)
        for i, p in enumerate(passes):  # by start: a nested pass paints over its parent
            first, last = np.searchsorted(edges, [p[0], p[1]])
            owner[first:last] = i
        scales = np.ones((len(passes) + 1, 4))
        for i, (_, _, steps, traced, wait, wait_t, body, body_t) in enumerate(passes):
            count = steps / traced if traced else 1.0
            scales[i] = (count, wait / wait_t if wait_t else count, body / body_t if body_t else count,
                         (wait + body) / (wait_t + body_t) if wait_t + body_t else count)
        return np.r_[np.iinfo(np.int64).min, edges], np.r_[-1, owner], scales

    def weights(self, times_ns: np.ndarray, kind: str) -> np.ndarray:
        """The scale of each instant's figure of ``kind`` (count, wait, body, loop): its pass's
        ratio of all steps to the traced ones; 1 outside every pass (always traced). Without
        passes recorded (an older or cut-short trace), the process's ratio everywhere."""
        times_ns = np.asarray(times_ns, np.int64)
        if kind == "none" or not self.sampled:
            return np.ones(len(times_ns))
        if not self.passes:
            whole = {"count": self.count_scale, "wait": self.wait_scale, "body": self.body_scale,
                     "loop": self.loop_scale}[kind]
            return np.full(len(times_ns), whole)
        column = ("count", "wait", "body", "loop").index(kind)
        starts, owner, scales = self._segments
        return scales[owner[np.searchsorted(starts, times_ns, side="right") - 1], column]

    @property
    def sampled(self) -> bool:
        """Whether any step went untraced (a run shorter than its warm-up traced them all)."""
        return self.every > 1 and self.steps > self.traced > 0

    @property
    def count_scale(self) -> float:
        return self.steps / self.traced if self.sampled else 1.0

    @property
    def wait_scale(self) -> float:
        return self.wait_ns / self.wait_traced_ns if self.sampled and self.wait_traced_ns else self.count_scale

    @property
    def body_scale(self) -> float:
        return self.body_ns / self.body_traced_ns if self.sampled and self.body_traced_ns else self.count_scale

    @property
    def loop_scale(self) -> float:
        """The batch loop's whole time (waits and bodies)."""
        traced = self.wait_traced_ns + self.body_traced_ns
        return (self.wait_ns + self.body_ns) / traced if self.sampled and traced else self.count_scale

    def scale_of(self, cat: str, name: str) -> tuple[float, float]:
        """(count scale, time scale) of the training process's events ``(cat, name)``."""
        if not self.sampled or cat not in GATED_CATS:
            return 1.0, 1.0
        if (cat, name) == (E.event("dataloader.fetch", E.ITER_SUFFIX)):
            return self.count_scale, self.wait_scale
        return self.count_scale, self.body_scale

    def describe(self) -> str:
        """``1 step in 8 traced (61 of 480 steps); totals estimated``."""
        if not self.sampled:
            return ""
        return (f"1 step in {self.every} traced ({self.traced} of {self.steps} steps, the first {self.warmup} and "
                f"each pass's first and last included); totals estimated")

    def warnings(self) -> list[str]:
        """Where the estimate may mislead: an untraced step much longer than the traced ones."""
        if not self.sampled:
            return []
        out = []
        for what, longest, total in (("wait for a batch", self.untraced_wait_max_ns, self.wait_traced_ns),
                                     ("step body", self.untraced_body_max_ns, self.body_traced_ns)):
            mean = total / self.traced
            if longest >= OUTLIER_MIN_NS and longest > OUTLIER_RATIO * mean:
                out.append(f"an untraced step's {what} took {longest / 1e6:.1f} ms, {longest / mean:.0f}x the traced "
                           f"mean ({mean / 1e6:.2f} ms): an outlier step may be one that was not traced")
        return out

    def to_dict(self) -> dict:
        out = {f.name: getattr(self, f.name) for f in fields(self)}
        out.update(sampled=self.sampled, count_scale=self.count_scale, wait_scale=self.wait_scale,
                   body_scale=self.body_scale, text=self.describe(), warnings=self.warnings())
        return out
