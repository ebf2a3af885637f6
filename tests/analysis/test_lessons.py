"""``lessons.md``: one dated entry per pitfall a run revealed, never the same one twice,
append-only (``dftpass.analysis.lessons``)."""

from __future__ import annotations

import datetime as dt
import json
import re
import shutil

from dftpass.analysis import lessons
from tests.analysis.helpers import PY

DAY1, DAY2 = dt.date(2026, 3, 1), dt.date(2026, 3, 9)


def finding(rule: str, message: str, path: str = "train.py", line: int | None = 12,
            severity: str = "warning") -> dict:
    return {"rule": rule, "severity": severity, "path": path, "line": line, "message": message}


def analysis(label: str = "baseline", findings=(), problems=()) -> dict:
    return {"label": label, "findings": list(findings), "problems": list(problems)}


def entries(text: str) -> list[str]:
    """The entries' heading lines, in file order."""
    return re.findall(r"^## .*$", text, re.MULTILINE)


FIRST = analysis(findings=[
    finding("ML-R24", "no overlap: loading overlaps 3.2% of compute (target 50%)", "baseline", None),
    finding("ML-R24", "A.num_workers: DataLoader(num_workers=0) loads in the training process", "train.py", 31),
    finding("ML-R15", "12 'read' events carry no image_size: pass the bytes moved (ML-R9)", "baseline", None),
    finding("ML-R15", "no 'comm' events in the trace: look at ML-R12", "baseline", None, severity="info"),
], problems=["trace-0a1b2c3d4e5f6a7b-fork.pfw.gz: truncated (x3): the gzip stream ends inside a member"])


def test_entries_are_dated_and_info_findings_are_skipped(tmp_path):
    assert lessons.record(tmp_path, FIRST, today=DAY1) == 4
    text = (tmp_path / "lessons.md").read_text()
    assert text.startswith(lessons.HEADER)
    assert entries(text) == [
        "## 2026-03-01 `baseline`: ML-R24: no overlap",
        "## 2026-03-01 `baseline`: ML-R24: A.num_workers",
        "## 2026-03-01 `baseline`: ML-R15: 12 'read' events carry no image_size",
        "## 2026-03-01 `baseline`: trace problem",
    ]
    assert "comm" not in text  # the info finding
    # each entry: heading, its key, a blank line, where and the whole message
    assert "\n<!-- lesson " in text and len(re.findall(r"<!-- lesson [0-9a-f]{12} -->", text)) == 4
    assert "\ntrain.py:31: A.num_workers: DataLoader(num_workers=0) loads in the training process\n" in text
    assert "\nbaseline: no overlap: loading overlaps 3.2% of compute (target 50%)\n" in text
    assert "\ntrace-0a1b2c3d4e5f6a7b-fork.pfw.gz: truncated (x3): the gzip stream ends inside a member\n" in text


def test_the_same_pitfall_measured_again_is_not_added(tmp_path):
    lessons.record(tmp_path, FIRST, today=DAY1)
    before = (tmp_path / "lessons.md").read_bytes()
    again = analysis(findings=[
        finding("ML-R24", "no overlap: loading overlaps 7.9% of compute (target 50%)", "baseline", None),
        finding("ML-R24", "A.num_workers: DataLoader(num_workers=0) loads in the training process", "train.py", 31),
        finding("ML-R15", "15 'read' events carry no image_size: pass the bytes moved (ML-R9)", "baseline", None),
    ], problems=["trace-0a1b2c3d4e5f6a7b-fork.pfw.gz: truncated (x5): the gzip stream ends inside a member"])
    assert lessons.record(tmp_path, again, today=DAY2) == 0
    assert (tmp_path / "lessons.md").read_bytes() == before


