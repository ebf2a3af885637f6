"""``dftpass report WORKSPACE``: report.md and a self-contained report.html for every run.

Sections: the runs (what ran, where, how often), the comparison against the baseline (the
run labelled ``baseline``, else the first made) with the two runs' timelines side by side,
then per run its headline figures, its pictures (the timeline: phases and waits, compute and
loading per process; the step plots: step-time distribution, wait for data per step,
throughput over time), then the tables, findings and diagnosis, proposals and checklist; the
patches of the workspace last. The Markdown references ``<label>/timeline.png``,
``<label>/steps.png`` and ``compare-timelines.png``; the HTML page embeds the pictures, so it
can be mailed as one file.
"""

from __future__ import annotations

import base64
import datetime as dt
from pathlib import Path

from dftpass.analysis import lessons, render
from dftpass.analysis.compare import compare
from dftpass.analysis.html import to_html
from dftpass.analysis.run import load_or_analyze
from dftpass.analysis import timeline
from dftpass.analysis.stepplots import step_plots_png
from dftpass.analysis.steps import StepCollector
from dftpass.core.writer import atomic_write
from dftpass.runs.layout import LayoutError, RunDir, runs_in


def _baseline_first(runs: list[RunDir]) -> list[RunDir]:
    """The run labelled ``baseline`` first, else optimize's ``opt-baseline`` (its warm-up run
    was made before it, and is no reference)."""
    for label in ("baseline", "opt-baseline"):
        base = [r for r in runs if r.label == label]
        if base:
            return base + [r for r in runs if r.label != label]
    return runs


def _fill_measured_impacts(analyses: list[dict], comparison: dict | None) -> None:
    """A proposal a later run applied shows, in the run that proposed it, as applied there
    with the impact measured between the two runs."""
    if not comparison:
        return
    by_label = {a["label"]: a for a in analyses}
    for impact in comparison["proposal_impacts"]:
        proposer = by_label.get(impact["against"])
        for p in proposer.get("proposals", []) if proposer else []:
            if p["id"] == impact["proposal"]:
                p["status"] = f"applied in {impact['run']}"
                p["actual_app_pct"] = impact["actual_app_pct"]


