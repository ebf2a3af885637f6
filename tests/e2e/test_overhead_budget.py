"""The tracing budget (``--step-time``, ``overhead.budget``): the decision, what plan says,
and a real run of the bundled app annotated for a 1 ms step: same results, fewer events."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

from dftpass.plugins.analyses.overhead import COST_US, MAX_UPDATE_EVERY, decide
from tests.conftest import APPS, tree_bytes
from tests.e2e.harness import events_of

FULL_US = COST_US["fetch.iter"] + 3 * COST_US["compute"] + COST_US["update"]


def test_no_step_time_keeps_every_region_and_says_nothing():
    g = decide(None, 0.03)
    assert (g.update_every, g.loop_body, g.coarsened, g.describe()) == (1, True, [], "")


def test_a_long_step_fits_the_budget_untouched():
    g = decide(0.006, 0.03)
    assert g.update_every == 1 and g.loop_body and g.kept_us == pytest.approx(FULL_US)
    assert "within the budget, nothing coarsened" in g.describe() and "(1.0%)" in g.describe()


def test_the_update_is_spaced_first_and_just_enough():
    """1.5 ms: 45 µs allowed, the wait and compute take 42.8, so the 15.9 µs update goes every
    8th step (15.9 / 8 = 2.0 <= 2.2 left); the loop body's event stays."""
    g = decide(0.0015, 0.03)
    assert (g.update_every, g.loop_body) == (8, True)
    assert g.kept_us <= 0.03 * 1500 < decide(0.0015 * 0.99, 0.03).full_us
    assert decide(0.002, 0.03).update_every == 1  # 60 µs allowed: everything fits


def test_a_short_step_loses_the_body_event_and_folds_backward_with_the_step():
    """1 ms: 30 µs allowed. Without the body event and with backward and step in one region
    the regions take 10.8 + 16 µs, so the update can run every 6th step (15.9 / 6 = 2.6)."""
    g = decide(0.001, 0.03)
    assert (g.update_every, g.loop_body, g.fold_backward_step) == (6, False, True)
    assert g.kept_us == pytest.approx(FULL_US - COST_US["fetch.body"] - COST_US["compute"]
                                      - COST_US["update"] * (1 - 1 / 6))
    text = g.describe()
    assert ("coarsened: the step's metadata update every 6 steps, no loop-body event (fetch.block), the backward "
            "pass and the optimizer step in one region (ai.compute) -> 29.5 µs (2.9%)") in text
    assert "still over" not in text


def test_below_the_floor_the_plan_says_so():
    g = decide(0.0005, 0.03)
    assert g.update_every == MAX_UPDATE_EVERY and g.fold_backward_step
    assert "still over the budget: the floor is the wait for each batch and the 2 compute regions" in g.describe()


def test_a_larger_budget_coarsens_less():
    assert decide(0.001, 0.1).coarsened == []


@pytest.fixture(scope="module")
def budgeted(tmp_path_factory):
    """torch_basic annotated for a 1 ms step, and for no step time."""
    from dftpass.cli import main

    root = tmp_path_factory.mktemp("budget")
    src = root / "torch_basic"
    shutil.copytree(APPS / "torch_basic", src, ignore=shutil.ignore_patterns("__pycache__"))
    assert main(["run", str(src), "--out", str(root / "plain"), "-q"]) == 0
    assert main(["run", str(src), "--out", str(root / "budget"), "-q", "--step-time", "0.001"]) == 0
    return root


def test_plan_says_what_it_coarsened_and_why(cli, torch_basic):
    r = cli("plan", torch_basic, "--step-time", "0.001")
    assert r.code == 0
    assert "overhead: budget 3.0% of a 1 ms step = 30.0 µs; every region 58.7 µs (5.9%); coarsened:" in r.err
    assert "ai.dataloader.fetch.iter(loader, include_block=False)" in r.out
    assert "if _dft_env.DFTRACER_ENABLE and step % 6 == 0:" in r.out
    assert "+        ai.compute.start()\n         loss.backward()\n         optimizer.step()\n+        ai.compute.stop()" \
        in r.out
    plain = cli("plan", torch_basic)
    assert "overhead:" not in plain.err and "include_block" not in plain.out
    with pytest.raises(SystemExit) as usage:  # not a step time: a usage error
        cli("plan", torch_basic, "--step-time", "0")
    assert usage.value.code == 2


def test_a_second_annotation_of_the_budgeted_copy_changes_nothing(budgeted, cli):
    """With or without the step time: a folded backward and step is timed (inside the
    ``ai.compute`` span), a sparse update is an update, a loop without its body event is wrapped."""
    for how in ((), ("--step-time", "0.001")):
        r = cli("plan", budgeted / "budget", *how)
        assert r.code == 0 and r.out.strip() == "", (how, r.out)


def test_the_budgeted_copy_strips_back_to_the_original(budgeted, cli):
    for how in ((), ("--all",)):
        out = budgeted / f"stripped{len(how)}"
        assert cli("strip", budgeted / "budget", "--out", out, *how).code == 0
        assert tree_bytes(out) == tree_bytes(budgeted / "torch_basic"), how


@pytest.mark.e2e
def test_the_budgeted_program_computes_the_same_and_writes_fewer_events(budgeted, tmp_path):
    pytest.importorskip("torch", reason="torch is not installed (./dev setup installs the CPU build)")
    pytest.importorskip("dftracer.python", reason="dftracer is not installed (./dev setup installs it)")
    from tests.e2e.test_torch_basic import run_app

    data = tmp_path / "data"
    counts = {}
    for name in ("plain", "budget"):
        run_app(budgeted / name, data, tmp_path / f"out-{name}", tmp_path / f"traces-{name}" / "trace")
        files = sorted((tmp_path / f"traces-{name}").glob("trace-*-app.pfw.gz"))
        counts[name] = Counter((e["cat"], e["name"]) for f in files for e in events_of(f))
    for result in ("result.json", "weights.pt"):
        assert (tmp_path / "out-budget" / result).read_bytes() == (tmp_path / "out-plain" / result).read_bytes()
    plain, budget = counts["plain"], counts["budget"]
    assert plain[("dataloader", "fetch.block")] > 0 and budget[("dataloader", "fetch.block")] == 0
    assert budget[("dataloader", "fetch.iter")] == plain[("dataloader", "fetch.iter")] > 0  # every wait kept
    # the compute the overlap needs: the forward, and backward and step folded into one region
    assert budget[("compute", "forward")] == plain[("compute", "forward")] > 0
    assert budget[("compute", "compute")] == plain[("compute", "step")] == plain[("compute", "backward")] > 0
    assert budget[("compute", "backward")] == budget[("compute", "step")] == 0
    assert sum(budget.values()) < sum(plain.values())

