"""``dftpass compare``: runs side by side, metric by metric, with a verdict.

The first run is the baseline. For every metric of :data:`~dftpass.analysis.metrics.METRICS`
and every other run: the value (median over the run's repeats), the change in % against the
baseline, and a class: *improved* or *regressed* when the change is beyond ±5% in the
metric's direction (lower time is better, higher bandwidth is better), *neutral* within ±5%,
*info* for metrics without a direction (event counts). A change smaller than the spread
between repeats of either side is flagged *within noise*; with one repeat per side the noise
cannot be told apart, and the verdict says so.

A run made with ``dftpass trace --applies ID`` gets the measured wall-time change against the
run before it in the list (the iteration it follows) as the actual impact of proposal ID,
beside the seconds the proposal's own bottleneck lost (``fetch_wait_s`` for a data stall,
``checkpoint_s`` for checkpoints): on a short program the wall time also carries the
interpreter's start-up, which varies by tenths of a second between runs, so the
bottleneck's seconds are the sharper check of the estimate (``estimated_saved_s``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dftpass.analysis import judge
from dftpass.analysis.metrics import HIGHER, LOWER, METRICS

THRESHOLD_PCT = 5.0
IMPROVED, REGRESSED, NEUTRAL, INFO = "improved", "regressed", "neutral", "info"
#: the metric a verdict rests on, in order of preference
HEADLINE = ("wall_s", "traced_span_s")
#: the metric that measures each bottleneck a proposal answers (proposals.bottleneck)
BOTTLENECK_METRICS = {"data_stall": "fetch_wait_s", "checkpoint_time": "checkpoint_s", "compute_time": "compute_s",
                      "comm_time": "comm_s", "transfer": "device_s", "io_time": "io_time_s",
                      "data_read": "data_item_s"}


@dataclass
class Cell:
    value: float | None
    change_pct: float | None = None
    cls: str = NEUTRAL
    within_noise: bool = False


@dataclass
class Row:
    metric: str
    unit: str
    better: str
    cells: list[Cell]


@dataclass
class Comparison:
    labels: list[str]
    repeats: list[int]
    rows: list[Row]
    verdicts: list[str]  # one per non-baseline run
    proposal_impacts: list[dict] = field(default_factory=list)
    #: per non-baseline run: {"same_work": Verdict dict, "same_output": Verdict dict}
    judgements: list[dict] = field(default_factory=list)
    #: runs whose own repeats differ in work or output (an unseeded program)
    unsteady: list[str] = field(default_factory=list)
    #: "<label>: 1 step in k traced ...; totals estimated", per sampled run
    sampled: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {
            "labels": self.labels,
            "repeats": self.repeats,
            "threshold_pct": THRESHOLD_PCT,
            "rows": [{"metric": r.metric, "unit": r.unit, "better": r.better,
                      "cells": [c.__dict__ for c in r.cells]} for r in self.rows],
            "verdicts": self.verdicts,
            "proposal_impacts": self.proposal_impacts,
            "judgements": self.judgements,
            "unsteady": self.unsteady,
            "sampled": self.sampled,
        }


def classify(change_pct: float | None, better: str) -> str:
    if change_pct is None or better not in (LOWER, HIGHER):
        return INFO
    if abs(change_pct) <= THRESHOLD_PCT:
        return NEUTRAL
    good = change_pct < 0 if better == LOWER else change_pct > 0
    return IMPROVED if good else REGRESSED


def _change(base: float | None, value: float | None) -> float | None:
    if base is None or value is None:
        return None
    if base == 0:
        return 0.0 if value == 0 else None
    return 100.0 * (value - base) / abs(base)


def _noise(a: dict, b: dict, metric: str, base: float | None, value: float | None) -> bool:
    spreads = [s for s in (a["spread"].get(metric), b["spread"].get(metric)) if s]
    if base is None or value is None or not spreads or min(len(a["repeats"]), len(b["repeats"])) < 2:
        return False
    width = max(hi - lo for lo, hi in spreads)
    return abs(value - base) < width


def compare(analyses: list[dict]) -> Comparison:
    """``analyses``: the ``analysis.json`` dicts of the runs, baseline first."""
    base = analyses[0]
    rows = []
    for name, metric in METRICS.items():
        b = base["metrics"].get(name)
        cells = [Cell(b)]
        for other in analyses[1:]:
            v = other["metrics"].get(name)
            change = _change(b, v)
            cells.append(Cell(v, change, classify(change, metric.better), _noise(base, other, name, b, v)))
        rows.append(Row(name, metric.unit, metric.better, cells))
    verdicts = [_verdict(base, other, [r for r in rows], i + 1) for i, other in enumerate(analyses[1:])]
    impacts = []
    for i, other in enumerate(analyses[1:], 1):
        # an iteration is measured against the run it follows (baseline -> annotated -> opt1 ...),
        # with the estimate that run's analysis made
        before = analyses[i - 1]
        change = None if _cannot_judge(before, other) else next(
            (_change(before["metrics"].get(m), other["metrics"].get(m)) for m in HEADLINE
             if _change(before["metrics"].get(m), other["metrics"].get(m)) is not None), None)
        for pid in other.get("applies") or []:
            made = next((p for p in before.get("proposals", []) if p["id"] == pid), None)
            metric = BOTTLENECK_METRICS.get(made.get("bottleneck")) if made else None
            impacts.append({"run": other["label"], "against": before["label"], "proposal": pid,
                            "estimated_app_pct": made["app_impact_pct"] if made else None,
                            "formula": (made.get("estimate") or {}).get("formula") if made else None,
                            "actual_app_pct": None if change is None else -change,
                            "metric": metric,
                            "estimated_saved_s": (made.get("estimate") or {}).get("saved_s") if made else None,
                            "measured_saved_s": _saved(before, other, metric),
                            "span_saved_s": _saved(before, other, "traced_span_s"),
                            "wall_saved_s": _saved(before, other, "wall_s")})
    judgements = [{"same_work": judge.same_work(base, o).to_dict(), "same_output": judge.same_output(base, o).to_dict()}
                  for o in analyses[1:]]
    unsteady = [v.reason for v in (judge.repeats_agree_on_work(a) for a in analyses) if v.same is False]
    sampled = [f"{a['label']}: {(a.get('sampling') or {})['text']}" for a in analyses
               if (a.get("sampling") or {}).get("text")]
    return Comparison([a["label"] for a in analyses], [len(a["repeats"]) for a in analyses], rows, verdicts, impacts,
                      judgements, unsteady, sampled)


def _saved(before: dict, after: dict, metric: str | None) -> float | None:
    """Seconds of ``metric`` the later run saved (negative: it took longer)."""
    a, b = (before["metrics"].get(metric), after["metrics"].get(metric)) if metric else (None, None)
    return None if a is None or b is None else round(a - b, 6)


def _cannot_judge(base: dict, other: dict) -> str | None:
    """Why no verdict may be given, or None. A run that failed, or that has no trace events
    while the baseline has some, did not do the same work: its shorter wall time is no
    improvement. (Two runs without events, an un-annotated baseline and variant, compare on
    wall time.)"""
    failed = [r["exit_code"] for r in other.get("repeats", []) if r.get("exit_code") not in (0, None)]
    if failed:
        return f"{other['label']} failed (exit code {failed[0]}): its times are not those of the same work"
    if not other.get("events") and base.get("events"):
        return (f"{other['label']} has no trace events and {base['label']} has: it did not run the traced "
                "work (see its analysis), so its wall time says nothing about the change")
    unsteady = [v.reason for v in (judge.repeats_agree_on_work(r) for r in (base, other)) if v.same is False]
    if unsteady:
        return unsteady[0]
    work = judge.same_work(base, other)
    if work.same is False:
        return work.reason
    output = judge.same_output(base, other)
    if output.same is False:
        return f"the runs computed different results ({output.reason.removeprefix('the outputs differ: ')})"
    return None


#: what tracing may cost a run, against its untraced baseline (docs/performance.md)
OVERHEAD_GOAL_PCT = 3.0


def _repeats_sentence(base: dict, other: dict) -> str:
    n_a, n_b = len(base["repeats"]), len(other["repeats"])
    if min(n_a, n_b) < 2:
        return (f"Repeats: {n_a} vs {n_b}; one run per side cannot separate noise from change "
                "(dftpass trace --repeat N).")
    return f"Repeats: {n_a} vs {n_b}; changes smaller than the spread between repeats are marked as within noise."


def _verdict(base: dict, other: dict, rows: list[Row], i: int) -> str:
    improved = [r.metric for r in rows if r.cells[i].cls == IMPROVED and not r.cells[i].within_noise]
    regressed = [r.metric for r in rows if r.cells[i].cls == REGRESSED and not r.cells[i].within_noise]
    headline = next((r for r in rows if r.metric in HEADLINE and r.cells[i].change_pct is not None), None)
    parts = [f"{other['label']} vs {base['label']}:"]
    refused = _cannot_judge(base, other)
    if base.get("baseline") and not other.get("baseline") and other.get("events"):
        # against the untraced reference, the difference is what tracing costs, not a change
        if refused:
            overall = f"cannot judge the cost of tracing ({refused})"
        elif headline is None:
            overall = "the cost of tracing cannot be measured (no wall time)"
        else:
            cell = headline.cells[i]
            overall = (f"the cost of tracing: {headline.metric} {cell.change_pct:+.1f}% against the untraced "
                       f"baseline" + (", within the noise" if cell.within_noise else "")
                       + f" (goal: at most +{OVERHEAD_GOAL_PCT:.0f}%, docs/performance.md)")
        return " ".join([*parts, overall + ".", _repeats_sentence(base, other)])
    if refused:
        overall = f"cannot judge ({refused})"
        improved = regressed = []
    elif headline is None:
        overall = "neutral (no wall time to compare)"
    elif headline.cells[i].within_noise:
        overall = f"neutral ({headline.metric} changed {headline.cells[i].change_pct:+.1f}%, within the noise)"
    elif headline.cells[i].cls == IMPROVED:
        overall = f"net improvement ({headline.metric} {headline.cells[i].change_pct:+.1f}%)"
    elif headline.cells[i].cls == REGRESSED:
        overall = f"net regression ({headline.metric} {headline.cells[i].change_pct:+.1f}%)"
    else:
        overall = f"neutral ({headline.metric} {headline.cells[i].change_pct:+.1f}%, within ±{THRESHOLD_PCT:.0f}%)"
    parts.append(overall + ".")
    if other.get("applies"):
        parts.append(f"Applied: {', '.join(other['applies'])}.")
    parts.append(f"Improved: {', '.join(improved) or 'nothing'}.")
    parts.append(f"Regressed: {', '.join(regressed) or 'nothing'}.")
    parts.append(_repeats_sentence(base, other))
    if regressed:
        parts.append(f"Look next at: {regressed[0]}.")
    return " ".join(parts)
