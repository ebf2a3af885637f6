"""The tracing budget (``--step-time``, ``overhead.budget``): the decision, what plan says,
and a real run of the bundled app annotated for a 1 ms step: same results, fewer events."""

from __future__ import annotations

import shutil
from collections import Counter
from pathlib import Path

import pytest

from dftpass.plugins.analyses.overhead import COST_US, MAX_UPDATE_EVERY, decide, sampled_cost
from tests.conftest import APPS, tree_bytes
from tests.e2e.harness import events_of

STEP, REGION, UPDATE = COST_US["step"], COST_US["region"], COST_US["update"]
#: every region of a step without device transfers: the wait and the body, three compute regions
FULL_US = STEP + 5 * REGION + UPDATE
FULL_US_WITH_TRANSFER = FULL_US + REGION


def test_no_step_time_keeps_every_region_and_says_nothing():
    g = decide(None, 0.03)
    assert (g.update_every, g.loop_body, g.coarsened, g.describe()) == (1, True, [], "")


def test_a_long_step_fits_the_budget_untouched():
    g = decide(0.006, 0.03)
    assert g.update_every == 1 and g.loop_body and g.kept_us == pytest.approx(FULL_US)
    assert "within the budget, nothing coarsened" in g.describe() and "(2.4%)" in g.describe()


def test_the_update_is_spaced_first_and_just_enough():
    """5 ms with the batch's transfer: 150 µs allowed, the regions take 35 + 6 x 18 = 143, so
    the 16 µs update goes every 3rd step (16 / 3 = 5.3 <= 7 left); the body's event stays."""
    g = decide(0.005, 0.03, transfers=1)
    assert (g.update_every, g.loop_body, g.fold_backward_step) == (3, True, False)
    assert g.kept_us <= 0.03 * 5000 < g.full_us
    assert decide(0.006, 0.03, transfers=1).update_every == 1  # 180 µs allowed: everything fits


def test_a_shorter_step_loses_the_body_event_then_folds_backward_with_the_step():
    """4 ms: 120 µs allowed. Without the body event the regions take 35 + 4 x 18 = 107 µs, so
    the update runs every 2nd step (8 <= 13 left); with a transfer, backward and step share a
    region too."""
    g = decide(0.004, 0.03)
    assert (g.update_every, g.loop_body, g.fold_backward_step) == (2, False, False)
    assert g.kept_us == pytest.approx(STEP + 4 * REGION + UPDATE / 2)
    text = g.describe()
    assert "coarsened: the step's metadata update every 2 steps, no loop-body event (fetch.block) -> 115.0 µs (2.9%)" \
        in text
    assert "still over" not in text
    g = decide(0.004, 0.03, transfers=1)
    assert (g.update_every, g.loop_body, g.fold_backward_step, g.fold_forward) == (2, False, True, False)


def test_a_device_transfer_counts_and_one_compute_region_per_step_makes_room_for_it():
    """3 ms with the batch's device transfer: 90 µs allowed. Backward and step folded leave
    35 + 5 x 18 = 125 µs, so the forward joins them: 35 + 3 x 18 = 89, the update every 17th."""
    g = decide(0.003, 0.03, transfers=1)
    assert (g.update_every, g.loop_body, g.fold_backward_step, g.fold_forward) == (17, False, True, True)
    assert g.kept_us == pytest.approx(STEP + 3 * REGION + UPDATE / 17)
    text = g.describe()
    assert "every region 159.0 µs (5.3%, 1 device transfer included)" in text
    assert "one compute region per step, forward through optimizer step (ai.compute) -> 89.9 µs (3.0%)" in text
    assert not decide(0.003, 0.03).fold_forward  # without the transfer, the forward keeps its region


