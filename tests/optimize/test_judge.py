"""The judge through ``dftpass compare``: two real traced runs that did different work get no
time verdict, whichever is faster; the same program twice is the same work and output."""

from __future__ import annotations

import contextlib
import io
import json
import sys

import pytest

from dftpass.cli import main
from tests.zoo.runner import annotate


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("judge")
    zoo = annotate(root / "zoo-dftpass")
    ws = root / "ws"
    for label, epochs in (("two", 2), ("one", 1), ("two-again", 2)):
        assert main(["-q", "trace", "--label", label, "--workspace", str(ws), "--cwd", str(zoo), "--",
                     sys.executable, "io_bound.py", "--data", str(root / "data"), "--out", str(root / "out"),
                     "--epochs", str(epochs)]) == 0
    return ws


def _compare(*runs) -> dict:
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        assert main(["compare", *map(str, runs), "--json"]) == 0
    return json.loads(out.getvalue())


def test_less_work_is_not_an_improvement(runs):
    cmp = _compare(runs / "two", runs / "one")
    assert cmp["verdicts"][0].startswith("one vs two: cannot judge (the runs did different work (16 vs 8 batches "
                                         "in all (train: 16 vs 8 batches"), cmp["verdicts"][0]
    assert cmp["judgements"][0]["same_work"]["same"] is False
    assert cmp["judgements"][0]["same_output"]["same"] is False  # one epoch line less, another results.json


def test_the_same_program_twice_is_the_same_work_and_output(runs):
    cmp = _compare(runs / "two", runs / "two-again")
    work, output = cmp["judgements"][0]["same_work"], cmp["judgements"][0]["same_output"]
    assert work["same"] is True and "train 16 batches in 2 regions" in work["reason"]
    assert output["same"] is True and "written file" in output["reason"], output
    assert "cannot judge" not in cmp["verdicts"][0]


def test_the_text_output_says_why(runs):
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        main(["compare", str(runs / "two"), str(runs / "one")])
    text = out.getvalue()
    assert "one: work DIFFERENT: the runs did different work (16 vs 8 batches in all (train: 16 vs 8 batches" in text


def _run(label: str, train: int, evaluate: int) -> dict:
    """A run record as ``analyze`` saves it: one repeat, exit 0, the work of each phase."""
    work = {"batches": train + evaluate, "phases": {"train": {"batches": train, "regions": 2},
                                                    "evaluate": {"batches": evaluate, "regions": 2}}}
    return {"label": label, "events": 100, "repeats": [{"repeat": 1, "exit_code": 0, "work": work}]}


def test_the_same_batches_in_other_phases_are_other_work():
    """Each phase's batches are judged, not only their sum: a run that trains on 9 batches and
    evaluates on 11 did not do the work of one that trains on 8 and evaluates on 12."""
    from dftpass.analysis.judge import repeats_agree_on_work, same_work

    verdict = same_work(_run("a", 8, 12), _run("b", 9, 11))
    assert verdict.same is False and verdict.evidence == ["evaluate: 12 vs 11 batches", "train: 8 vs 9 batches"]
    assert same_work(_run("a", 8, 12), _run("b", 8, 12)).same is True
    split = _run("c", 8, 12)
    split["repeats"].append({**_run("c", 9, 11)["repeats"][0], "repeat": 2})
    assert repeats_agree_on_work(split).same is False
