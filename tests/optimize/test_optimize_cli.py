"""``dftpass optimize`` through the real CLI, on the zoo's programs, with the real dftracer and
torch: a mechanical fix that is faster and computes the same is kept; one that changes the
samples, one that changes the work, and a program that does not reproduce itself are caught.

The baseline's traced repeats are few (the suite's time); the untraced pairs stop as soon as the
interval decides. bench/optimize.py measures the zoo and records the decisions.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.zoo.runner import ZOO, dftpass


def _optimize(tmp_path: Path, script: str, *args: str, repeat: int = 1, extra=()) -> tuple[int, dict]:
    ws = tmp_path / "ws"
    code = dftpass("optimize", ZOO, "--workspace", ws, "--repeat", repeat, "--warmup", 0, "--max-repeat", 6, *extra,
                   "--", sys.executable, script, "--data", tmp_path / "data", "--out", "out", *args)
    return code, json.loads((ws / "optimize.json").read_text())


def test_a_faster_fix_with_the_same_output_is_kept_and_confirmed(tmp_path):
    code, doc = _optimize(tmp_path, "io_bound.py", "--epochs", "3", repeat=2, extra=("--max-attempts", 1))
    assert code == 0
    first = doc["attempts"][0]
    assert first["proposal"] == "IO-L1-num-workers", first
    assert first["same_work"] is True and first["outputs_same"] is True, first["evidence"]
    assert first["kept"], first["why"]
    # judged on untraced pairs: the program's time, with its interval and the number of pairs
    timing = first["timing"]
    assert timing["judged_on"] == "program" and timing["method"].startswith("Student's t")
    assert timing["program"]["high"] < 0.98 and first["decision"] == "faster"
    assert 3 <= first["repeats"] <= 6 and first["traced_runs"] == 2
    assert first["runs"] == ["attempt-1-traced-before", "attempt-1-traced-after", "attempt-1-before", "attempt-1-after"]
    # the untraced runs ran the unannotated copies, with the clock on
    untraced = json.loads((tmp_path / "ws" / "attempt-1-after" / "run.json").read_text())
    assert untraced["baseline"] is True and all(r["clock"]["program_s"] > 0 for r in untraced["repeats"])
    assert "attempt-1/source" in untraced["repeats"][0]["cwd"]
    # the headline: the kept change against the original, untraced, with the same output
    confirmation = doc["confirmation"]
    assert confirmation["decision"] == "faster" and confirmation["outputs_same"] is True, confirmation
    assert confirmation["headline"].startswith("optimized: program 0.") and "95% CI" in confirmation["headline"]
    assert confirmation["headline"].endswith("same output")
    optimized = Path(doc["optimized"]) / "io_bound.py"
    assert "num_workers=2" in optimized.read_text()
    assert "dftracer" not in optimized.read_text()  # the optimized copy carries no annotation
    assert "num_workers=args.workers" in (ZOO / "io_bound.py").read_text()  # the user's tree is untouched
    patch = Path(doc["patch"]).read_text()
    assert "-                        num_workers=args.workers" in patch and "+" in patch
    assert doc["stopped"].startswith("--max-attempts 1 reached")


def test_a_fix_that_changes_the_samples_is_reverted(tmp_path):
    code, doc = _optimize(tmp_path, "augment_global_rng.py")
    assert code == 0
    first = doc["attempts"][0]
    assert first["proposal"] == "IO-L1-num-workers"
    assert first["same_work"] is True and first["outputs_same"] is False and not first["kept"]
    assert first["why"].startswith("reverted: the outputs differ: stdout line 1: 'epoch 1 train_loss")
    # the cause, not only the symptom: the augmentation draws from the global RNG, now in workers
    assert "known cause: the data set's random draws" in first["why"] and "seen at augment_global_rng.py:" in first["why"]
    assert "advice, not applied" in first["why"]
    assert first["repeats"] == 0  # reverted on its output: no time was spent timing it
    assert doc["kept"] == [] and Path(doc["patch"]).read_text() == "" and doc["confirmation"] is None
    # the report has the attempt, with both verdicts and the reason
    assert dftpass("report", tmp_path / "ws") == 0
    report = (tmp_path / "ws" / "report.md").read_text()
    section = report.split("## Optimization", 1)[1].split("\n## ", 1)[0]
    row = next(line for line in section.splitlines() if line.startswith("| 1 |"))
    assert "`IO-L1-num-workers` | not kept" in row and "| same | differs |" in row and "reverted: the outputs" in row


def test_persistent_workers_that_shift_a_shared_generator_are_reverted_with_the_reason(tmp_path):
    """The loader's own generator shuffles and seeds the workers: persistent workers draw that
    seed once, not each epoch, so the second epoch's order changes."""
    code, doc = _optimize(tmp_path, "workers_respawn.py", "--epochs", "2", "--loader-generator",
                          extra=("--max-attempts", 1))
    first = doc["attempts"][0]
    assert first["proposal"] == "IO-L2-persistent-workers", first
    assert first["same_work"] is True and first["outputs_same"] is False and not first["kept"]
    assert first["why"].startswith("reverted: the outputs differ: stdout line 2: 'epoch 2 train_loss"), first["why"]
    assert "known cause: the loader draws its workers' base seed from its generator" in first["why"]


def test_a_fix_that_changes_the_work_is_reverted(tmp_path):
    code, doc = _optimize(tmp_path, "loss_threshold.py", extra=("--max-attempts", 1))
    first = doc["attempts"][0]
    assert first["proposal"] == "IO-L1-num-workers"
    assert first["same_work"] is False and not first["kept"]
    assert "reverted: the runs did different work (" in first["why"] and "batches in all (train:" in first["why"]


def test_an_unseeded_program_stops_at_the_baseline(tmp_path):
    code, doc = _optimize(tmp_path, "unseeded.py", repeat=2)
    assert code == 1 and doc["attempts"] == []
    assert "the repeats of opt-baseline differ in output" in doc["stopped"]
    assert "stdout line 1" in doc["stopped"]


def test_ctrl_c_stops_cleanly_and_writes_what_was_measured(tmp_path):
    ws = tmp_path / "ws"
    proc = subprocess.Popen([sys.executable, "-m", "dftpass", "optimize", str(ZOO), "--workspace", str(ws),
                             "--repeat", "3", "--warmup", "0", "--", sys.executable, "io_bound.py", "--data",
                             str(tmp_path / "data"), "--out", "out"], stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not (ws / "opt-baseline" / "run.json").exists() and time.monotonic() < deadline:
        time.sleep(0.2)
    os.kill(proc.pid, signal.SIGINT)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130, err[-2000:]
    doc = json.loads((ws / "optimize.json").read_text())
    assert doc["stopped"].startswith("interrupted")


def test_the_command_is_required(tmp_path, capsys):
    assert dftpass("optimize", ZOO, "--workspace", tmp_path / "ws") == 2


def test_a_workspace_inside_the_project_is_refused(tmp_path):
    project = tmp_path / "proj"
    project.mkdir()
    (project / "train.py").write_text("print(1)\n")
    assert dftpass("optimize", project, "--workspace", project / "ws", "--", sys.executable, "train.py") == 2
    assert not (project / "ws" / "optimize").exists()