def test_below_the_floor_the_plan_samples_steps():
    """1 ms: even the floor costs 89 µs (8.9%), so every region is written on 1 step in k, the
    least k whose traced share (2% forced, 1 in k of the rest) at 1.33 x 159 µs in situ and the
    untraced steps at 12 µs fit 30 µs: k = 14."""
    g = decide(0.001, 0.03, transfers=1)
    assert (g.sample_every, g.sample_set_by) == (14, "budget")
    assert (g.update_every, g.loop_body, g.fold_backward_step, g.fold_forward) == (1, True, False, False)
    traced = 0.02 + 0.98 / 14
    assert g.kept_us == pytest.approx(traced * FULL_US_WITH_TRANSFER * 1.33 + (1 - traced) * 12) and g.kept_us <= 30
    assert sampled_cost(FULL_US_WITH_TRANSFER, 13) > 30  # the least k that fits
    assert "sampled: every region on 1 step in 14" in g.describe()
    assert decide(0.003, 0.03).sample_every == 1  # the coarsening fits: no sampling


def test_a_traced_step_measured_on_a_sampled_run_sets_k():
    """``--step-time RUN`` of a sampled run measures what a traced step costs (220 µs here, not
    the model's 1.33 x 159 = 211): k follows it, and the plan says on what cost."""
    g = decide(0.001, 0.03, transfers=1, traced_step_us=220.0)
    assert g.sample_every == 15 > decide(0.001, 0.03, transfers=1).sample_every
    assert sampled_cost(0, 14, 220.0) > 30 >= g.kept_us
    assert "a traced step measured at 220 µs (overhead.traced-step-us)" in g.describe()


def test_a_users_k_is_kept_and_said():
    g = decide(None, 0.03, sample_every=8)
    assert (g.sample_every, g.sample_set_by) == (8, "config")
    assert "1 step in 8 (overhead.sample-every" in g.describe()


def test_below_the_floor_without_sampling_the_plan_says_so():
    """1 ms, sampling refused (overhead.sample-every: 1): the floor, 89 µs (8.9%), and why."""
    g = decide(0.001, 0.03, transfers=1, sample_every=1)
    assert g.update_every == MAX_UPDATE_EVERY and g.fold_backward_step and g.fold_forward
    assert "-> 89.2 µs (8.9%); still over the budget: the floor is the wait for each batch, the 1 compute region " \
        "the overlap analysis needs and the batch's 1 device transfer(s)" in g.describe()


def test_a_region_cost_measured_here_scales_the_prediction():
    """``overhead.event-us``: at 36 µs a region (twice this machine's) a 6 ms step no longer
    fits every region (282 µs > 180 µs), and the plan says on what cost."""
    assert decide(0.006, 0.03).coarsened == []
    g = decide(0.006, 0.03, event_us=36.0)
    assert g.full_us == pytest.approx(2 * FULL_US) and g.kept_us <= 180 and g.coarsened
    assert "every region 282.0 µs (4.7%, at 36 µs a region (overhead.event-us))" in g.describe()


def test_a_larger_budget_coarsens_less():
    assert decide(0.002, 0.1).coarsened == [] != decide(0.002, 0.03, sample_every=1).coarsened
    assert decide(0.002, 0.1).sample_every == 1 < decide(0.002, 0.03).sample_every  # 2 ms is under the floor


@pytest.fixture(scope="module")
def budgeted(tmp_path_factory):
    """torch_basic annotated for a 1 ms step with coarsening alone (sampling refused), for a 1 ms
    step as the plan chooses (sampled steps), and for no step time."""
    from dftpass.cli import main

    root = tmp_path_factory.mktemp("budget")
    src = root / "torch_basic"
    shutil.copytree(APPS / "torch_basic", src, ignore=shutil.ignore_patterns("__pycache__"))
    assert main(["run", str(src), "--out", str(root / "plain"), "-q"]) == 0
    assert main(["run", str(src), "--out", str(root / "budget"), "-q", "--step-time", "0.001",
                 "--sample-every", "1"]) == 0
    assert main(["run", str(src), "--out", str(root / "sampled"), "-q", "--step-time", "0.001"]) == 0
    return root


