"""How a change is judged on time: paired ratios of alternating untraced runs, a confidence
interval, and the rule that keeps a change.

The runs alternate, ABBA: before, after, after, before, ... A **pair** is the i-th run of
each side. Because the two runs of a pair ran next to each other, a drift of the machine
weighs on both, and the ratio after/before of a pair carries only what differs between them.
Two series are measured per run, each untraced, on the user's unannotated source plus the
change (:mod:`dftpass.runs.clock`):

* the **program's time**: from the end of the main script's top-level imports to the exit
  (the start-up and ``import torch``, which no change touches, left out);
* the **wall time**: what the user waits for.

The interval is Student's t interval of the mean log ratio, back-transformed (a geometric
mean ratio and its 95% interval; ``scipy.stats.ttest_1samp``), widened by the noise between
sessions: the same two copies timed at another moment give a ratio that moves by about
``SESSION_SD`` (measured, docs/decisions.md), which no number of pairs in one session shows.
The half-width in log space is ``sqrt(t_half**2 + (z * SESSION_SD)**2)``: the interval says
where the ratio of a later run will lie, not only where this session's mean lies.
docs/decisions.md says why t and not a bootstrap of the median or a Wilcoxon/Hodges-Lehmann
interval (``bench/judge_stats.py`` measures the three).

The decision (:func:`decide`) reads the interval of the **primary** series (the program's time
where the clock recorded it, else the wall time), against ``1 - min_gain``:

* **faster**: the whole interval lies below it, and no series' interval lies above 1;
* **slower**: a series' interval lies above 1 (the wall time: a gain inside the program paid
  back at its start or end is no gain);
* **no gain**: the whole interval lies above ``1 - min_gain``: whatever it gains is less than
  the least gain worth a change;
* **undecided**: the interval still straddles ``1 - min_gain``: more pairs would tell.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

CONFIDENCE = 0.95
METHOD = "Student's t interval of the paired log ratios, widened by the noise between sessions"
#: the standard deviation of a ratio's log between two sessions of the same copies: the zoo's
#: and simclr's kept changes, attempt against confirmation, 7 pairs of sessions: rms 1.74%,
#: so 1.23% a session (optimize.session-noise-pct overrides it)
SESSION_SD = 0.012


@dataclass(frozen=True)
class Interval:
    """A ratio after/before (below 1: faster) and its confidence interval."""

    estimate: float
    low: float
    high: float
    pairs: int
    confidence: float = CONFIDENCE
    #: the half-width (log) that the noise between sessions alone gives: no pair narrows it
    floor: float = 0.0

    def text(self, with_pairs: bool = True) -> str:
        pairs = f", {self.pairs} pairs" if with_pairs else ""
        return f"{self.estimate:.3f}x ({100 * self.confidence:.0f}% CI {self.low:.3f}-{self.high:.3f}{pairs})"

    def to_dict(self) -> dict:
        return {"ratio": round(self.estimate, 4), "low": round(self.low, 4), "high": round(self.high, 4),
                "pairs": self.pairs, "confidence": self.confidence, "method": METHOD}


def paired_interval(before: list[float], after: list[float], confidence: float = CONFIDENCE,
                    session_sd: float = SESSION_SD) -> Interval | None:
    """The interval of after/before over the pairs (before[i], after[i]); None below 2 pairs."""
    import numpy as np
    from scipy import stats

    n = min(len(before), len(after))
    if n < 2 or any(v <= 0 for v in before[:n] + after[:n]):
        return None
    logs = np.log(np.asarray(after[:n], dtype=float) / np.asarray(before[:n], dtype=float))
    mean = float(logs.mean())
    t_half = 0.0
    if float(np.ptp(logs)) > 0.0:  # every pair the same ratio: only the sessions' noise is left
        ci = stats.ttest_1samp(logs, 0.0).confidence_interval(confidence)
        t_half = (float(ci.high) - float(ci.low)) / 2
    floor = float(stats.norm.ppf(0.5 + confidence / 2)) * session_sd
    half = math.hypot(t_half, floor)
    return Interval(math.exp(mean), math.exp(mean - half), math.exp(mean + half), n, confidence, floor)


def median(values: list[float]) -> float | None:
    import statistics

    return statistics.median(values) if values else None


def rounded(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


@dataclass
class Series:
    """One quantity measured on both sides, pair by pair (``before[i]`` beside ``after[i]``)."""

    name: str
    before: list[float]
    after: list[float]
    session_sd: float = SESSION_SD

    @cached_property
    def interval(self) -> Interval | None:
        """Computed once: decide() and the texts read it several times (a t test each)."""
        return paired_interval(self.before, self.after, session_sd=self.session_sd)

    @property
    def change_pct(self) -> float | None:
        iv = self.interval
        return None if iv is None else 100.0 * (iv.estimate - 1.0)

    def text(self) -> str:
        iv = self.interval
        return f"{self.name} (too few pairs)" if iv is None else f"{self.name} {iv.text(with_pairs=False)}"

    def to_dict(self) -> dict:
        iv = self.interval
        return {**(iv.to_dict() if iv else {"ratio": None, "pairs": min(len(self.before), len(self.after))}),
                "change_pct": rounded(self.change_pct), "median_before_s": rounded(median(self.before), 4),
                "median_after_s": rounded(median(self.after), 4),
                "before_s": [round(v, 4) for v in self.before], "after_s": [round(v, 4) for v in self.after]}


@dataclass
class Timing:
    program: Series | None
    wall: Series

    @classmethod
    def of(cls, before: list[dict], after: list[dict], session_sd: float = SESSION_SD) -> "Timing":
        """From the repeats of the two untraced runs (``wall_s`` and ``clock.program_s``), pair by pair."""
        n = min(len(before), len(after))
        b, a = before[:n], after[:n]
        wall = Series("wall", [r["wall_s"] for r in b], [r["wall_s"] for r in a], session_sd)

        def program(r: dict) -> float | None:
            return (r.get("clock") or {}).get("program_s")

        pb, pa = [program(r) for r in b], [program(r) for r in a]
        complete = n > 0 and all(v is not None for v in pb + pa)
        return cls(Series("program", pb, pa, session_sd) if complete else None, wall)

    @property
    def primary(self) -> Series:
        return self.program or self.wall

    @property
    def pairs(self) -> int:
        return min(len(self.wall.before), len(self.wall.after))

    def headline(self) -> str:
        """``program 0.920x (95% CI 0.880-0.970), wall 0.960x (95% CI 0.910-1.010), 8 pairs``."""
        parts = [s.text() for s in (self.program, self.wall) if s is not None]
        return ", ".join(parts) + f", {self.pairs} pairs"

    def to_dict(self) -> dict:
        return {"program": self.program.to_dict() if self.program else None, "wall": self.wall.to_dict(),
                "judged_on": self.primary.name, "pairs": self.pairs, "method": METHOD}


@dataclass(frozen=True)
class Decision:
    outcome: str  # "faster", "slower", "no gain", "undecided", "unmeasured"
    text: str
    #: undecided, and no more pairs can decide: the estimate sits closer to the bar than the
    #: noise between sessions reaches
    final: bool = False

    @property
    def decided(self) -> bool:
        return self.outcome != "undecided" or self.final


def decide(t: Timing, min_gain_pct: float) -> Decision:
    """The decision on ``t`` (see the module docstring), with its reason in words."""
    bar = 1.0 - min_gain_pct / 100.0
    main = t.primary.interval
    if main is None:
        return Decision("unmeasured", f"{t.pairs} pair(s): too few for an interval")
    said = t.headline()
    slower = [s for s in (t.program, t.wall) if s is not None and s.interval is not None and s.interval.low > 1.0]
    if slower:
        return Decision("slower", f"{said}: the {slower[0].name} time's interval lies above 1 (slower)")
    if main.high < bar:
        return Decision("faster", f"{said}: the {t.primary.name} time's interval lies below {bar:.3f} "
                                  f"(a gain of at least {min_gain_pct:g}%)")
    if main.low >= bar:
        return Decision("no gain", f"{said}: the {t.primary.name} time's interval lies above {bar:.3f} "
                                   f"(any gain is under {min_gain_pct:g}%)")
    text = (f"{said}: the {t.primary.name} time's interval still straddles {bar:.3f} (-{min_gain_pct:g}%) "
            f"after {t.pairs} pairs")
    if abs(math.log(main.estimate) - math.log(bar)) < main.floor:
        return Decision("undecided", f"{text}; more pairs cannot decide it: the estimate is nearer the bar than "
                                     f"the ±{100 * main.floor:.1f}% a ratio moves between sessions", final=True)
    return Decision("undecided", text)
