"""The step plots of a run (matplotlib): the step-time distribution, the wait for data at each
step over the run, and throughput over time; one picture of three panels, drawn from the
step series (:mod:`dftpass.analysis.steps`).

These are the plots a performance engineer draws first: a wide or two-humped distribution
says the steps are not alike (a stall every k steps, a slow worker), the wait per step says
when the loader fell behind (the first batches, after each evaluation, all along), and the
throughput says whether the run reached a steady state and when.
"""

from __future__ import annotations

import io
import statistics

from dftpass.analysis.steps import StepSeries
from dftpass.analysis.timeline import PHASE_COLORS

#: the colour of the steps outside any phase region
_OUTSIDE = "#777777"
#: about how many points throughput over time is smoothed to (a rolling mean over
#: len(steps) / _WINDOWS steps)
_WINDOWS = 40


def _color(phase: str) -> str:
    return PHASE_COLORS.get(phase, _OUTSIDE)


def _quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def step_plots_png(series: StepSeries, title: str) -> bytes | None:
    """The three panels as PNG bytes, or None with fewer than two steps (nothing to plot)."""
    steps = series.steps
    if len(steps) < 2:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (dist, wait, rate) = plt.subplots(1, 3, figsize=(12, 3.4), dpi=110)
    fig.suptitle(title, fontsize=10, x=0.01, ha="left")

    # 1. the step-time distribution, per phase
    for phase in series.phases:
        times = [1e3 * s.step_s for s in series.of_phase(phase) if s.step_s is not None]
        if times:
            dist.hist(times, bins=min(40, max(5, len(times) // 3)), alpha=0.6, color=_color(phase),
                      label=f"{phase} ({len(times)})")
    timed = [1e3 * s.step_s for s in steps if s.step_s is not None]
    if timed:
        median, p95 = statistics.median(timed), _quantile(timed, 0.95)
        dist.axvline(median, color="black", linewidth=1, label=f"median {median:.1f} ms")
        dist.axvline(p95, color="black", linewidth=1, linestyle="--", label=f"p95 {p95:.1f} ms")
    dist.set_title("step time", fontsize=9, loc="left")
    dist.set_xlabel("ms per step")
    dist.set_ylabel("steps")
    dist.legend(fontsize=7, frameon=False)

    # 2. the wait for data at each step, over the run
    waits = [1e3 * s.wait_s for s in steps]
    wait.scatter(range(1, len(steps) + 1), waits, s=6, c=[_color(s.phase) for s in steps])
    wait.plot(range(1, len(steps) + 1), waits, linewidth=0.5, color="#bbbbbb", zorder=0)
    positive = [w for w in waits if w > 0]
    if positive and max(positive) > 20 * _quantile(positive, 0.5):
        wait.set_yscale("log")  # a first-batch wait of seconds would flatten the rest
    wait.set_title("wait for data at each step", fontsize=9, loc="left")
    wait.set_xlabel("step")
    wait.set_ylabel("ms")

    # 3. throughput over time: steps per second over a rolling window of steps (a window of
    # seconds would count 0 or 1 step per window in a short run and draw a comb)
    timed_steps = [s for s in steps if s.step_s]
    if timed_steps:
        k = max(1, len(timed_steps) // _WINDOWS)
        xs, ys = [], []
        for i in range(len(timed_steps)):
            window = timed_steps[max(0, i - k + 1):i + 1]
            xs.append(timed_steps[i].start_s)
            ys.append(len(window) / sum(s.step_s for s in window))
        rate.plot(xs, ys, color="black", linewidth=1, marker="." if len(xs) < 50 else None, markersize=3)
        # the phases behind it, so a dip reads as "evaluation" rather than "slowdown"
        begin = 0
        for i in range(1, len(steps) + 1):
            if i == len(steps) or steps[i].phase != steps[begin].phase:
                rate.axvspan(steps[begin].start_s, steps[i - 1].start_s, color=_color(steps[begin].phase), alpha=0.15,
                             linewidth=0)
                begin = i
    rate.set_title("throughput", fontsize=9, loc="left")
    rate.set_xlabel("seconds since the process's first event")
    rate.set_ylabel("steps/s")
    rate.set_ylim(bottom=0)

    for ax in (dist, wait, rate):
        ax.grid(alpha=0.3)
        ax.tick_params(labelsize=8)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()
