"""The step series (``analysis.steps``) and the pictures drawn from it and from timelines
(``analysis.stepplots``, ``timeline.side_by_side_png``), on hand-made traces whose every step
is known; the report over real runs is tested in test_report.py."""

from __future__ import annotations

import pytest

from dftpass.analysis import timeline
from dftpass.analysis.steps import Step, StepCollector
from dftpass.traces import names as N
from tests.analysis.helpers import event, write_trace
from tests.analysis.test_report import png_size

T0 = 1_795_000_000_000_000  # us


def at(ms: float) -> int:
    return T0 + round(ms * 1000)


def us(ms: float) -> int:
    return round(ms * 1000)


def training_trace(path, pid=100):
    """A train phase of two steps whose bodies are traced (fetch.iter + fetch.block), then an
    evaluate phase of two steps with fetch regions only (no body)."""
    dl = N.DATALOADER_CAT
    return write_trace(path, [
        event("pipeline", "train", at(0), us(60)),
        event(dl, N.FETCH_ITER, at(0), us(10)), event(dl, N.FETCH_BLOCK, at(10), us(20)),
        event("compute", "forward", at(12), us(15)),
        event(dl, N.FETCH_ITER, at(30), us(2)), event(dl, N.FETCH_BLOCK, at(32), us(18)),
        event("compute", "forward", at(33), us(15)),
        event("pipeline", "evaluate", at(60), us(40)),
        event(dl, N.FETCH, at(60), us(5)), event("compute", "forward", at(66), us(10)),
        event(dl, N.FETCH, at(80), us(5)), event("compute", "forward", at(86), us(10)),
    ], pid=pid)


def series_of(paths):
    collector = StepCollector()
    timeline.read(paths, on_event=collector.add)
    return collector.series()


def approx_steps(steps):
    return [Step(round(s.start_s * 1e3, 3), round(s.wait_s * 1e3, 3),
                 None if s.step_s is None else round(s.step_s * 1e3, 3), s.phase) for s in steps]


def test_steps_are_wait_plus_body_or_start_to_start_within_a_phase(tmp_path):
    training_trace(tmp_path / "train.pfw.gz")
    series = series_of([tmp_path])
    assert series.pid == 100
    assert approx_steps(series.steps) == [
        Step(0.0, 10.0, 30.0, "train"),  # body traced: its end minus the wait's start
        Step(30.0, 2.0, 20.0, "train"),
        Step(60.0, 5.0, 20.0, "evaluate"),  # no body: to the next wait of the same phase
        Step(80.0, 5.0, None, "evaluate"),  # the last of its phase: no time, its wait still counts
    ]
    assert series.phases == ["train", "evaluate"] and len(series.of_phase("evaluate")) == 2


def test_a_worker_that_fetches_is_not_the_training_process(tmp_path):
    """A fetch region in a DataLoader worker is loading: the followed process is the one that
    computes, even when a worker recorded more fetches."""
    training_trace(tmp_path / "train.pfw.gz")
    write_trace(tmp_path / "worker.pfw.gz", [event(N.DATALOADER_CAT, N.FETCH, at(i), us(0.5)) for i in range(10)],
                pid=200)
    assert series_of([tmp_path]).pid == 100


def test_no_waits_no_steps(tmp_path):
    write_trace(tmp_path / "t.pfw.gz", [event("compute", "forward", at(0), us(5))])
    series = series_of([tmp_path])
    assert series.steps == [] and series.pid is None


def test_step_plots_picture(tmp_path):
    pytest.importorskip("matplotlib", reason="the step plots need matplotlib")
    from dftpass.analysis.stepplots import step_plots_png

    training_trace(tmp_path / "train.pfw.gz")
    series = series_of([tmp_path])
    assert png_size(step_plots_png(series, "steps")) == (12 * 110, round(3.4 * 110))
    one = series._replace(steps=series.steps[:1])
    assert step_plots_png(one, "one step") is None  # nothing to plot


def test_two_runs_side_by_side_share_one_time_scale(tmp_path):
    pytest.importorskip("matplotlib", reason="the timeline pictures need matplotlib")
    training_trace(tmp_path / "a" / "t.pfw.gz")
    write_trace(tmp_path / "b" / "t.pfw.gz", [event("compute", "forward", at(0), us(50)),
                                              event("data", "item", at(50), us(150))])
    a, b = timeline.read([tmp_path / "a"]), timeline.read([tmp_path / "b"])
    # from the first wait for data (0 ms) to the end of the evaluate phase (100 ms)
    assert round(a.span_s, 3) == 0.1 and round(b.span_s, 3) == 0.2
    width, height = png_size(timeline.side_by_side_png([("a", a), ("b", b)]))
    assert width == round(2 * 5.5 * 110)
    assert timeline.side_by_side_png([("a", a), ("b", None)]) is None  # one run: nothing to set beside
