"""The analyses' work, counted in units that grow with what is analysed, not with the machine
(issue 40): syntax nodes visited, data-flow walk steps, call-graph steps, value evaluations.

A test doubles a synthetic project and holds the count to at most 2.3x (tests/core/
test_linear_work.py); a bench reports the time. Counting is a few integer additions per
walk, on always: cheaper than a switch that would have to be asked in the hot loops.
"""

from __future__ import annotations

from collections import Counter

#: kind -> units since the last :func:`reset`
COUNTS: Counter = Counter()


def count(kind: str, units: int = 1) -> None:
    COUNTS[kind] += units


def reset() -> None:
    COUNTS.clear()


def total() -> int:
    return sum(COUNTS.values())
