"""Per-file problems: what went wrong in one trace file, said once, never fatal.

A killed process leaves a truncated gzip, a process that never finalized leaves a 0-byte
file, a writer bug leaves a malformed line. Each is recorded as a :class:`Problem` and the
analysis goes on with everything else; callers print them (``str(problem)``).
"""

from __future__ import annotations

from dataclasses import dataclass

#: kinds of problems
EMPTY = "empty"              # 0-byte file: the process never called finalize()
UNREADABLE = "unreadable"    # cannot open/read the file at all
TRUNCATED = "truncated"      # gzip stream ends early: the process was killed mid-write
CORRUPT = "corrupt"          # gzip data is damaged: reading stopped there
MALFORMED = "malformed"      # lines that are not a JSON event
LATE_METRIC = "late-time-metric"  # a time_metric line came after events already read
AGGREGATED = "aggregated"    # ph 3 records: counted, but they carry no timeline for the overlap
LONG_LINE = "long-line"      # a line longer than any event: skipped, in bounded memory
TOO_MANY_PHASES = "too-many-phases"  # phase events beyond what a summary keeps: their phases are not told apart


@dataclass(frozen=True)
class Problem:
    """One problem of one file: ``count`` occurrences (lines, records) of ``kind``."""

    file: str
    kind: str
    message: str
    count: int = 1

    def __str__(self) -> str:
        times = f" (x{self.count})" if self.count > 1 else ""
        return f"{self.file}: {self.kind}{times}: {self.message}"
