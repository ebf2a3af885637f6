"""A one-line progress bar on stderr, shown only in a terminal and for multi-file work."""

from __future__ import annotations

import sys
import time
from typing import TextIO


class Progress:
    def __init__(self, label: str, stream: TextIO | None = None, enabled: bool | None = None) -> None:
        self.total, self.label, self.done = 0, label, 0
        self.stream = stream or sys.stderr
        self._want = self.stream.isatty() if enabled is None else enabled
        self.enabled = False
        self._last = 0.0

    def start(self, total: int) -> None:
        self.total, self.done = total, 0
        self.enabled = self._want and total > 1

    def __call__(self, item: str = "") -> None:
        self.done += 1
        now = time.monotonic()
        if not self.enabled or (now - self._last < 0.1 and self.done < self.total):
            return
        self._last = now
        width = 24
        filled = int(width * self.done / max(self.total, 1))
        bar = "#" * filled + "." * (width - filled)
        self.stream.write(f"\r{self.label} [{bar}] {self.done}/{self.total} {item[-40:]:<40}")
        self.stream.flush()

    def close(self) -> None:
        if self.enabled:
            self.stream.write("\r" + " " * 100 + "\r")
            self.stream.flush()