def test_plan_says_what_it_coarsened_and_why(cli, torch_basic):
    r = cli("plan", torch_basic, "--step-time", "0.001", "--sample-every", "1")
    assert r.code == 0
    assert ("overhead: budget 3.0% of a 1 ms step = 30.0 µs; every region 159.0 µs (15.9%, 1 device "
            "transfer included); coarsened:") in r.err  # the evaluation loop's transfer is not a training step's
    assert "ai.dataloader.fetch.iter(loader, include_block=False)" in r.out
    assert "if _dft_env.DFTRACER_ENABLE and step % 64 == 0:" in r.out
    # one region from the model call through the step; nothing leaves it early, so it is a
    # start()/stop() pair (a ``continue`` inside would make it a ``with``: test_lean_regions)
    assert ("+        ai.compute.start()\n         outputs = model(images)\n         loss = loss_fn(outputs, labels)\n"
            "         loss.backward()\n         optimizer.step()\n+        ai.compute.stop()\n") in r.out
    # the model's class is not decorated (its forward is in the region); evaluation's call is timed in place
    assert "@ai.compute.forward" not in r.out and "+        ai.compute.forward.start()\n         outputs = model(images)" \
        in r.out
    plain = cli("plan", torch_basic)
    assert "overhead:" not in plain.err and "include_block" not in plain.out
    with pytest.raises(SystemExit) as usage:  # not a step time: a usage error
        cli("plan", torch_basic, "--step-time", "0")
    assert usage.value.code == 2


def test_a_second_annotation_of_the_budgeted_copy_changes_nothing(budgeted, cli):
    """With or without the step time: a folded backward and step is timed (inside the
    ``ai.compute`` span), a sparse update is an update, a loop without its body event is wrapped."""
    for how in ((), ("--step-time", "0.001", "--sample-every", "1")):
        r = cli("plan", budgeted / "budget", *how)
        assert r.code == 0 and r.out.strip() == "", (how, r.out)


def test_the_budgeted_copy_strips_back_to_the_original(budgeted, cli):
    for how in ((), ("--all",)):
        out = budgeted / f"stripped{len(how)}"
        assert cli("strip", budgeted / "budget", "--out", out, *how).code == 0
        assert tree_bytes(out) == tree_bytes(budgeted / "torch_basic"), how


@pytest.mark.e2e
def test_the_budgeted_program_computes_the_same_and_writes_fewer_events(budgeted, tmp_path, cli):
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
    # the compute the overlap needs: one region per training step; the forward events left are evaluation's
    assert budget[("compute", "compute")] == plain[("compute", "step")] == plain[("compute", "backward")] > 0
    assert budget[("compute", "backward")] == budget[("compute", "step")] == 0
    assert 0 < budget[("compute", "forward")] == plain[("compute", "forward")] - plain[("compute", "step")]
    assert sum(budget.values()) < sum(plain.values())


    # the step time a traced run reports is what the budget can plan for (--step-time RUN)
    for name in ("plain", "budget"):
        r = cli("plan", budgeted / "torch_basic", "--step-time", tmp_path / f"traces-{name}", "--sample-every", "1")
        said = next(line for line in r.err.splitlines() if line.startswith("step time:"))
        ms = float(said.split()[2])
        assert r.code == 0 and " train steps traced in " in said and 0.05 < ms < 5000, said
        assert f"overhead: budget 3.0% of a {ms:g} ms step" in r.err, r.err


