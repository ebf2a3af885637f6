"""The optimization catalogue and the proposals made from a run's measurements and facts."""

from __future__ import annotations

import pytest

from dftpass.analysis import proposals as P
from dftpass.analysis.context import ABSENT, SETTINGS, LoaderFacts, ProgramFacts
from dftpass.analysis.diagnosis import Cause


def test_every_strategy_is_cited_complete_and_never_does_less():
    cat = P.catalogue()
    ids = [s["id"] for s in cat["strategies"]]
    assert len(ids) == len(set(ids))
    for s in cat["strategies"]:
        assert s["cite"] and all(c in cat["citations"] for c in s["cite"]), s["id"]
        assert s["level"] in ("L1", "L2", "L3") and s["component"] in P.COMPONENT_ORDER
        assert s["dimension"] in cat["dimensions"][s["component"]], s["id"]
        assert 0 < s["reach"] <= 1 and s["system_effect"] in ("throughput", "bandwidth", "utilization", "none")
        assert set(s["when"]) <= {"cause", "metric", "above"}
        assert set(s.get("needs", [])) <= set(P.PRECONDITIONS), s["id"]
        assert s.get("estimate", "share") in P.ESTIMATORS, s["id"]
        text = (s["title"] + " " + s["change"]).lower()
        assert not any(phrase in text for phrase in P.DOING_LESS), s["id"]
    assert {s["component"] for s in cat["strategies"]} == set(P.COMPONENT_ORDER)


def loader(workers: str | None = None, persistent: str | None = None, split: str = "train") -> LoaderFacts:
    settings = {k: ABSENT for k in SETTINGS}
    if workers is not None:
        settings["num_workers"] = workers
    if persistent is not None:
        settings["persistent_workers"] = persistent
    return LoaderFacts("train.py", 41, "DataLoader", "train_loader", split, settings)


def program(*loaders: LoaderFacts, cores: int = 4, gpu: str | None = None) -> ProgramFacts:
    return ProgramFacts(None, "train.py:1", list(loaders), 1, None, gpu is not None,
                        {"cpus": cores, "usable_cpus": cores, "gpu": gpu, "platform": "linux"})


SHARES = {"data_stall": 0.4, "io_time": 0.0, "transfer": 0.0, "comm_time": 0.0, "compute_time": 0.35,
          "data_read": 0.2, "checkpoint_time": 0.0}
NO_WORKERS = Cause("A.num_workers", "train.py", 41, "DataLoader(num_workers not set)", "train", True,
                   {"wait_s": 4.0, "phase_s": 8.0, "workers": 0})


def run(causes=(NO_WORKERS,), shares=SHARES, prog=None, gpu=False, ranks=1) -> P.RunFacts:
    return P.RunFacts(wall_s=10.0, shares=shares, causes=list(causes), program=prog or program(loader()),
                      gpu=gpu, ranks_per_host=ranks)


def test_more_workers_is_estimated_from_the_wait_and_the_workers_proposed():
    rows, _ = P.propose(run())
    first = rows[0]
    assert first.id == "IO-L1-num-workers" and first.answers == "A.num_workers"
    # 4 usable cores: N = 4; the training process was the one loader: 4.0 s x (1 - 1/4) = 3.0 s of 10 s
    assert first.settings == {"num_workers": 4} and "num_workers=4" in first.change
    assert first.estimate["saved_s"] == pytest.approx(3.0) and first.app_impact_pct == pytest.approx(30.0)
    assert "4 s x (1 - 1/4)" in first.estimate["formula"]
    assert first.system_impact_pct == pytest.approx(100 * (1 / (1 - 0.3) - 1), abs=0.01)
    assert first.weighted_score == pytest.approx(0.5 * first.app_impact_pct + 0.5 * first.system_impact_pct, abs=0.01)
    assert first.citations and first.status == P.PROPOSED and first.evidence
    assert any(p.startswith("spare-cores:") for p in first.preconditions)


def test_the_estimate_never_passes_the_measured_share():
    cause = Cause("A.num_workers", "train.py", 41, "m", "train", True, {"wait_s": 9.0, "workers": 0})
    rows, _ = P.propose(run([cause], shares={**SHARES, "data_stall": 0.1}))
    assert rows[0].app_impact_pct == pytest.approx(10.0)  # 9 s x 3/4 would be 67.5% of the wall


