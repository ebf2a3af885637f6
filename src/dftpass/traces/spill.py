"""The timeline of class events of one file, kept on disk between the two overlap passes.

The overlap needs a bucket width that depends on all files, and the per-bucket sums need
the width. Reading the JSON twice would double the cost of analysis; instead the first pass
writes ``(pid, ts, dur, class, fetch series, category)`` of each complete event (27 bytes,
ns) to a spill file and the second pass reads those back in blocks. Memory stays bounded on
both sides; disk use is 27 bytes per event.
"""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import numpy as np

#: one complete event: its process, time (ns), overlap class, fetch series and category
SPILL_DTYPE = np.dtype([("pid", "<i8"), ("ts", "<i8"), ("dur", "<i8"), ("cls", "i1"), ("fetch", "i1"),
                        ("cat", "i1")])
FLUSH_ROWS = 1 << 16
READ_ROWS = 1 << 18


class SpillWriter:
    """Appends rows to one spill file, in blocks."""

    def __init__(self, path: str | Path) -> None:
        self.path = str(path)
        self.rows = 0
        self._pending: list[np.ndarray] = []
        self._pending_rows = 0
        self._fh = open(self.path, "wb")

    def write(self, pid: np.ndarray, ts: np.ndarray, dur: np.ndarray, cls: np.ndarray,
              fetch: np.ndarray | None = None, cat: np.ndarray | None = None) -> None:
        block = np.empty(len(pid), SPILL_DTYPE)
        block["pid"], block["ts"], block["dur"], block["cls"] = pid, ts, dur, cls
        block["fetch"] = -1 if fetch is None else fetch
        block["cat"] = -1 if cat is None else cat
        self._pending.append(block)
        self._pending_rows += len(block)
        self.rows += len(block)
        if self._pending_rows >= FLUSH_ROWS:
            self._flush()

    def _flush(self) -> None:
        if self._pending:
            np.concatenate(self._pending).tofile(self._fh)
            self._pending, self._pending_rows = [], 0

    def close(self) -> None:
        self._flush()
        self._fh.close()


def read_spill(path: str | Path, rows: int = READ_ROWS) -> Iterator[np.ndarray]:
    """Blocks of at most ``rows`` rows of a spill file."""
    with open(path, "rb") as fh:
        while True:
            block = np.fromfile(fh, SPILL_DTYPE, count=rows)
            if not len(block):
                return
            yield block
