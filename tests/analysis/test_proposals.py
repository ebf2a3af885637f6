"""The optimization catalogue and the proposals made from a run's measurements."""

from __future__ import annotations

import pytest

from dftpass.analysis import proposals as P


def test_every_strategy_is_cited_complete_and_never_does_less():
    cat = P.catalogue()
    ids = [s["id"] for s in cat["strategies"]]
    assert len(ids) == len(set(ids))
    for s in cat["strategies"]:
        assert s["cite"] and all(c in cat["citations"] for c in s["cite"]), s["id"]
        assert s["level"] in ("L1", "L2", "L3") and s["component"] in P.COMPONENT_ORDER
        assert s["dimension"] in cat["dimensions"][s["component"]], s["id"]
        assert 0 < s["reach"] <= 1 and s["system_effect"] in ("throughput", "bandwidth", "utilization", "none")
        assert set(s["when"]) <= {"cause", "metric", "above", "needs"}
        text = (s["title"] + " " + s["change"]).lower()
        assert not any(phrase in text for phrase in P.DOING_LESS), s["id"]
    # the catalogue covers the four components of the order of work, each dimension has a strategy or none
    assert {s["component"] for s in cat["strategies"]} == set(P.COMPONENT_ORDER)


SHARES = {"data_stall": 0.4, "io_time": 0.0, "transfer": 0.0, "comm_time": 0.0, "compute_time": 0.35,
          "data_read": 0.2}
CAUSES = {"A.num_workers": ["train.py:41 DataLoader(num_workers not set)"]}


def test_proposals_are_bounded_by_the_measured_share_and_sorted():
    rows, _ = P.propose(SHARES, CAUSES)
    ids = [r.id for r in rows]
    assert "IO-L1-num-workers" in ids and "COMP-L2-threads" in ids
    assert "COMP-L2-autotune" not in ids  # needs a GPU
    assert "IO-L1-prefetch" not in ids  # no such cause
    for r in rows:
        assert 0 <= r.app_impact_pct <= 100 * SHARES[r.bottleneck] + 1e-9
        assert r.weighted_score == pytest.approx(0.5 * r.app_impact_pct + 0.5 * r.system_impact_pct, abs=0.01)
        assert r.citations and r.status == P.PROPOSED
    assert [r.weighted_score for r in rows] == sorted((r.weighted_score for r in rows), reverse=True)
    workers = rows[ids.index("IO-L1-num-workers")]
    assert workers.app_impact_pct == pytest.approx(100 * 0.4 * 0.9)
    assert workers.system_impact_pct == pytest.approx(100 * (1 / (1 - 0.36) - 1), abs=0.01)
    assert workers.evidence == CAUSES["A.num_workers"] and workers.order == 1


def test_bandwidth_effect_is_zero_when_no_io_was_traced():
    rows, _ = P.propose({**SHARES, "data_stall": 0.3}, {})
    fmt = next(r for r in rows if r.id == "IO-L1-sample-format")
    assert fmt.app_impact_pct > 0 and fmt.system_impact_pct == 0.0
    rows, _ = P.propose({**SHARES, "data_stall": 0.3, "io_time": 0.2}, {})
    # traced I/O: the change removes up to `reach` (0.5) of the I/O time -> 2x the bandwidth
    assert next(r for r in rows if r.id == "IO-L1-sample-format").system_impact_pct == pytest.approx(100.0)


def test_gpu_strategies_need_a_gpu():
    ids = [r.id for r in P.propose({**SHARES, "compute_time": 0.8}, {}, gpu=True)[0]]
    assert "COMP-L2-autotune" in ids and "COMP-L1-mixed-precision" in ids


def test_every_checklist_dimension_gets_a_verdict():
    rows, checklist = P.propose(SHARES, CAUSES)
    dims = [(v.component, v.dimension) for v in checklist]
    expected = [(c, d) for c in P.COMPONENT_ORDER for d in P.catalogue()["dimensions"][c]]
    assert dims == expected
    verdicts = {(v.component, v.dimension): v.verdict for v in checklist}
    assert verdicts[("io", "loader_parallelism")] == "applicable, not measured"
    assert verdicts[("io", "prefetch_depth")].startswith("not applicable: no A.prefetch_factor cause")
    assert verdicts[("compute", "autotune")] == "not applicable: the run used no GPU"
    assert verdicts[("memory", "numa_affinity")].startswith("not applicable")


def test_applied_proposals_are_marked_and_measured():
    rows, checklist = P.propose(SHARES, CAUSES, applied={"IO-L1-num-workers": 22.5})
    row = next(r for r in rows if r.id == "IO-L1-num-workers")
    assert row.status == P.APPLIED and row.actual_app_pct == 22.5
    assert next(v for v in checklist if v.dimension == "loader_parallelism").verdict == "applied and measured"


def test_a_strategy_without_a_citation_is_dropped(monkeypatch):
    cat = P.catalogue()
    stripped = {**cat, "strategies": [{**s, "cite": []} if s["id"] == "IO-L1-num-workers" else s
                                      for s in cat["strategies"]]}
    monkeypatch.setattr(P, "catalogue", lambda: stripped)
    assert "IO-L1-num-workers" not in [r.id for r in P.propose(SHARES, CAUSES)[0]]
