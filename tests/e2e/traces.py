"""Reading the trace files a real run wrote (plain JSON lines inside gzip)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path


def trace_files(folder: Path) -> list[Path]:
    return sorted(folder.glob("trace-*.pfw.gz"))


def events_of(path: Path) -> list[dict]:
    """The complete events (``ph`` 1) of one trace file."""
    with gzip.open(path, "rt") as fh:
        return [e for e in (json.loads(line) for line in fh if line.strip()) if e.get("ph") == 1]
