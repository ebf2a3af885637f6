"""The decision rule of optimize: a gain outside the noise, not paid back elsewhere, not warm-up moved."""

from __future__ import annotations

from dftpass.optimize.measure import Series, Timing, faster, spread


def _t(wall, program=None, steady=None):
    mk = lambda name, pair: None if pair is None else Series(name, *pair)  # noqa: E731
    return Timing(Series("median wall time", *wall), mk("program time", program), mk("steady state", steady))


def test_spread_is_the_iqr_or_the_range():
    assert spread([1.0]) == 0.0
    assert spread([1.0, 3.0, 2.0]) == 2.0
    assert spread([1.0, 2.0, 3.0, 4.0, 100.0]) == 2.0  # one outlier does not widen the noise


def test_a_gain_beyond_the_noise_is_kept():
    ok, why = faster(_t(([10, 10.1, 10.2, 10.1, 10.0], [9, 9.1, 9.0, 9.1, 9.0])), 2.0)
    assert ok and "-10.9%" in why


def test_a_gain_within_the_noise_is_not():
    ok, why = faster(_t(([10, 12, 8, 11, 9], [9.5, 11, 8, 10, 9])), 2.0)
    assert not ok and "no gain beyond the noise" in why


def test_a_gain_below_the_minimum_is_not_even_without_noise():
    ok, _ = faster(_t(([10, 10, 10], [9.9, 9.9, 9.9])), 2.0)
    assert not ok


def test_a_program_gain_paid_back_in_the_wall_time_is_not_kept():
    ok, why = faster(_t(([10, 10, 10], [11, 11, 11]), program=([5, 5, 5], [4, 4, 4])), 2.0)
    assert not ok and "slower" in why


def test_warm_up_moved_is_not_a_gain():
    ok, why = faster(_t(([10, 10, 10], [9, 9, 9]), program=([5, 5, 5], [4, 4, 4]),
                        steady=([2, 2, 2], [2.5, 2.5, 2.5])), 2.0)
    assert not ok and "warm-up" in why


def test_a_steady_state_gain_hidden_by_fixed_costs_is_kept():
    ok, why = faster(_t(([8, 9.4, 8.2], [8.1, 8.3, 8.3]), program=([3.7, 4.3, 3.8], [3.55, 3.5, 3.4]),
                        steady=([0.63, 0.62, 0.66], [0.49, 0.47, 0.49])), 2.0)
    assert ok and "each epoch after the first is faster" in why


def test_the_budget_lowers_the_repeats_and_says_so(tmp_path):
    from pathlib import Path

    from dftpass.optimize.loop import Optimizer, Options, Progress

    progress = Progress(budget_s=100, stream=open(tmp_path / "log", "w"), clock=lambda: 0.0)
    opt = Optimizer(Options(source=Path("."), workspace=tmp_path, command=["python"]), None, None, progress)
    assert opt._repeats_for(9.0) == (5, "")  # 2 sides x 5 x (9 s + 1 s overhead) = 100 s: fits
    n, why = opt._repeats_for(15.0)
    assert n == 3 and why.startswith("3 repeats a side instead of 5")
    n, why = opt._repeats_for(30.0)
    assert n == 0 and why.startswith("the budget is spent")
    assert Optimizer(Options(source=Path("."), workspace=tmp_path, command=["python"]), None, None,
                     Progress(None, stream=progress.stream))._repeats_for(1000.0) == (5, "")
