"""``lessons.md``: the pitfalls each run revealed, accumulated in the workspace, one dated entry each.

Entries come from a run's findings (missing categories, no overlap and its causes, a
double initialization) and its trace problems (empty worker traces, truncated files). An
entry already in the file (same run and same finding) is not added again, so analysing a
run twice does not repeat its lessons.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from pathlib import Path

from dftpass.core.writer import atomic_write

HEADER = ("# Lessons\n\nPitfalls the runs of this workspace revealed, one dated entry each "
          "(written by `dftpass analyze` and `dftpass report`).\n")
_KEY = re.compile(r"<!-- lesson ([0-9a-f]{12}) -->")


def _key(label: str, text: str) -> str:
    return hashlib.sha256(f"{label}\n{text}".encode()).hexdigest()[:12]


def pitfalls(analysis: dict) -> list[tuple[str, str, str]]:
    """(identity, title, detail) of each pitfall of one analysed run. The identity leaves out
    the numbers, so the same pitfall measured again is the same lesson."""
    out = []
    for f in analysis["findings"]:
        if f["severity"] == "info":
            continue
        where = f"{f['path']}:{f['line']}" if f["line"] else f["path"]
        kind = f["message"].split(":")[0]
        same = re.sub(r"\d+", "N", kind)  # "12 'read' events carry no image_size" is the same lesson with 15
        out.append((f"{f['rule']} {where} {same}", f"{f['rule']}: {kind}", f"{where}: {f['message']}"))
    for p in analysis["problems"]:
        out.append((re.sub(r"\d+", "N", p), "trace problem", p))
    return out


def _append(workspace: Path, entries: list[tuple[str, str, str]], today: dt.date | None) -> int:
    """Append the ``(key, heading, body)`` entries whose key is not in ``lessons.md`` yet,
    dated, in one atomic write; returns how many were new."""
    path = Path(workspace) / "lessons.md"
    text = path.read_text(encoding="utf-8") if path.is_file() else HEADER
    known = set(_KEY.findall(text))
    day = (today or dt.date.today()).isoformat()
    added = []
    for key, heading, body in entries:
        if key in known:
            continue
        known.add(key)
        added.append(f"\n## {day} {heading}\n<!-- lesson {key} -->\n\n{body}\n")
    if added:
        atomic_write(path, (text.rstrip("\n") + "\n" + "".join(added)).encode("utf-8"), Path(workspace))
    return len(added)


def record(workspace: Path, analysis: dict, today: dt.date | None = None) -> int:
    """Append the run's new pitfalls to ``<workspace>/lessons.md``; returns how many were new."""
    label = analysis["label"]
    return _append(workspace, [(_key(label, identity), f"`{label}`: {title}", detail)
                               for identity, title, detail in pitfalls(analysis)], today)


def _seconds(imp: dict) -> str:
    if imp.get("metric") and imp.get("measured_saved_s") is not None and imp.get("estimated_saved_s") is not None:
        return (f"; {imp['metric']} lost {imp['measured_saved_s']:.3g} s against {imp['estimated_saved_s']:.3g} s "
                "estimated")
    return ""


def record_impacts(workspace: Path, impacts: list[dict], today: dt.date | None = None) -> int:
    """Append each applied proposal's estimate and measured impact (from ``compare``) to
    ``<workspace>/lessons.md``, once per (run, baseline, proposal); returns how many were new.
    The record is what later estimates are checked against: a formula that keeps promising
    more than runs deliver shows here first."""
    entries = []
    for imp in impacts:
        if imp.get("actual_app_pct") is None:
            continue
        estimate = imp.get("estimated_app_pct")
        est = "no estimate" if estimate is None else f"estimated {estimate:.1f}% of the wall time"
        formula = f" ({imp['formula']})" if imp.get("formula") else ""
        entries.append((_key(imp["run"], f"impact {imp['against']} {imp['proposal']}"),
                        f"`{imp['run']}`: {imp['proposal']} applied, {est}, measured {imp['actual_app_pct']:.1f}%",
                        f"Against `{imp['against']}`: {est}{formula}; the wall time changed by "
                        f"{-imp['actual_app_pct']:+.1f}%{_seconds(imp)}."))
    return _append(workspace, entries, today)
