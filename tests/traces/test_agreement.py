"""dftpass agrees with dftracer-utils on real traces: per (cat, name) counts and total
durations equal ``dftracer_view`` and ``dftracer_stats`` (the tools print raw ``dur``
sums in the file's unit; dftpass keeps nanoseconds)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

import pytest

from dftpass.traces import TimeMetric, summarize

from tests.traces.trace_data import REAL


def tool(name: str) -> str:
    found = shutil.which(name) or shutil.which(name, path=str(Path(sys.executable).parent))
    if not found:
        pytest.skip(f"{name} not installed: pip install dftracer-utils (it ships the C++ trace tools)")
    return found


def ours(traces: Path) -> dict[tuple[str, str], tuple[int, int]]:
    summary = summarize([traces])
    (unit,) = {info.time_metric for info in summary.files.values()}
    per_unit = TimeMetric.parse(unit).ns
    return {(cat.lower(), name): (s.count, s.dur_ns // per_unit) for (cat, name), s in summary.by_key.items()}


@pytest.fixture(params=["real_workers", "ns_run"])
def traces(request, tmp_path) -> Path:
    """A copy of the traces: the tools write their index beside them."""
    source = REAL if request.param == "real_workers" else request.getfixturevalue("ns_run")
    return Path(shutil.copytree(source, tmp_path / "traces"))


def test_dftracer_view_group_by_cat_name(traces):
    run = subprocess.run([tool("dftracer_view"), "--directory", str(traces), "--group-by", "cat,name",
                          "--agg", "count,sum:dur"], capture_output=True, text=True, check=True)
    rows = [json.loads(line) for line in run.stdout.splitlines() if line.startswith("{")]
    theirs = {(row["cat"].lower(), row["name"]): (row["count"], row["sum_dur"]) for row in rows}
    assert theirs and theirs == ours(traces)


def test_dftracer_stats_grouped_durations(traces):
    run = subprocess.run([tool("dftracer_stats"), "--directory", str(traces), "--report", "detailed",
                          "--group-by", "cat", "name", "--json"], capture_output=True, text=True, check=True)
    theirs: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for per_file in json.loads(run.stdout):
        for key, stats in per_file["detailed"]["grouped_duration"].items():
            cat, name = key.split("|", 1)
            theirs[(cat.lower(), name)][0] += stats["count"]
            theirs[(cat.lower(), name)][1] += stats["sum"]
    assert {k: tuple(v) for k, v in theirs.items()} == ours(traces)
