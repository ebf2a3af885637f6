"""The unit of ``ts``/``dur`` in a trace file, and conversion to seconds.

dftracer writes times in the unit of ``DFTRACER_TIME_METRIC`` (microseconds unless set) and
says so in a ``CM time_metric`` metadata line. Files without that line (1.x, dlio-profiler)
are microseconds. Aggregates keep integer **nanoseconds**, so sums stay exact and files in
different units merge; reports convert to seconds.
"""

from __future__ import annotations

from dataclasses import dataclass

from dftpass.traces.names import TIME_METRICS

_NS_PER_UNIT = dict(zip(TIME_METRICS, (1, 1_000, 1_000_000, 1_000_000_000), strict=True))


@dataclass(frozen=True)
class TimeMetric:
    """A time unit: its dftracer spelling and how many nanoseconds one unit is."""

    name: str
    ns: int

    @classmethod
    def parse(cls, text: object) -> TimeMetric | None:
        """The metric a ``time_metric`` value names (case-insensitive), or None if unknown."""
        key = str(text).strip().upper()
        return cls(key, _NS_PER_UNIT[key]) if key in _NS_PER_UNIT else None

    def to_ns(self, value: float) -> int:
        return int(value * self.ns)

    def to_seconds(self, value: float) -> float:
        return value * self.ns / 1e9


#: what a file without a ``time_metric`` line uses
DEFAULT_METRIC = TimeMetric(TIME_METRICS[1], _NS_PER_UNIT[TIME_METRICS[1]])