def test_the_first_proposal_answers_the_top_cause_whatever_the_scores():
    """A cheap fix for the top cause comes before a bigger estimate for another cause."""
    startup = Cause("A.persistent_workers", "train.py", 41, "respawn", "train", True,
                    {"first_fetch_s": 1.0, "first_fetches": 5})
    reads = Cause("E.sample_reads", "train.py", 41, "reads", "train", True,
                  {"wait_s": 8.0, "preprocess_s": 0.0, "reads_s": 1.0})
    rows, _ = P.propose(run([startup, reads], prog=program(loader("2"))))
    assert [r.id for r in rows][:2] == ["IO-L2-persistent-workers", "IO-L1-sample-format"]
    assert rows[0].weighted_score < rows[1].weighted_score
    # first-batch waits 1.0 s x (5 - 1)/5: workers start once instead of five times
    assert rows[0].estimate["saved_s"] == pytest.approx(0.8) and rows[0].settings == {"persistent_workers": True}


def test_preconditions_keep_advice_that_does_not_fit_the_run_out():
    # persistent workers are already on: no such proposal
    startup = Cause("A.persistent_workers", "train.py", 41, "m", "train", True, {"first_fetch_s": 1.0, "first_fetches": 2})
    rows, checklist = P.propose(run([startup], prog=program(loader("2", "True"))))
    assert "IO-L2-persistent-workers" not in [r.id for r in rows]
    verdict = next(v.verdict for v in checklist if v.dimension == "worker_lifetime")
    assert "persistent_workers=True already" in verdict
    # no GPU on the run: no GPU strategies, whatever the compute share
    ids = [r.id for r in P.propose(run([], shares={**SHARES, "compute_time": 0.8}))[0]]
    assert "COMP-L2-autotune" not in ids and "COMP-L1-mixed-precision" not in ids
    # an unknown machine confirms no GPU either
    _, checklist = P.propose(run([], shares={**SHARES, "compute_time": 0.8}, gpu=None))
    assert "machine was not recorded" in next(v.verdict for v in checklist if v.dimension == "autotune")
    # threads: only with several training processes on one host
    assert "COMP-L2-threads" not in [r.id for r in P.propose(run([]))[0]]
    assert "COMP-L2-threads" in [r.id for r in P.propose(run([], ranks=4))[0]]


def test_gpu_strategies_on_a_run_that_used_a_gpu():
    ids = [r.id for r in P.propose(run([], shares={**SHARES, "compute_time": 0.8}, gpu=True))[0]]
    assert "COMP-L2-autotune" in ids and "COMP-L1-mixed-precision" in ids


def test_bandwidth_effect_is_zero_when_no_io_was_traced():
    reads = Cause("E.sample_reads", "train.py", 41, "reads", "train", True,
                  {"wait_s": 3.0, "preprocess_s": 0.0, "reads_s": 1.0})
    fmt = next(r for r in P.propose(run([reads]))[0] if r.id == "IO-L1-sample-format")
    assert fmt.app_impact_pct > 0 and fmt.system_impact_pct == 0.0
    fmt = next(r for r in P.propose(run([reads], shares={**SHARES, "io_time": 0.2}))[0] if r.id == "IO-L1-sample-format")
    assert fmt.system_impact_pct == pytest.approx(100.0)  # reach 0.5 of the traced I/O: 2x the bandwidth


def test_every_checklist_dimension_gets_a_verdict():
    rows, checklist = P.propose(run())
    dims = [(v.component, v.dimension) for v in checklist]
    assert dims == [(c, d) for c in P.COMPONENT_ORDER for d in P.catalogue()["dimensions"][c]]
    verdicts = {(v.component, v.dimension): v.verdict for v in checklist}
    assert verdicts[("io", "loader_parallelism")] == "applicable, not measured"
    assert verdicts[("io", "prefetch_depth")].startswith("not applicable: no A.prefetch_factor cause")
    assert verdicts[("compute", "autotune")] == "not applicable: the run used no GPU"
    assert verdicts[("memory", "numa_affinity")].startswith("not applicable")


def test_applied_proposals_are_marked_and_measured():
    rows, checklist = P.propose(run(), applied={"IO-L1-num-workers": 22.5})
    row = next(r for r in rows if r.id == "IO-L1-num-workers")
    assert row.status == P.APPLIED and row.actual_app_pct == 22.5
    assert next(v for v in checklist if v.dimension == "loader_parallelism").verdict == "applied and measured"


def test_a_strategy_without_a_citation_is_dropped(monkeypatch):
    cat = P.catalogue()
    stripped = {**cat, "strategies": [{**s, "cite": []} if s["id"] == "IO-L1-num-workers" else s
                                      for s in cat["strategies"]]}
    monkeypatch.setattr(P, "catalogue", lambda: stripped)
    assert "IO-L1-num-workers" not in [r.id for r in P.propose(run())[0]]