def test_a_new_pitfall_is_appended_and_earlier_entries_are_kept(tmp_path):
    lessons.record(tmp_path, FIRST, today=DAY1)
    before = (tmp_path / "lessons.md").read_text()
    later = analysis(findings=[
        finding("ML-R24", "no overlap: loading overlaps 3.2% of compute (target 50%)", "baseline", None),  # known
        finding("ML-R24", "A.num_workers: DataLoader(num_workers=0) loads in the training process", "train.py", 58),
        finding("ML-R24", "below target: loading overlaps 31.0% of compute (target 50%)", "baseline", None),
    ])
    assert lessons.record(tmp_path, later, today=DAY2) == 2
    text = (tmp_path / "lessons.md").read_text()
    assert text.startswith(before)  # append-only: header and earlier entries byte for byte
    assert entries(text)[4:] == ["## 2026-03-09 `baseline`: ML-R24: A.num_workers",  # another line of the source
                                 "## 2026-03-09 `baseline`: ML-R24: below target"]


def test_another_run_label_gets_its_own_entries(tmp_path):
    lessons.record(tmp_path, FIRST, today=DAY1)
    opt1 = dict(FIRST, label="opt1")
    assert lessons.record(tmp_path, opt1, today=DAY2) == 4
    assert lessons.record(tmp_path, opt1, today=DAY2) == 0
    heads = entries((tmp_path / "lessons.md").read_text())
    assert len(heads) == 8 and all("`opt1`" in h and "2026-03-09" in h for h in heads[4:])


def test_a_run_without_pitfalls_writes_no_file(tmp_path):
    clean = analysis(findings=[finding("ML-R24", "target met: loading overlaps 80.0% of compute", severity="info")])
    assert lessons.record(tmp_path, clean, today=DAY1) == 0
    assert not (tmp_path / "lessons.md").exists()


def test_an_existing_file_is_kept_as_written(tmp_path):
    mine = "# Our lessons\n\nWritten by hand; keep this.\n"
    (tmp_path / "lessons.md").write_text(mine)
    assert lessons.record(tmp_path, FIRST, today=DAY1) == 4
    text = (tmp_path / "lessons.md").read_text()
    assert text.startswith(mine) and len(entries(text)) == 4 and lessons.HEADER not in text


# -- through the CLI ------------------------------------------------------------------------

def test_analyze_of_a_run_writes_lessons_into_its_workspace(tiny_program, tmp_path, cli):
    ws = tmp_path / "ws"
    assert cli("trace", "--label", "baseline", "--workspace", ws, "--cwd", tiny_program, "--",
               PY, "tiny.py", "0").code == 0  # num_workers=0: nothing loads in a worker
    res = cli("analyze", ws / "baseline", "--json")
    assert res.code in (0, 1), res.err
    data = json.loads(res.out)
    assert data["overlap"]["verdict"] == "no overlap"  # the training process loads, serial with compute
    pitfalls = [f for f in data["findings"] if f["severity"] != "info"]
    assert pitfalls, data["findings"]
    text = (ws / "lessons.md").read_text()
    assert text.startswith(lessons.HEADER)
    today = dt.date.today().isoformat()
    heads = entries(text)
    assert len(heads) == len(pitfalls) + len(data["problems"])
    for f in pitfalls:
        assert f"## {today} `baseline`: {f['rule']}: {f['message'].split(':')[0]}" in heads
    assert any("num_workers" in h for h in heads), heads  # the cause, linked to the source line
    assert (ws / "baseline" / "analysis.json").is_file()

    before = (ws / "lessons.md").read_bytes()
    assert cli("analyze", ws / "baseline").code == res.code
    assert (ws / "lessons.md").read_bytes() == before  # analysed again: nothing new


def test_analyze_of_a_bare_trace_folder_writes_no_lessons(tmp_path, cli):
    """Only runs of ``dftpass trace`` have a workspace; a folder of traces is read, not written to."""
    from tests.traces.trace_data import REAL

    traces = tmp_path / "traces"
    shutil.copytree(REAL, traces)
    res = cli("analyze", traces)
    assert res.code in (0, 1), res.err
    assert "overlap of loading and compute" in res.out
    assert not list(tmp_path.rglob("lessons.md")) and not list(tmp_path.rglob("analysis.json"))
