"""`dftpass compare`: direction-aware classes at ±5%, noise from repeats, verdicts, measured impact."""

from __future__ import annotations

import json
import shutil

import pytest

from dftpass.analysis.compare import IMPROVED, INFO, NEUTRAL, REGRESSED, classify, compare
from dftpass.analysis.metrics import METRICS
from tests.conftest import FIXTURES


def analysis(label, repeats=1, spread=None, applies=(), proposals=(), **metrics) -> dict:
    full = {name: metrics.get(name, 1.0) for name in METRICS}
    return {"label": label, "metrics": full, "repeats": [{}] * repeats, "applies": list(applies),
            "spread": spread or {}, "proposals": list(proposals)}


@pytest.mark.parametrize("change, better, expected", [
    (-10.0, "lower", IMPROVED), (10.0, "lower", REGRESSED), (5.0, "lower", NEUTRAL), (-5.0, "lower", NEUTRAL),
    (-5.01, "lower", IMPROVED), (20.0, "higher", IMPROVED), (-20.0, "higher", REGRESSED),
    (50.0, "neutral", INFO), (None, "lower", INFO),
])
def test_classes_follow_the_metric_direction(change, better, expected):
    assert classify(change, better) == expected


def row(result, metric):
    return next(r for r in result.rows if r.metric == metric)


def test_values_changes_and_verdict():
    base = analysis("baseline", wall_s=100.0, read_bandwidth=1e6, fetch_wait_s=10.0, events=500.0)
    opt = analysis("opt1", wall_s=80.0, read_bandwidth=5e5, fetch_wait_s=10.2, events=800.0)
    result = compare([base, opt])
    wall = row(result, "wall_s").cells[1]
    assert wall.value == 80.0 and wall.change_pct == pytest.approx(-20.0) and wall.cls == IMPROVED
    assert row(result, "read_bandwidth").cells[1].cls == REGRESSED  # higher is better
    assert row(result, "fetch_wait_s").cells[1].cls == NEUTRAL
    assert row(result, "events").cells[1].cls == INFO
    verdict = result.verdicts[0]
    assert verdict.startswith("opt1 vs baseline: net improvement (wall_s -20.0%)")
    assert "Regressed: read_bandwidth" in verdict and "one run per side cannot separate noise" in verdict


def test_a_change_inside_the_spread_between_repeats_is_noise():
    base = analysis("a", repeats=3, wall_s=100.0, spread={"wall_s": (90.0, 112.0)})
    other = analysis("b", repeats=3, wall_s=90.0, spread={"wall_s": (88.0, 93.0)})
    result = compare([base, other])
    cell = row(result, "wall_s").cells[1]
    assert cell.cls == IMPROVED and cell.within_noise
    assert "within the noise" in result.verdicts[0] and "neutral" in result.verdicts[0]
    clear = compare([base, analysis("c", repeats=3, wall_s=50.0, spread={"wall_s": (49.0, 51.0)})])
    assert not row(clear, "wall_s").cells[1].within_noise and "net improvement" in clear.verdicts[0]


def test_net_regression_and_more_than_two_runs():
    result = compare([analysis("a", wall_s=10.0), analysis("b", wall_s=10.2), analysis("c", wall_s=13.0)])
    assert result.labels == ["a", "b", "c"] and len(result.verdicts) == 2
    assert "neutral" in result.verdicts[0] and "net regression (wall_s +30.0%)" in result.verdicts[1]


def test_applied_proposals_get_their_measured_impact():
    made = {"id": "IO-L1-num-workers", "app_impact_pct": 30.0, "bottleneck": "data_stall",
            "estimate": {"formula": "wait for data 40 s x (1 - 1/4)", "saved_s": 30.0}}
    base = analysis("baseline", wall_s=100.0, fetch_wait_s=40.0, traced_span_s=90.0, proposals=[made])
    opt = analysis("opt1", wall_s=75.0, fetch_wait_s=14.0, traced_span_s=66.0, applies=["IO-L1-num-workers"])
    [impact] = compare([base, opt]).proposal_impacts
    assert impact == {"run": "opt1", "against": "baseline", "proposal": "IO-L1-num-workers",
                      "estimated_app_pct": 30.0, "actual_app_pct": pytest.approx(25.0),
                      "formula": "wait for data 40 s x (1 - 1/4)", "metric": "fetch_wait_s",
                      "estimated_saved_s": 30.0, "measured_saved_s": pytest.approx(26.0),
                      "span_saved_s": pytest.approx(24.0), "wall_saved_s": pytest.approx(25.0)}


def test_an_iteration_is_measured_against_the_run_it_follows():
    base = analysis("baseline", wall_s=50.0)
    ann = analysis("annotated", wall_s=100.0, proposals=[{"id": "IO-L2-persistent-workers", "app_impact_pct": 12.0}])
    opt = analysis("opt1", wall_s=90.0, applies=["IO-L2-persistent-workers"])
    [impact] = compare([base, ann, opt]).proposal_impacts
    assert impact["against"] == "annotated" and impact["estimated_app_pct"] == 12.0
    assert impact["actual_app_pct"] == pytest.approx(10.0)


def test_compare_two_trace_folders_through_the_cli(cli, tmp_path):
    a, b = tmp_path / "a", tmp_path / "b"
    shutil.copytree(FIXTURES / "traces" / "real_workers", a)
    shutil.copytree(FIXTURES / "traces" / "real_workers", b)
    data = json.loads(cli("compare", a, b, "--json").out)
    assert data["labels"] == ["a", "b"]
    for r in data["rows"]:
        change = r["cells"][1]["change_pct"]
        assert change in (0.0, None) and r["cells"][1]["cls"] in (NEUTRAL, INFO)
    text = cli("compare", a, b)
    assert text.code == 0 and "b vs a: neutral" in text.out
    md = cli("compare", a, b, "--markdown").out
    assert "| metric | a | b |" in md and "(same)" in md and "| wall_s |" in md
    assert cli("compare", a).code == 2


def test_a_run_without_events_is_no_improvement_over_a_traced_one():
    """A run that did not do the traced work (0 events) is faster, not better (it said
    "net improvement, wall_s -39.3%")."""
    base = {**analysis("annotated", wall_s=10.0), "events": 5000}
    empty = {**analysis("opt1", wall_s=6.07, applies=["IO-L1-num-workers"]), "events": 0}
    result = compare([base, empty])
    assert "net improvement" not in result.verdicts[0]
    assert result.verdicts[0].startswith("opt1 vs annotated: cannot judge (opt1 has no trace events")
    assert result.proposal_impacts[0]["actual_app_pct"] is None
    # two runs without events (an un-annotated baseline and variant) still compare on wall time
    both = compare([{**analysis("a", wall_s=10.0), "events": 0}, {**analysis("b", wall_s=6.0), "events": 0}])
    assert "net improvement" in both.verdicts[0]


def test_a_failed_run_gets_no_verdict():
    base = {**analysis("a", wall_s=10.0), "events": 10}
    failed = {**analysis("b", wall_s=1.0), "events": 10, "repeats": [{"exit_code": 1}]}
    assert "cannot judge (b failed (exit code 1)" in compare([base, failed]).verdicts[0]
