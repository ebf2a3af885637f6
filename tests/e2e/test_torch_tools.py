"""The opt-in PyTorch rules, run for real: ML-R28 (the profiler, into dftracer) and ML-R29
(dftracer's ``torch.compile`` backend, with ``add_compile``). The traced run's trace holds
their events (cat ``PP``, cat ``dynamo``) beside the regions, and the losses are those of the
program as written, tracing off and on."""

from __future__ import annotations

import gzip
import json
import shutil
import sys
from collections import Counter

import pytest

from tests.conftest import APPS
from tests.e2e.harness import run_program

pytest.importorskip("torch", reason="torch is not installed (./dev setup installs the CPU build)")
pytestmark = pytest.mark.e2e

SELECT = '["ML-R*", "ML-R28", "ML-R29"]'  # opt-in rules are switched on by their id


@pytest.fixture(scope="module")
def traced(tmp_path_factory):
    from dftpass.cli import main

    tmp = tmp_path_factory.mktemp("tools")
    src, annotated = tmp / "src", tmp / "annotated"
    shutil.copytree(APPS / "tiny_compile", src, ignore=shutil.ignore_patterns("__pycache__"))
    assert main(["run", str(src), "--out", str(annotated), "-q", "--set", f"rules.select={SELECT}",
                 "--set", "rules.options.ML-R29.add_compile=true"]) == 0
    run_program([sys.executable, "train.py", str(tmp / "original.json")], src, None)
    run_program([sys.executable, "train.py", str(tmp / "off.json")], annotated, None)
    assert main(["trace", "--label", "on", "--workspace", str(tmp / "ws"), "--cwd", str(annotated), "--",
                 sys.executable, "train.py", str(tmp / "on.json")]) == 0
    cats: Counter = Counter()
    for path in (tmp / "ws" / "on" / "traces" / "raw" / "rep-1").glob("*.pfw.gz"):
        with gzip.open(path, "rt") as fh:
            cats.update(e["cat"] for e in map(json.loads, filter(str.strip, fh)) if e.get("ph") == 1)
    return tmp, annotated, cats


def test_the_rules_place_the_profiler_and_the_backend(traced):
    _, annotated, _ = traced
    text = (annotated / "train.py").read_text()
    assert "on_trace_ready=_dft_profiling.trace_handler) as _dft_prof:" in text and "_dft_prof.step()" in text
    assert 'model = torch.compile(model, backend=_dft_create_backend(name="Net"))' in text


def test_the_trace_holds_the_profilers_and_the_backends_events(traced):
    _, _, cats = traced
    assert cats["PP"] > 0 and cats["dynamo"] > 0, cats
    assert cats["compute"] and cats["dataloader"] and cats["ai_root"] == 1, cats


def test_the_losses_are_the_programs_own(traced):
    tmp, _, _ = traced
    original = (tmp / "original.json").read_text()
    assert original == (tmp / "off.json").read_text() == (tmp / "on.json").read_text()


def test_strip_takes_both_out(traced, tmp_path, cli):
    _, annotated, _ = traced
    assert cli("strip", annotated, "--out", tmp_path / "s").code == 0
    assert (tmp_path / "s" / "train.py").read_bytes() == (APPS / "tiny_compile" / "train.py").read_bytes()
