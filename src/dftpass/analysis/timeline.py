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
from typing import Iterable

from dftpass.traces import COMPUTE, LOADING, class_events
from dftpass.traces import names as N
from dftpass.traces.classes import FETCH_REGION, FETCH_WAIT

RESOLUTION = 2000
COLORS = {COMPUTE: "#3b6fb6", LOADING: "#e8912d"}
LABELS = {COMPUTE: "compute", LOADING: "data loading"}
#: the rows of the per-phase panel, top to bottom, and their colours
PHASE_ROWS = ("train", "evaluate", "test", "waits for data")
PHASE_COLORS = {"train": "#5a9e6f", "evaluate": "#8a6fb5", "test": "#b5856f", "waits for data": "#d64541"}


def intervals(paths: Iterable[str | Path], phases: dict | None = None
              ) -> dict[tuple[str | None, int], dict[int, list[tuple[float, float]]]]:
    """(host, pid) -> class -> merged (start_s, end_s) intervals, in seconds since the epoch.
    ``phases``, when given, is filled with phase row -> (start_s, end_s) intervals."""
    raw: dict[tuple, dict[int, list[tuple[float, float]]]] = {}
    for ev in class_events([str(p) for p in paths]):
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


def plot_png(paths: Iterable[str | Path], title: str) -> bytes | None:
    """The timeline as PNG bytes, or None when the traces hold no compute or loading events."""
    phases: dict[str, list[tuple[float, float]]] = {}
    data = intervals(paths, phases)
    if not data:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    origin = min(s for per in data.values() for ivs in per.values() for s, _ in ivs)
    # the training process(es) first (compute), then workers by first activity
    order = sorted(data, key=lambda p: (COMPUTE not in data[p], min(iv[0][0] for iv in data[p].values())))
    rows = [r for r in PHASE_ROWS if r in phases]
    height = max(2.0, 0.35 * len(order) + 1.2)
    if rows:
        fig, (top, ax) = plt.subplots(2, 1, figsize=(11, height + 0.3 * len(rows) + 0.4), dpi=110, sharex=True,
                                      gridspec_kw={"height_ratios": [0.3 * len(rows) + 0.4, height]})
        for row, name in enumerate(rows):
            top.broken_barh([(s - origin, max(e - s, 1e-6)) for s, e in phases[name]], (row - 0.35, 0.7),
                            facecolors=PHASE_COLORS[name])
        top.set_yticks(range(len(rows)))
        top.set_yticklabels(rows, fontsize=8)
        top.invert_yaxis()
        top.grid(axis="x", alpha=0.3)
        top.set_title(title, fontsize=10, loc="left")
    else:
        fig, ax = plt.subplots(figsize=(11, height), dpi=110)
        ax.set_title(title, fontsize=10, loc="left")
    for row, proc in enumerate(order):
        for cls, ivs in data[proc].items():
            ax.broken_barh([(s - origin, max(e - s, 1e-6)) for s, e in ivs], (row - 0.35, 0.7),
                           facecolors=COLORS[cls], label=LABELS[cls])
    ax.set_yticks(range(len(order)))
    ax.set_yticklabels([f"pid {pid}" for _, pid in order], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("seconds since the first event")
    handles, labels = ax.get_legend_handles_labels()
    unique = dict(zip(labels, handles))
    ax.legend(unique.values(), unique.keys(), loc="lower right", bbox_to_anchor=(1.0, 1.0), ncol=2, fontsize=8,
              frameon=False)
    ax.grid(axis="x", alpha=0.3)
    fig.tight_layout()
    buf = io.BytesIO()
    fig.savefig(buf, format="png")
    plt.close(fig)
    return buf.getvalue()
