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

import importlib.util

import numpy as np
import pytest

from dftpass.traces import TimeMetric, summarize
from tests.conftest import ROOT

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


def synthetic_set(folder: Path, events: int = 240_000, apps: int = 4, workers_per_app: int = 2) -> Path:
    """A large synthetic set in the real 2.x format, from the analyze benchmark's generator
    (bench/analyze_throughput.py): training processes with compute and fetch events, worker
    processes with POSIX reads and data items."""
    spec = importlib.util.spec_from_file_location("bench_analyze", ROOT / "bench" / "analyze_throughput.py")
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    rng = np.random.default_rng(7)
    per_file = events // (apps * (1 + workers_per_app))
    folder.mkdir(parents=True)
    for a in range(apps):
        pid = 40_000 + 10 * a
        bench._write(folder / f"trace-{a:016x}-app.pfw.gz", bench._app_lines(pid, per_file // 5, rng))
        for w in range(workers_per_app):
            bench._write(folder / f"trace-{a:08x}{w + 1:08x}-fork.pfw.gz",
                         bench._worker_lines(pid + w + 1, pid, per_file // 6, rng))
    return folder


@pytest.fixture(params=["real_workers", "ns_run", "synthetic"])
def traces(request, tmp_path) -> Path:
    """A copy of the traces (the tools write their index beside them), or a synthetic set."""
    if request.param == "synthetic":
        folder = synthetic_set(tmp_path / "traces")
        assert summarize([folder]).events > 200_000
        return folder
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