@pytest.mark.e2e
def test_the_sampled_program_computes_the_same_and_its_analysis_scales_back(budgeted, tmp_path):
    """The plan for 1 ms samples steps (``initialize(sample_every=14)``): the same results, the
    step regions of fewer steps, and the analysis of its trace counts every batch from the
    loop's counter and says the totals are estimated."""
    pytest.importorskip("torch", reason="torch is not installed (./dev setup installs the CPU build)")
    pytest.importorskip("dftracer.python", reason="dftracer is not installed (./dev setup installs it)")
    from dftpass.analysis.work import batches_received
    from dftpass.traces import analyze
    from tests.e2e.test_torch_basic import run_app

    assert "initialize(sample_every=14)" in (budgeted / "sampled" / "train.py").read_text()
    data = tmp_path / "data"
    counts, analyses = {}, {}
    for name in ("plain", "sampled"):
        run_app(budgeted / name, data, tmp_path / f"out-{name}", tmp_path / f"traces-{name}" / "trace")
        files = sorted((tmp_path / f"traces-{name}").glob("trace-*-app.pfw.gz"))
        counts[name] = Counter((e["cat"], e["name"]) for f in files for e in events_of(f))
        analyses[name] = analyze(files)
    for result in ("result.json", "weights.pt"):
        assert (tmp_path / "out-sampled" / result).read_bytes() == (tmp_path / "out-plain" / result).read_bytes()
    plain, sampled = counts["plain"], counts["sampled"]
    assert 0 < sampled[("compute", "backward")] < plain[("compute", "backward")]
    assert 0 < sampled[("dataloader", "fetch.iter")] < plain[("dataloader", "fetch.iter")]
    assert sampled[("pipeline", "train")] == plain[("pipeline", "train")] > 0  # phases always written
    summary = analyses["sampled"].summary
    assert summary.sampling is not None and summary.sampling.sampled and summary.sampling.every == 14
    assert batches_received(summary) == batches_received(analyses["plain"].summary) == plain[
        ("dataloader", "fetch.iter")]
    assert "1 step in 14 traced" in summary.sampling.describe() and "totals estimated" in summary.sampling.describe()
    assert analyses["plain"].summary.sampling is None


def test_a_run_with_no_steps_is_refused_with_a_reason(cli, torch_basic, tmp_path):
    (tmp_path / "empty").mkdir()
    r = cli("plan", torch_basic, "--step-time", tmp_path / "empty")
    assert r.code != 0 and "show no training step" in r.err and "give the step time in seconds" in r.err


def test_one_region_per_step_starts_at_the_statement_that_holds_the_forward(cli, tmp_path):
    """Under ``with torch.autocast(...)`` the forward's statement is the ``with``; a second
    model call in the span (a teacher's) gets no region of its own; the region is a ``with``
    (a ``continue`` inside it closes it); the evaluation's call is timed where it is."""
    project = tmp_path / "amp"
    project.mkdir()
    (project / "train.py").write_text(
        "import torch\nfrom torch import nn\n\n\nclass Net(nn.Module):\n    def __init__(self):\n"
        "        super().__init__()\n        self.fc = nn.Linear(4, 1)\n\n    def forward(self, x):\n"
        "        return self.fc(x)\n\n\ndef train(model, teacher, loader, optimizer, device):\n"
        "    for x, y in loader:\n        x, y = x.to(device), y.to(device)\n        optimizer.zero_grad()\n"
        "        with torch.autocast('cpu'):\n            loss = nn.functional.mse_loss(model(x), y)\n"
        "        loss = loss + nn.functional.mse_loss(teacher(x), y)\n        if not torch.isfinite(loss):\n"
        "            continue\n        loss.backward()\n        optimizer.step()\n\n\n"
        "def evaluate(model, loader):\n    with torch.no_grad():\n        for x, y in loader:\n"
        "            out = model(x)\n\n\ndef main():\n    model, teacher = Net(), Net()\n"
        "    data = [(torch.ones(4), torch.ones(1))] * 8\n    loader = torch.utils.data.DataLoader(data, batch_size=2)\n"
        "    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        "    train(model, teacher, loader, optimizer, 'cpu')\n    evaluate(model, loader)\n\n\n"
        "if __name__ == '__main__':\n    main()\n")
    r = cli("plan", project, "--step-time", "0.001", "--sample-every", "1")
    assert r.code == 0 and "one compute region per step" in r.err, r.err
    assert ("+        with ai.compute:\n+            with torch.autocast('cpu'):\n"
            "+                loss = nn.functional.mse_loss(model(x), y)\n"
            "+            loss = loss + nn.functional.mse_loss(teacher(x), y)\n"
            "+            if not torch.isfinite(loss):\n+                continue\n+            loss.backward()\n"
            "+            optimizer.step()\n") in r.out, r.out
    assert "@ai.compute.forward" not in r.out and r.out.count("ai.compute.forward.start()") == 1
    assert "+            ai.compute.forward.start()\n             out = model(x)\n+            ai.compute.forward.stop()" in r.out
