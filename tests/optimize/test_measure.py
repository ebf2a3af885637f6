"""The decision rule of optimize: a paired interval, read against the least gain worth keeping."""

from __future__ import annotations

import math

import pytest
from scipy import stats

from dftpass.optimize.measure import Series, Timing, decide, paired_interval


def _t(wall, program=None):
    return Timing(None if program is None else Series("program", *program), Series("wall", *wall))


def test_the_interval_is_the_t_interval_of_the_paired_log_ratios_widened_by_the_sessions_noise():
    before, after = [10.0, 10.4, 9.8, 10.1], [9.1, 9.6, 8.8, 9.3]
    logs = [math.log(a / b) for a, b in zip(after, before)]
    lo, hi = stats.t.interval(0.95, len(logs) - 1, loc=sum(logs) / 4, scale=stats.sem(logs))
    plain = paired_interval(before, after, session_sd=0.0)
    assert plain.pairs == 4 and plain.estimate == pytest.approx(math.exp(sum(logs) / 4))
    assert (plain.low, plain.high) == pytest.approx((math.exp(lo), math.exp(hi)))
    # with the noise between sessions: the half-widths add in quadrature
    iv = paired_interval(before, after, session_sd=0.012)
    half = math.hypot((hi - lo) / 2, stats.norm.ppf(0.975) * 0.012)
    assert (iv.low, iv.high) == pytest.approx((math.exp(sum(logs) / 4 - half), math.exp(sum(logs) / 4 + half)))
    assert iv.floor == pytest.approx(stats.norm.ppf(0.975) * 0.012)


def test_pairing_cancels_a_drift_that_medians_cannot():
    """The machine gets slower over the run; each pair is 8% faster after: the pairs say so,
    although the two sides' ranges overlap almost entirely."""
    drift = [10, 11, 12.5, 14, 15.5]
    before, after = drift, [d * 0.92 * (1.01 if i % 2 else 0.99) for i, d in enumerate(drift)]
    d = decide(_t((before, after)), 2.0)
    assert d.outcome == "faster", d.text


def test_too_few_pairs_is_unmeasured():
    assert paired_interval([1.0], [0.9]) is None
    assert decide(_t(([1.0], [0.9])), 2.0).outcome == "unmeasured"


def test_a_clear_gain_is_faster_and_says_its_interval():
    d = decide(_t(([10, 10.1, 10.2, 10.1], [9, 9.1, 9.0, 9.1]), program=([5, 5.1, 5.0, 5.05], [4, 4.1, 4.0, 4.05])), 2.0)
    assert d.outcome == "faster"
    assert "program 0.80" in d.text and "95% CI" in d.text and "4 pairs" in d.text


def test_a_gain_inside_the_noise_is_undecided_not_no_gain():
    d = decide(_t(([10, 12, 8, 11], [9.5, 12.5, 7.5, 10.5])), 2.0)
    assert d.outcome == "undecided" and "straddles 0.980" in d.text and "after 4 pairs" in d.text


def test_an_interval_all_above_the_bar_is_no_gain():
    d = decide(_t(([10, 10, 10, 10], [10.1, 10.12, 10.08, 10.1])), 2.0)
    assert d.outcome == "no gain" and "under 2%" in d.text


def test_an_estimate_nearer_the_bar_than_the_sessions_noise_is_undecided_for_good():
    """No number of pairs in one session can put a 1.5% gain on one side of a 2% bar that a
    ratio moves 1.2% across: undecided, and the loop stops adding pairs."""
    d = decide(_t(([10, 10, 10, 10], [9.85, 9.86, 9.84, 9.85])), 2.0)
    assert d.outcome == "undecided" and d.final and d.decided and "more pairs cannot decide" in d.text


def test_a_program_gain_paid_back_in_the_wall_time_is_slower():
    d = decide(_t(([10, 10.1, 10, 10.1], [11, 11.2, 11.1, 11.0]), program=([5, 5, 5.1, 5], [4, 4.1, 4, 4])), 2.0)
    assert d.outcome == "slower" and "wall" in d.text


def test_the_program_series_needs_every_run_to_have_its_clock():
    reps = lambda walls, progs: [{"wall_s": w, "clock": None if p is None else {"program_s": p}}  # noqa: E731
                                 for w, p in zip(walls, progs)]
    t = Timing.of(reps([5, 5], [3, None]), reps([4, 4], [2, 2]))
    assert t.program is None and t.primary.name == "wall"
    t = Timing.of(reps([5, 5, 5], [3, 3, 3]), reps([4, 4], [2, 2]))
    assert t.program is not None and t.pairs == 2  # pairs are what both sides have


def test_the_budget_says_what_no_longer_fits(tmp_path):
    from pathlib import Path

    from dftpass.optimize.loop import Optimizer, Options, Progress

    progress = Progress(budget_s=100, stream=open(tmp_path / "log", "w"), clock=lambda: 0.0)
    opt = Optimizer(Options(source=Path("."), workspace=tmp_path, command=["python"]), None, None, progress)
    assert opt._fits(10, 9.0) == ""  # 10 x (9 s + 1 s overhead) = 100 s: fits
    assert opt._fits(10, 15.0).startswith("the budget is spent: 10 more runs need ~160 s, 100 s are left")
    unbounded = Optimizer(Options(source=Path("."), workspace=tmp_path, command=["python"]), None, None,
                          Progress(None, stream=progress.stream))
    assert unbounded._fits(1000, 1000.0) == ""


def _optimizer(tmp_path, times, **options):
    """An optimizer whose untraced runs return ``times[label]`` in turn (no program runs:
    this tests the order of the runs and when the pairs stop)."""
    from pathlib import Path

    from dftpass.optimize.loop import Optimizer, Options, Progress

    opt = Optimizer(Options(source=Path("."), workspace=tmp_path, command=["python"], **options), None, None,
                    Progress(None, stream=open(tmp_path / "log", "w")))
    order = []

    def fake_time(label, cwd, env, append):
        order.append(label)
        wall = next(times[label])
        return {"wall_s": wall, "exit_code": 0, "clock": {"program_s": wall - 3.0}}

    opt._time = fake_time
    return opt, order


def test_a_clear_answer_stops_at_the_first_pairs_and_runs_alternate(tmp_path):
    import itertools

    times = {"b": itertools.cycle([8.0, 8.1, 7.9]), "a": itertools.cycle([7.0, 7.1, 6.9])}
    opt, order = _optimizer(tmp_path, times)
    timing, decision, cut = opt.timed_pairs("t", ("b", None, {}), ("a", None, {}), 8.0)
    assert decision.outcome == "faster" and timing.pairs == 3 and cut == ""
    assert order == ["b", "a", "a", "b", "b", "a"]  # ABBA


def test_a_close_answer_adds_pairs_up_to_the_maximum_and_says_undecided(tmp_path):
    import itertools

    # the program's time (wall - 3 s here) in ratios 0.80, 1.10, 0.85, 1.05, ...: a 7% gain in
    # the estimate, far too noisy to tell
    times = {"b": itertools.repeat(13.0), "a": itertools.cycle([11.0, 14.0, 11.5, 13.5])}
    opt, order = _optimizer(tmp_path, times, max_pairs=7)
    timing, decision, _ = opt.timed_pairs("t", ("b", None, {}), ("a", None, {}), 8.0)
    assert decision.outcome == "undecided" and not decision.final and timing.pairs == 7 and len(order) == 14
    assert "straddles" in decision.text and "after 7 pairs" in decision.text
