"""Run the bottleneck zoo (``fixtures/apps/zoo``): annotate it once, trace a case, read back
what ``dftpass analyze`` concluded, next to what the case's ``.expected.yaml`` says.

Used by tests/zoo/test_zoo.py (one case per test) and by bench/zoo.py (the confusion table
and the applied fixes).
"""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

import yaml

from dftpass.cli import main

ZOO = Path(__file__).resolve().parents[2] / "fixtures" / "apps" / "zoo"
#: what a case's expected file pins down, in the order the table shows
FIELDS = ("bottleneck", "phase", "overlap", "top_cause", "first_proposal")


def cases() -> list[str]:
    return sorted(p.name[: -len(".expected.yaml")] for p in ZOO.glob("*.expected.yaml"))


def expected(case: str) -> dict:
    return yaml.safe_load((ZOO / f"{case}.expected.yaml").read_text(encoding="utf-8"))


def dftpass(*args) -> int:
    """``dftpass ARGS`` in this process, its output kept out of the caller's."""
    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        return main([str(a) for a in args])


def annotate(out: Path) -> Path:
    code = dftpass("-q", "run", ZOO, "--out", out)
    if code != 0:
        raise RuntimeError(f"dftpass run {ZOO} exited {code}")
    return out


def trace(annotated: Path, workspace: Path, case: str, label: str | None = None, extra: tuple[str, ...] = (),
          applies: tuple[str, ...] = (), repeat: int = 1, sample_every: int | None = None) -> Path:
    """Trace one case; returns its run folder. ``sample_every``: trace the step regions of one
    step in k (``dftpass trace --sample-every``)."""
    label = label or case
    want = expected(case)
    args = [*want.get("args", []), *extra]
    script = want.get("script", f"{case}.py")  # cases may share a program (io_bound.py, by its arguments)
    flags = [f"--applies={a}" for a in applies] + ([f"--sample-every={sample_every}"] if sample_every else [])
    code = dftpass("-q", "trace", "--label", label, "--workspace", workspace, "--cwd", annotated,
                   "--repeat", repeat, *flags, "--", sys.executable, script, "--data", workspace / "data",
                   "--out", workspace / "out" / label, *args)
    if code != 0:
        raise RuntimeError(f"tracing {case} ({label}) exited {code}")
    return workspace / label


def analyze(run: Path) -> dict:
    code = dftpass("-q", "analyze", run)
    if code not in (0, 1):  # 1: findings at error level (a data stall is one)
        raise RuntimeError(f"dftpass analyze {run} exited {code}")
    return json.loads((run / "analysis.json").read_text(encoding="utf-8"))


def reported(analysis: dict) -> dict:
    """The verdict of one analysis in the fields of an expected file."""
    diagnosis = analysis.get("diagnosis") or {}
    neck = diagnosis.get("bottleneck") or {}
    proposals = analysis.get("proposals") or []
    return {"bottleneck": neck.get("kind"), "phase": neck.get("phase"), "overlap": neck.get("overlap"),
            "top_cause": diagnosis.get("top_cause"), "first_proposal": proposals[0]["id"] if proposals else None}


def matches(field: str, want, got) -> bool:
    """``overlap: judged`` accepts any judged verdict (stalled, serial or hidden)."""
    if field == "overlap" and want == "judged":
        return got in ("stalled", "serial", "hidden")
    return want == got


def fix_args(case: str, analysis: dict) -> list[str] | None:
    """The case's ``fix`` arguments with the first proposal's settings put in
    (``{num_workers}``), or None when the case has no fix."""
    fix = expected(case).get("fix")
    if not fix:
        return None
    settings = (analysis.get("proposals") or [{}])[0].get("settings") or {}
    return [str(a).format(**settings) for a in fix]


def compare(*runs: Path) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["compare", "--json", *map(str, runs)])
    if code != 0:
        raise RuntimeError(f"dftpass compare exited {code}")
    return json.loads(out.getvalue())


def results(workspace: Path, label: str) -> dict:
    """What the program computed (its results.json)."""
    return json.loads((workspace / "out" / label / "results.json").read_text(encoding="utf-8"))
