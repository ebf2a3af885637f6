"""The timeline picture: compute and data loading per process over time (matplotlib).

Events are streamed from the traces and merged per process and class into intervals; gaps
shorter than a pixel (span / ``RESOLUTION``) are closed, so a run of millions of events
draws as a few thousand bars and memory stays small.
"""

from __future__ import annotations

import io
from pathlib import Path
from typing import Iterable

from dftpass.traces import COMPUTE, LOADING, class_events

RESOLUTION = 2000
COLORS = {COMPUTE: "#3b6fb6", LOADING: "#e8912d"}
LABELS = {COMPUTE: "compute", LOADING: "data loading"}


def intervals(paths: Iterable[str | Path]) -> dict[tuple[str | None, int], dict[int, list[tuple[float, float]]]]:
    """(host, pid) -> class -> merged (start_s, end_s) intervals, in seconds since the epoch."""
    raw: dict[tuple, dict[int, list[tuple[float, float]]]] = {}
    for ev in class_events([str(p) for p in paths]):
        start = ev.ts_s
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
    data = intervals(paths)
    if not data:
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    origin = min(s for per in data.values() for ivs in per.values() for s, _ in ivs)
    # the training process(es) first (compute), then workers by first activity
    order = sorted(data, key=lambda p: (COMPUTE not in data[p], min(iv[0][0] for iv in data[p].values())))
    height = max(2.0, 0.35 * len(order) + 1.2)
    fig, ax = plt.subplots(figsize=(11, height), dpi=110)
    for row, proc in enumerate(order):
        for cls, ivs in data[proc].items():
            ax.broken_barh([(s - origin, max(e - s, 1e-6)) for s, e in ivs], (row - 0.35, 0.7),
                           facecolors=COLORS[cls], label=LABELS[cls])
    ax.set_yticks(range(len(order)))
    ax.set_yticklabels([f"pid {pid}" for _, pid in order], fontsize=8)
    ax.invert_yaxis()
    ax.set_xlabel("seconds since the first event")
    ax.set_title(title, fontsize=10, loc="left")
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
