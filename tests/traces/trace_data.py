"""Where the trace fixtures are, and an independent recount of a trace with the stdlib
``json`` module to check dftpass against (imported by the tests as ``trace_data``)."""

from __future__ import annotations

import gzip
import json
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TRACES = ROOT / "fixtures" / "traces"
REAL = TRACES / "real_workers"
BAD = TRACES / "bad"
AGGREGATED = TRACES / "aggregated"
APP_FILE = next(REAL.glob("*-app.pfw.gz"))


def json_events(path: Path) -> list[dict]:
    """Every record of a 2.x file, parsed the slow obvious way."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt") as fh:
        return [json.loads(line) for line in fh if line.strip()]


def recount(paths) -> dict[tuple[str, str], list[int]]:
    """(cat, name) -> [count, sum of dur (file unit)] of the complete events, via json."""
    out: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for path in paths:
        for event in json_events(Path(path)):
            if event["ph"] == 1:
                cell = out[(event["cat"], event["name"])]
                cell[0] += 1
                cell[1] += event["dur"]
    return dict(out)
