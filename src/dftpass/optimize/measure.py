"""How a change is measured: medians over alternating repeats, the noise between repeats,
and the rule that keeps a change.

Three series are measured per side: the **wall time** (what the user waits for), the
**program's time** (its root region: the wall time without the interpreter's start-up and
imports, identical on both sides by construction, whose noise would hide a small gain), and
the **steady state** (the training regions after the first: :mod:`dftpass.analysis.work`).

A change is **kept** only when all of these hold:

* the candidate did the same work and computed the same output as the run it changes
  (:mod:`dftpass.analysis.judge`);
* neither the median wall time nor the program's time rose beyond its noise (a gain inside the
  program that is paid back at its start or end, a worker shutdown after the root region, is
  no gain);
* and either the median program time (the wall time where no root region was traced) fell
  by more than the noise (the larger interquartile range of the two sides, the range with
  fewer than four repeats, as a share of the median before) and by at least
  ``min_gain_pct``, without the steady state getting slower (a change that only moves
  warm-up time is not credited); or the steady state fell by that much: each epoch after
  the first is faster, which a short run's fixed costs hide and a long run gets.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass


def median(values: list[float]) -> float | None:
    return statistics.median(values) if values else None


def spread(values: list[float]) -> float:
    """The interquartile range (the range with fewer than four values)."""
    if len(values) < 2:
        return 0.0
    if len(values) < 4:
        return max(values) - min(values)
    q1, _, q3 = statistics.quantiles(values, n=4, method="inclusive")
    return q3 - q1


@dataclass
class Series:
    """One quantity measured on both sides."""

    name: str
    before: list[float]
    after: list[float]

    @property
    def change_pct(self) -> float | None:
        b, a = median(self.before), median(self.after)
        return None if not b or a is None else 100.0 * (a - b) / b

    @property
    def noise_pct(self) -> float:
        b = median(self.before)
        return 100.0 * max(spread(self.before), spread(self.after)) / b if b else 0.0

    def text(self) -> str:
        return f"{self.name} {self.change_pct:+.1f}% (noise ±{self.noise_pct:.1f}%)"

    def to_dict(self) -> dict:
        return {"change_pct": rounded(self.change_pct), "noise_pct": round(self.noise_pct, 2),
                "median_before_s": rounded(median(self.before), 4), "median_after_s": rounded(median(self.after), 4),
                "spread_before_s": round(spread(self.before), 4), "spread_after_s": round(spread(self.after), 4),
                "before_s": [round(v, 4) for v in self.before], "after_s": [round(v, 4) for v in self.after]}


def rounded(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def _complete(before: list, after: list, n_before: int, n_after: int, name: str) -> Series | None:
    """A series measured on every repeat of both sides, else None."""
    b, a = [v for v in before if v is not None], [v for v in after if v is not None]
    return Series(name, b, a) if b and a and len(b) == n_before and len(a) == n_after else None


@dataclass
class Timing:
    wall: Series
    program: Series | None
    steady: Series | None

    @classmethod
    def of(cls, before: list[dict], after: list[dict]) -> "Timing":
        """From the ``repeats`` of two analyses (``wall_s`` and ``work``)."""
        def pick(reps, key):
            return [r.get(key) if key == "wall_s" else (r.get("work") or {}).get(key) for r in reps]
        nb, na = len(before), len(after)
        wall = Series("median wall time", [v for v in pick(before, "wall_s") if v is not None],
                      [v for v in pick(after, "wall_s") if v is not None])
        return cls(wall, _complete(pick(before, "program_s"), pick(after, "program_s"), nb, na, "program time"),
                   _complete(pick(before, "steady_s"), pick(after, "steady_s"), nb, na, "steady state"))

    @property
    def primary(self) -> Series:
        return self.program or self.wall

    def to_dict(self) -> dict:
        return {"wall": self.wall.to_dict(), "program": self.program.to_dict() if self.program else None,
                "steady": self.steady.to_dict() if self.steady else None, "judged_on": self.primary.name}


def _gains(series: Series | None, min_gain_pct: float) -> bool:
    return series is not None and series.change_pct is not None and \
        -series.change_pct > max(min_gain_pct, series.noise_pct)


def _worse(series: Series | None, min_gain_pct: float = 0.0) -> bool:
    return series is not None and series.change_pct is not None and \
        series.change_pct > max(series.noise_pct, min_gain_pct)


def faster(t: Timing, min_gain_pct: float) -> tuple[bool, str]:
    """Whether the timing shows a gain worth keeping, and why (or why not).

    Kept when the program's time (or the wall time) gains beyond the noise and neither the
    wall time nor the steady state got worse beyond theirs; or when the steady state gains
    beyond its noise and the whole run got no worse: on a short run the fixed costs (start-up,
    data preparation) hide a per-epoch gain that a real training run, of many epochs, gets."""
    main = t.primary
    if main.change_pct is None:
        return False, "no time was measured"
    parts = [s.text() for s in (main, t.wall if main is not t.wall else None, t.steady) if s is not None
             and s.change_pct is not None]
    if t.steady is None:
        parts.append("one training region: no steady state to set apart")
    said = "; ".join(parts)
    if _worse(t.wall) or _worse(main):
        return False, f"{said}: slower"
    if _gains(main, min_gain_pct):
        if _worse(t.steady, min_gain_pct):
            return False, f"{said}: the gain is warm-up moved, not a faster run"
        return True, said
    if _gains(t.steady, min_gain_pct):
        return True, f"{said}: each epoch after the first is faster, and the whole run no slower (its fixed " \
                     "costs hide the gain on a short run)"
    return False, f"{said}: no gain beyond the noise"
