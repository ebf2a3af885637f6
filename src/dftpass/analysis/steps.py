"""The steps of a run, one by one: when each began, how long it took, how long it waited for its
batch, and the phase it belongs to. The report's step plots are drawn from this series.

A step is one iteration of a wrapped batch loop in a training process: its wait for the batch
(``fetch.iter``, or a ``fetch`` region around ``next(it)``) and its body (``fetch.block``).
Its time is the body's end minus the wait's start where the body was traced, else the time
to the next wait of the same loop in the same phase; the last step of a phase without a body
has no time (its wait still counts).

One process is followed: the training process that waited for the most batches (rank 0 of a
data-parallel job waits like the others; one is enough to see the shape of the run, and the
plots say which).
"""

from __future__ import annotations

import bisect
from typing import NamedTuple

from dftpass.traces import COMPUTE
from dftpass.traces import names as N
from dftpass.traces.classes import FETCH_BODY, FETCH_REGION, FETCH_WAIT, ClassEvent


class Step(NamedTuple):
    start_s: float  # seconds since the first event of the followed process
    wait_s: float
    step_s: float | None  # None: the last step of a phase with no traced body
    phase: str  # train, evaluate, test, or "outside" (no phase region around it)


class StepSeries(NamedTuple):
    pid: int | None
    steps: list[Step]

    def of_phase(self, phase: str) -> list[Step]:
        return [s for s in self.steps if s.phase == phase]

    @property
    def phases(self) -> list[str]:
        """The phases that had steps, in the order of their first step."""
        return list(dict.fromkeys(s.phase for s in self.steps))


class StepCollector:
    """Fed every event of a run once (:meth:`add`); :meth:`series` then builds the steps."""

    def __init__(self) -> None:
        self._waits: dict[tuple, list[tuple[float, float]]] = {}
        self._bodies: dict[tuple, list[tuple[float, float]]] = {}
        self._phases: dict[tuple, list[tuple[float, float, str]]] = {}
        self._computes: set[tuple] = set()
        self._first: dict[tuple, float] = {}

    def add(self, ev: ClassEvent) -> None:
        proc = (ev.host, ev.pid)
        start = ev.ts_s
        self._first[proc] = min(self._first.get(proc, start), start)
        if ev.cls == COMPUTE:
            self._computes.add(proc)
        if ev.fetch in (FETCH_WAIT, FETCH_REGION):
            self._waits.setdefault(proc, []).append((start, ev.dur_s))
        elif ev.fetch == FETCH_BODY:
            self._bodies.setdefault(proc, []).append((start, start + ev.dur_s))
        phase = N.PHASE_EVENTS.get((ev.cat, ev.name))
        if phase:
            self._phases.setdefault(proc, []).append((start, start + ev.dur_s, phase))

    def series(self) -> StepSeries:
        # a fetch region in a worker is loading, not a wait: only processes that compute train
        training = [p for p in self._waits if p in self._computes] or list(self._waits)
        if not training:
            return StepSeries(None, [])
        proc = max(training, key=lambda p: len(self._waits[p]))
        waits = sorted(self._waits[proc])
        bodies = sorted(self._bodies.get(proc, []))
        body_starts = [s for s, _ in bodies]
        # innermost phase wins: an evaluate inside a train is evaluate
        phases = sorted(self._phases.get(proc, []), key=lambda iv: iv[1] - iv[0])
        origin = self._first[proc]

        def phase_of(t: float) -> tuple[str, tuple | None]:
            for s, e, name in phases:
                if s <= t <= e:
                    return name, (s, e)
            return "outside", None

        steps = []
        for i, (start, wait) in enumerate(waits):
            phase, interval = phase_of(start)
            end = None
            j = bisect.bisect_left(body_starts, start + wait - 1e-6)
            if j < len(bodies) and bodies[j][0] - (start + wait) < 1e-3:
                end = bodies[j][1]
            elif i + 1 < len(waits):
                nxt = waits[i + 1][0]
                if phase_of(nxt)[1] == interval:
                    end = nxt
            steps.append(Step(start - origin, wait, None if end is None else end - start, phase))
        return StepSeries(proc[1], steps)


def median_step(paths) -> tuple[float, int, str] | None:
    """The median time of a run's training steps (seconds), how many steps it is the median
    of, and their phase: what the tracing budget plans for (``--step-time RUN``). The steps
    of the train phase where it was traced, else every step with a time; None when the
    traces show no step."""
    from statistics import median

    from dftpass.analysis import timeline

    collector = StepCollector()
    timeline.read(paths, on_event=collector.add)
    series = collector.series()
    for phase in ("train", *series.phases):
        times = [s.step_s for s in series.of_phase(phase) if s.step_s]
        if times:
            return median(times), len(times), phase
    return None
