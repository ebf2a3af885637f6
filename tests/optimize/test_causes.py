"""Why a change altered the output: each mechanism the catalogue knows, named from the source
that shows it (the zoo's traps run through optimize in test_optimize_cli.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from dftpass.optimize.causes import explain, message

ZOO = Path(__file__).resolve().parents[2] / "fixtures" / "apps" / "zoo"


def _project(tmp_path: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    return tmp_path


def test_workers_and_an_augmentation_from_the_global_rng():
    [cause] = explain("IO-L1-num-workers", ZOO, ("augment_global_rng.py",))
    assert cause.where == "augment_global_rng.py:24" and "random draws" in cause.mechanism
    assert "seeded by its index" in cause.advice


def test_the_augmentation_inside_a_data_set_comes_before_a_generator_at_set_up(tmp_path):
    root = _project(tmp_path, {
        "a_make.py": "import numpy as np\n\ndef make():\n    return np.random.rand(4)\n",
        "b_data.py": "import random\n\nclass D:\n    def __getitem__(self, i):\n        return random.random()\n"})
    [cause] = explain("IO-L1-num-workers", root)
    assert cause.where == "b_data.py:5"


def test_persistent_workers_and_the_loaders_own_generator():
    [cause] = explain("IO-L2-persistent-workers", ZOO, ("workers_respawn.py",))
    assert cause.where.startswith("workers_respawn.py:") and "base seed" in cause.mechanism
    text = message("IO-L2-persistent-workers", ZOO, ("workers_respawn.py",))
    assert text.startswith("known cause: ") and "advice, not applied" in text


def test_the_start_method_and_a_generator_made_at_import(tmp_path):
    root = _project(tmp_path, {"train.py": "import numpy as np\nRNG = np.random.default_rng()\n"})
    causes = explain("IO-L2-start-method", root)
    assert [c.where for c in causes] == ["train.py:2"] and "forked workers inherit" in causes[0].mechanism


@pytest.mark.parametrize("proposal, words", [
    ("COMP-L2-threads", "floating-point addition is not associative"),
    ("COMP-L2-autotune", "cudnn.benchmark"),
])
def test_mechanisms_with_no_source_evidence_are_named_anyway(tmp_path, proposal, words):
    """A thread count or a kernel choice leaves no trace in the source: named whenever the
    output differs after such a change."""
    [cause] = explain(proposal, _project(tmp_path, {"train.py": "print(1)\n"}))
    assert words in cause.mechanism and cause.where is None


def test_several_mechanisms_without_evidence_are_all_listed(tmp_path):
    text = message("IO-L2-start-method", _project(tmp_path, {"train.py": "print(1)\n"}))
    assert text.startswith("known causes: (1) ") and "(2) " in text


def test_a_change_that_cannot_alter_results_has_no_cause_to_name(tmp_path):
    assert message("MEM-L2-pin-memory", tmp_path) == ""


def test_every_known_mechanism_says_what_it_is_and_what_keeps_the_output():
    import re

    from dftpass.analysis.proposals import catalogue

    known = [(s["id"], entry) for s in catalogue()["strategies"] for entry in s.get("output_changes") or []]
    assert {sid for sid, _ in known} >= {"IO-L1-num-workers", "IO-L2-persistent-workers", "IO-L2-start-method",
                                         "COMP-L2-threads", "COMP-L2-autotune"}
    for sid, entry in known:
        assert set(entry) <= {"mechanism", "evidence", "advice"}, sid
        assert entry["mechanism"] and entry["advice"], sid
        if "evidence" in entry:
            re.compile(entry["evidence"])
