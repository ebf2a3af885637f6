"""The timeline picture: the phases and the loop's waits over time, above compute and data
loading per process (matplotlib).

The upper panel is the per-phase timeline: one row per phase (train, evaluate, test: the
``ai.pipeline`` regions) and one for the batch loop's wait for data (``fetch.iter``), so a
stall shows in the phase it belongs to. The lower panel has one row per process.

Events are streamed from the traces and merged per process and class into intervals; gaps
shorter than a pixel (span / ``RESOLUTION``) are closed, so a run of millions of events
draws as a few thousand bars and memory stays small.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Callable, Iterable, NamedTuple

from dftpass.traces import COMPUTE, LOADING, class_events
from dftpass.traces import names as N
from dftpass.traces.classes import FETCH_REGION, FETCH_WAIT, ClassEvent

RESOLUTION = 2000
COLORS = {COMPUTE: "#3b6fb6", LOADING: "#e8912d"}
LABELS = {COMPUTE: "compute", LOADING: "data loading"}
#: the rows of the per-phase panel, top to bottom, and their colours
PHASE_ROWS = ("train", "evaluate", "test", "waits for data")
PHASE_COLORS = {"train": "#5a9e6f", "evaluate": "#8a6fb5", "test": "#b5856f", "waits for data": "#d64541"}


def intervals(paths: Iterable[str | Path], phases: dict | None = None,
              on_event: Callable[[ClassEvent], None] | None = None
              ) -> dict[tuple[str | None, int], dict[int, list[tuple[float, float]]]]:
    """(host, pid) -> class -> merged (start_s, end_s) intervals, in seconds since the epoch.
    ``phases``, when given, is filled with phase row -> (start_s, end_s) intervals;
    ``on_event`` sees every event of the pass (the step series is built in the same read)."""
    raw: dict[tuple, dict[int, list[tuple[float, float]]]] = {}
    for ev in class_events([str(p) for p in paths]):
        if on_event is not None:
            on_event(ev)
        start = ev.ts_s
        if phases is not None:
            row = N.PHASE_EVENTS.get((ev.cat, ev.name)) or ("waits for data" if ev.fetch in (FETCH_WAIT, FETCH_REGION) else None)
            if row:
                phases.setdefault(row, []).append((start, start + ev.dur_s))
        if ev.cls not in COLORS:
            continue  # in neither class (phases, checkpoints, ...)
        raw.setdefault((ev.host, ev.pid), {}).setdefault(ev.cls, []).append((start, start + ev.dur_s))
    if not raw:
        return {}
    first = min(s for per in raw.values() for ivs in per.values() for s, _ in ivs)
    last = max(e for per in raw.values() for ivs in per.values() for _, e in ivs)
    gap = max((last - first) / RESOLUTION, 1e-9)
    merged = {}
    for proc, per in raw.items():
        merged[proc] = {}
        for cls, ivs in per.items():
            ivs.sort()
            out: list[tuple[float, float]] = []
            for s, e in ivs:
                if out and s - out[-1][1] <= gap:
                    out[-1] = (out[-1][0], max(out[-1][1], e))
                else:
                    out.append((s, e))
            merged[proc][cls] = out
    return merged


class Timeline(NamedTuple):
    """What the picture draws: per process and class the merged intervals, per phase row its
    intervals (seconds since the epoch)."""

    procs: dict[tuple[str | None, int], dict[int, list[tuple[float, float]]]]
    phases: dict[str, list[tuple[float, float]]]

    def _ends(self) -> Iterable[tuple[float, float]]:
        yield from (iv for per in self.procs.values() for ivs in per.values() for iv in ivs)
        yield from (iv for ivs in self.phases.values() for iv in ivs)

    @property
    def origin(self) -> float:
        """The first instant drawn: a wait for data can begin before any compute or loading."""
        return min(s for s, _ in self._ends())

    @property
    def span_s(self) -> float:
        return max(e for _, e in self._ends()) - self.origin


def read(paths: Iterable[str | Path], on_event: Callable[[ClassEvent], None] | None = None) -> Timeline | None:
    """The timeline of the traces under ``paths`` (one pass; ``on_event`` sees every event),
    or None when they hold no compute or loading events."""
    phases: dict[str, list[tuple[float, float]]] = {}
    procs = intervals(paths, phases, on_event)
    return Timeline(procs, phases) if procs else None


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _rows(tl: Timeline) -> tuple[list[str], list[tuple]]:
    """The phase rows present, and the processes: the training process(es) first (compute),
    then workers by first activity."""
    procs = sorted(tl.procs, key=lambda p: (COMPUTE not in tl.procs[p], min(iv[0][0] for iv in tl.procs[p].values())))
    return [r for r in PHASE_ROWS if r in tl.phases], procs


def _draw_phases(ax, tl: Timeline, rows: list[str], origin: float) -> None:
    for row, name in enumerate(rows):
        ax.broken_barh([(s - origin, max(e - s, 1e-6)) for s, e in tl.phases[name]], (row - 0.35, 0.7),
                       facecolors=PHASE_COLORS[name])
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels(rows, fontsize=8)
    ax.invert_yaxis()
    ax.grid(axis="x", alpha=0.3)


def _draw_processes(ax, tl: Timeline, procs: list[tuple], origin: float, legend: bool = True) -> None:
    for row, proc in enumerate(procs):
        for cls, ivs in tl.procs[proc].items():
            ax.broken_barh([(s - origin, max(e - s, 1e-6)) for s, e in ivs], (row - 0.35, 0.7),
                           facecolors=COLORS[cls], label=LABELS[cls])
    ax.set_yticks(range(len(procs)))
    ax.set_yticklabels([f"pid {pid}" for _, pid in procs], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("seconds since the first event")
    if legend:
        handles, labels = ax.get_legend_handles_labels()
        unique = dict(zip(labels, handles))
        ax.legend(unique.values(), unique.keys(), loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=2, fontsize=8,
                  frameon=False)
    ax.grid(axis="x", alpha=0.3)


def _png(fig) -> bytes:
    plt = _pyplot()
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()


def figure_png(tl: Timeline, title: str) -> bytes:
    """The timeline of one run as PNG bytes."""
    plt = _pyplot()
    rows, procs = _rows(tl)
    origin = tl.origin
    height = max(2.0, 0.35 * len(procs) + 1.2)
    if rows:
        fig, (top, ax) = plt.subplots(2, 1, figsize=(11, height + 0.3 * len(rows) + 0.4), dpi=110, sharex=True,
                                      gridspec_kw={"height_ratios": [0.3 * len(rows) + 0.4, height]})
        _draw_phases(top, tl, rows, origin)
        top.set_title(title, fontsize=10, loc="left")
    else:
        fig, ax = plt.subplots(figsize=(11, height), dpi=110)
        ax.set_title(title, fontsize=10, loc="left")
    _draw_processes(ax, tl, procs, origin)
    return _png(fig)


def plot_png(paths: Iterable[str | Path], title: str) -> bytes | None:
    """The timeline as PNG bytes, or None when the traces hold no compute or loading events."""
    tl = read(paths)
    return figure_png(tl, title) if tl else None


def side_by_side_png(runs: list[tuple[str, Timeline]]) -> bytes | None:
    """The timelines of runs in columns, on one time scale (the same seconds are the same
    width in every column), so a compared run's shorter or denser steps show at a glance."""
    runs = [(label, tl) for label, tl in runs if tl is not None]
    if len(runs) < 2:
        return None
    plt = _pyplot()
    layouts = [_rows(tl) for _, tl in runs]
    n_phase = max(len(rows) for rows, _ in layouts) or 1
    n_proc = max(len(procs) for _, procs in layouts)
    xmax = max(tl.span_s for _, tl in runs) * 1.02
    fig, axes = plt.subplots(2, len(runs), figsize=(5.5 * len(runs), 0.3 * (n_phase + n_proc) + 2.2), dpi=110,
                             squeeze=False, gridspec_kw={"height_ratios": [0.3 * n_phase + 0.4, 0.35 * n_proc + 0.6]})
    for col, ((label, tl), (rows, procs)) in enumerate(zip(runs, layouts)):
        top, ax = axes[0][col], axes[1][col]
        origin = tl.origin
        if rows:
            _draw_phases(top, tl, rows, origin)
        else:
            top.set_yticks([])
        top.set_title(f"{label}: {tl.span_s:.2f} s traced", fontsize=10, loc="left")
        _draw_processes(ax, tl, procs, origin, legend=col == len(runs) - 1)
        for a in (top, ax):
            a.set_xlim(0, xmax)
    return _png(fig)