def _optimize_doc(workspace: Path) -> dict | None:
    import json

    try:
        return json.loads((workspace / "optimize.json").read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


#: the picture of the compared runs' timelines, in the workspace
COMPARE_PICTURE = "compare-timelines.png"


def _pictures(workspace: Path, runs: list[RunDir], analyses: list[dict]) -> dict[str, dict]:
    """Per run label: its timeline (kept for the side-by-side picture) and its figures
    ((file name, alt text, PNG bytes): the timeline, then the step plots), each also written
    into the run's folder. One read of the shown repeat's traces makes both."""
    pictures: dict[str, dict] = {}
    for run, analysis in zip(runs, analyses):
        shown = analysis.get("shown_repeat") or run.record()["repeats"][0]["repeat"]
        collector = StepCollector()
        tl = timeline.read(run.trace_dirs(shown), on_event=collector.add)
        if tl is None:
            continue
        figures = [("timeline.png", "timeline", timeline.figure_png(
            tl, f"{run.label} (repeat {shown}): phases and the loop's waits; compute and data loading per process"))]
        series = collector.series()
        steps = step_plots_png(series, f"{run.label} (repeat {shown}): the steps of pid {series.pid}, the training "
                                       "process that waited for the most batches")
        if steps:
            figures.append(("steps.png", "step time, wait for data per step and throughput", steps))
        for name, _, png in figures:
            atomic_write(run.path / name, png, workspace)
        pictures[run.label] = {"timeline": tl, "figures": figures}
    return pictures


def _side_by_side(workspace: Path, pictures: dict[str, dict]) -> tuple[tuple[str, str], bytes] | None:
    """The reference run's timeline beside the last run's (the comparison's first and last
    columns), written to the workspace."""
    labels = list(pictures)
    if len(labels) < 2:
        return None
    first, last = labels[0], labels[-1]
    png = timeline.side_by_side_png([(first, pictures[first]["timeline"]), (last, pictures[last]["timeline"])])
    if png is None:
        return None
    atomic_write(workspace / COMPARE_PICTURE, png, workspace)
    return (first, last), png


def build(workspace: Path, setup, **options) -> tuple[Path, Path, int]:
    """``setup()``: (config, pass manager), for runs that need a fresh analysis."""
    """Write ``report.md`` and ``report.html``; returns their paths and the new lessons count."""
    workspace = Path(workspace).resolve()
    runs = _baseline_first(runs_in(workspace)) if workspace.is_dir() else []
    if not runs:
        raise LayoutError(f"{workspace}: no runs (folders with run.json); make one with dftpass trace")
    analyses = [load_or_analyze(r.path, setup, **options) for r in runs]
    new_lessons = sum(lessons.record(workspace, a) for a in analyses)
    comparison = compare(analyses).to_dict() if len(analyses) > 1 else None
    _fill_measured_impacts(analyses, comparison)

    pictures = _pictures(workspace, runs, analyses)
    side_by_side = _side_by_side(workspace, pictures) if comparison else None

    def document(embed: bool) -> str:
        out = [f"# dftpass report: {workspace.name}", "",
               f"Generated {dt.datetime.now().isoformat(timespec='seconds')} from {len(runs)} run(s) in "
               f"`{workspace}`.", "", "| run | repeats | wall s (median) | spread s | tables show | command | revision |",
               "|---|---:|---:|---:|---:|---|---|"]
        for run, a in zip(runs, analyses):
            rec = run.record()
            cmd = " ".join(rec["repeats"][0].get("command", []))[:80] if rec.get("repeats") else ""
            cmd = render.cell(cmd)  # a `python -c` script's newlines and pipes would break the row
            rev = rec.get("revision") or {}
            revision = (rev.get("commit", "")[:10] + (" (dirty)" if rev.get("dirty") else "")) if rev else "-"
            wall = a["metrics"].get("wall_s")
            walls = [r["wall_s"] for r in a["repeats"] if r.get("wall_s") is not None]
            spread = f"{min(walls):.2f}-{max(walls):.2f}" if len(walls) > 1 else "-"
            shown = f"repeat {a.get('shown_repeat', 1)}" + (" (median)" if len(walls) > 1 else "")
            out.append(f"| {run.label} | {len(a['repeats'])} | {f'{wall:.2f}' if wall else '-'} | {spread} | {shown} | "
                       f"`{cmd}` | {revision} |")
        optimized = _optimize_doc(workspace)
        if optimized:
            out += ["", "## Optimization", "", render.optimize_markdown(optimized)]
        def src(name: str, png: bytes) -> str:
            return ("data:image/png;base64," + base64.b64encode(png).decode()) if embed else name

        if comparison:
            out += ["", "## Comparison", ""]
            if side_by_side:
                (first, last), png = side_by_side
                out += [f"![timelines of {first} and {last} side by side]({src(COMPARE_PICTURE, png)})", ""]
            out += [render.compare_markdown(comparison)]
        for run, a in zip(runs, analyses):
            figures = [(f"{alt} of {run.label}", src(f"{run.label}/{name}", png))
                       for name, alt, png in pictures.get(run.label, {}).get("figures", [])]
            out += ["", render.markdown(a, figures)]
        patches = sorted((workspace / "patches").glob("*.patch")) if (workspace / "patches").is_dir() else []
        if patches:
            out += ["", "## Patches", ""] + [f"- `patches/{p.name}`" for p in patches]
        if (workspace / "lessons.md").is_file():
            out += ["", "Lessons of this workspace: `lessons.md`."]
        return "\n".join(out) + "\n"

    md, page = workspace / "report.md", workspace / "report.html"
    atomic_write(md, document(embed=False).encode("utf-8"), workspace)
    atomic_write(page, to_html(document(embed=True), f"dftpass report: {workspace.name}").encode("utf-8"), workspace)
    return md, page, new_lessons
