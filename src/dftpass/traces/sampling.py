"""A sampled trace (issue 31): what the runtime's gate wrote (:mod:`dftpass.runtime.sampling`),
and how the traced steps' events stand for all steps.

The training process of a sampled run writes its step regions for one step in k. Its trace
ends with ``CM`` lines ``dftpass.sampling.*``: k, the warm-up, the steps and the traced
steps, every step's wait for its batch and its body (timed, traced or not), and each pass
over a loader with its span on the trace's clock and its own steps.

**The estimate.** A traced step is one of two kinds. The *forced* ones (the process's first
steps, each pass's first and last) stand for themselves: they are the steps least like the
others (workers starting, caches filling, a last short batch). The *regular* ones (every
k-th) stand for the pass's other steps: each counts ``(steps - forced) / (traced - forced)``
times, the pass's own ratio. An event counts as the traced step whose span it lies in: from
its wait's start to the next traced step of its pass (an untraced step writes no step event,
so whatever lies between is the traced step's, a fetch region's body included); a step event
before a pass's first traced step counts as a regular one; anything else (phases,
checkpoints, evaluation outside a loop) was always written and counts once. Counting steps, not timing them: a traced step's body also
holds the cost of tracing it, and a ratio of timed bodies read compute 16% low against the
full trace (bench/overhead.py, docs/decisions.md).

An estimate is unsafe when a step that was not traced was much longer than the traced ones:
the longest untraced wait and body are in the metadata, and :meth:`Sampling.warnings` says so.
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass, field, fields, replace

import numpy as np

from dftpass.core import emitter as E

#: the cats of the regions the gate samples (the training process's own events of them)
GATED_CATS = frozenset(cat for node, (cat, _) in E.NODES.items()
                       for path in (*E.SAMPLED_SUBTREES, E.SAMPLING_CLOCK) if node == path or node.startswith(path + "."))
#: an untraced step this many times the traced mean (and over :data:`OUTLIER_MIN_NS`) is an outlier
OUTLIER_RATIO = 3.0
OUTLIER_MIN_NS = 1_000_000
#: the longest gap (ns) between a traced step's wait and its body's event
_BODY_GAP_NS = 1_000_000
#: the figures read from the metadata (the rest of the fields are derived)
_COUNTERS = ("every", "warmup", "steps", "traced", "wait_ns", "wait_traced_ns", "body_ns", "body_traced_ns",
             "untraced_wait_max_ns", "untraced_body_max_ns")


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
    #: each pass's weight of a regular traced step (aligned with ``passes``; set by :meth:`with_steps`)
    regular: tuple[float, ...] = field(default=(), repr=False)
    #: the traced steps: (start ns, end ns, weight) arrays, by start (set by :meth:`with_steps`)
    spans: tuple = field(default=(), repr=False, compare=False)
    #: how many traced steps were forced (warm-up, a pass's first or last, an outlier)
    forced: int = 0
    #: traced steps over :data:`OUTLIER_RATIO` times their pass's median, counted once
    traced_outliers: int = 0
    #: whether the process wrote its counts (at its finalize)
    counted: bool = True

    @classmethod
    def of_metadata(cls, custom: dict, ns_per_unit: int = 1000) -> Sampling | None:
        """The sampling a file's custom metadata records, None for a trace of every step;
        ``ns_per_unit``: the file's time unit (the passes are on dftracer's clock)."""
        values: dict = {}
        for name in (*_COUNTERS, "passes"):
            raw = custom.get(E.SAMPLING_META_PREFIX + name)
            if raw is None:
                continue
            try:
                if name == "passes":
                    values[name] = tuple(sorted((int(p[0]) * ns_per_unit, int(p[1]) * ns_per_unit, *map(int, p[2:8]))
                                                for p in json.loads(str(raw)) if len(p) >= 8))
                else:
                    values[name] = int(str(raw))
            except (ValueError, TypeError):
                pass
        if values.get("every", 1) <= 1:
            return None
        return cls(**values, counted="steps" in values)

    def with_steps(self, wait_start, wait_end, wait_count, body_start, body_end, region_start,
                   region_end) -> Sampling:
        """The traced steps found in the trace: the loop's waits (``fetch.iter``, with their place
        in the pass) joined to the body that follows (``fetch.block``), and the fetch regions
        around ``next(it)``; each weighed as forced or regular in its pass (module docstring)."""
        def array(values) -> np.ndarray:
            return np.asarray(values, np.int64).reshape(-1)

        order = np.argsort(array(body_start), kind="stable")
        body_start, body_end = array(body_start)[order], array(body_end)[order]
        wait_end = array(wait_end)
        # each wait's body: the body event that starts right after it, where there is one
        i = np.searchsorted(body_start, wait_end)
        has = i < len(body_start)
        has[has] = body_start[i[has]] - wait_end[has] <= _BODY_GAP_NS
        waited = wait_end.copy()
        waited[has] = body_end[i[has]]
        region_start = array(region_start)
        starts = np.concatenate([array(wait_start), region_start])
        order = np.argsort(starts, kind="stable")
        start = starts[order]
        own_end = np.concatenate([waited, array(region_end)])[order]  # the step itself: its wait and body
        count = np.concatenate([array(wait_count), np.zeros(len(region_start), np.int64)])[order]
        passes = list(self.passes)
        owner = self._owner(start) if passes else np.full(len(start), -1)
        # what a traced step wrote reaches to the next traced step of its pass (or the pass's
        # end): an untraced step writes no step event, so every step event in between is its
        # own (a fetch region's body has no event of its own to end its span)
        limit = np.where(owner >= 0, np.array([p[1] for p in passes] + [0], np.int64)[owner], own_end)
        by_pass = np.lexsort((start, owner))  # each pass's steps in order
        following = limit.copy()
        same = owner[by_pass][1:] == owner[by_pass][:-1]
        following[by_pass[:-1][same]] = start[by_pass[1:][same]]
        end = np.maximum(own_end, np.minimum(following, limit))
        own_steps = np.array([p[2] for p in passes] + [0], np.int64)[owner]
        forced = (count == 1) | ((count > 0) & (count == own_steps))
        forced[:min(self.warmup, len(forced))] = True  # the process's first steps are all traced
        regular, weight = [], np.ones(len(start))
        outliers = np.zeros(len(start), bool)
        for i, p in enumerate(passes):
            mine = owner == i
            # a traced step far longer than its pass's others stands for itself, as a forced
            # one: counted k times it would stand for k slow steps that were not
            lengths = (own_end - start)[mine & (count > 0)]
            if len(lengths) >= 3:
                slow = mine & (count > 0) & ~forced & ((own_end - start) > OUTLIER_RATIO * np.median(lengths))
                outliers |= slow
                forced |= slow
            steps, traced, pinned = p[2], p[3], int((forced & mine).sum())
            if traced - pinned > 0 and steps - pinned >= 0:
                w = (steps - pinned) / (traced - pinned)
                weight[mine & ~forced] = w
            else:  # every traced step forced: they stand for the pass's untraced steps too
                w = steps / traced if traced else 1.0
                weight[mine] = w
            regular.append(w)
        return replace(self, regular=tuple(regular), spans=(start, end, weight), forced=int(forced.sum()),
                       traced_outliers=int(outliers.sum()))

    def _owner(self, times: np.ndarray) -> np.ndarray:
        """The pass each instant is in (innermost where passes nest), -1 outside them all."""
        starts, owner = self._segments
        return owner[np.searchsorted(starts, times, side="right") - 1]

    def merge(self, other: Sampling | None) -> Sampling:
        if other is None:
            return self
        peak = ("every", "warmup", "untraced_wait_max_ns", "untraced_body_max_ns")
        values = {name: (max if name in peak else int.__add__)(getattr(self, name), getattr(other, name))
                  for name in (*_COUNTERS, "forced", "traced_outliers")}
        pairs = sorted(zip(self.passes + other.passes, self._regular() + other._regular()))
        spans = [s for s in (self.spans, other.spans) if s]
        if spans:
            start, end, weight = (np.concatenate(parts) for parts in zip(*spans))
            order = np.argsort(start, kind="stable")
            spans = (start[order], end[order], weight[order])
        return Sampling(**values, passes=tuple(p for p, _ in pairs), regular=tuple(w for _, w in pairs),
                        spans=tuple(spans), counted=self.counted and other.counted)

    def _regular(self) -> tuple[float, ...]:
        """The regular weight of each pass (its steps over its traced ones before the steps are known)."""
        if len(self.regular) == len(self.passes):
            return self.regular
        return tuple(p[2] / p[3] if p[3] else 1.0 for p in self.passes)

    @functools.cached_property
    def _segments(self) -> tuple[np.ndarray, np.ndarray]:
        """(segment starts, the index of the pass each is in or -1): the innermost pass wins
        where passes nest."""
        edges = np.unique(np.array([t for p in self.passes for t in p[:2]] or [0], np.int64))
        owner = np.full(len(edges), -1, np.int64)
        for i, p in enumerate(self.passes):  # by start: a nested pass paints over its parent
            first, last = np.searchsorted(edges, [p[0], p[1]])
            owner[first:last] = i
        return np.r_[np.iinfo(np.int64).min, edges], np.r_[-1, owner]

    def weights(self, times_ns, kind: str = "step") -> np.ndarray:
        """How many steps' events each instant's event stands for: the traced step's weight
        inside its span, a regular step's inside a pass, 1 elsewhere (always traced).
        ``kind`` "none": 1 everywhere (the workers trace every sample). Without the passes (an
        older or cut-short trace), the process's steps over its traced ones everywhere."""
        times_ns = np.asarray(times_ns, np.int64)
        if kind == "none" or not self.sampled:
            return np.ones(len(times_ns))
        if not self.passes:
            return np.full(len(times_ns), self.count_scale)
        owner = self._owner(times_ns)
        out = np.r_[np.array(self._regular(), float), 1.0][owner]
        if self.spans and len(self.spans[0]):
            start, end, weight = self.spans
            i = np.searchsorted(start, times_ns, side="right") - 1
            inside = (i >= 0) & (times_ns <= end[np.maximum(i, 0)])
            out = np.where(inside, weight[np.maximum(i, 0)], out)
        return out

    @property
    def sampled(self) -> bool:
        """Whether any step went untraced (a run shorter than its warm-up traced them all)."""
        return self.every > 1 and self.steps > self.traced > 0

    @property
    def count_scale(self) -> float:
        return self.steps / self.traced if self.sampled else 1.0

    @property
    def cut_short(self) -> bool:
        """Sampled, but the process ended before writing its counts (killed, no finalize)."""
        return self.every > 1 and not self.counted

    def describe(self) -> str:
        """``1 step in 8 traced (61 of 480 steps, ...); totals estimated``."""
        if self.cut_short:
            return (f"1 step in {self.every} traced, but the process ended before writing its step counts (no "
                    "finalize): the totals are the traced steps' only, and low")
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
        if self.traced_outliers:
            out.append(f"{self.traced_outliers} traced step(s) took over {OUTLIER_RATIO:g}x their pass's median: each "
                       "counted once, not for the untraced steps around it")
        return out

    def to_dict(self) -> dict:
        out = {name: getattr(self, name) for name in (*_COUNTERS, "forced", "traced_outliers")}
        out.update(sampled=self.sampled, count_scale=self.count_scale, passes=len(self.passes),
                   text=self.describe(), warnings=self.warnings())
        return out
