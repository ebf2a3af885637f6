"""``dftpass report``: report.md and a self-contained report.html over two real runs of a tiny
program traced by the real ``dftpass trace``; and the pieces: ``html.to_html`` (Markdown to
HTML) and ``timeline.intervals`` (the picture's merged intervals)."""

from __future__ import annotations

import base64
import json
import re
import struct
import subprocess
import sys

import pytest

from dftpass.analysis import timeline
from dftpass.analysis.html import to_html
from dftpass.traces import COMPUTE, LOADING
from dftpass.traces.files import role_of
from tests.analysis.helpers import PY, event, write_trace

PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == PNG_MAGIC and data[12:16] == b"IHDR"
    return struct.unpack(">II", data[16:24])


@pytest.fixture(scope="module")
def workspace(report_workspace):
    return report_workspace


def analysis_of(ws, label: str) -> dict:
    return json.loads((ws / label / "analysis.json").read_text())


def test_report_markdown_has_every_section(workspace):
    ws, err = workspace
    md = (ws / "report.md").read_text()
    assert f"wrote {ws / 'report.md'} and {ws / 'report.html'}" in err
    lines = md.splitlines()
    assert lines[0] == f"# dftpass report: {ws.name}"
    assert "| run | repeats | wall s (median) | spread s | tables show | command | revision |" in lines
    rows = [ln for ln in lines
            if re.match(r"^\| (baseline|opt1) \| 1 \| \d+\.\d\d \| - \| repeat 1 \| `.*tiny\.py \d` \|", ln)]
    assert [r.split(" | ")[0] for r in rows] == ["| baseline", "| opt1"], md  # the baseline first
    for label in ("baseline", "opt1"):
        wall = analysis_of(ws, label)["metrics"]["wall_s"]
        assert any(r.startswith(f"| {label} | 1 | {wall:.2f} |") for r in rows)

    comparison = md[md.index("\n## Comparison\n"):md.index("\n## Run `baseline`\n")]
    assert "| metric | baseline | opt1 |" in comparison and "| wall_s |" in comparison
    assert "proposal `IO-L1-num-workers` in `opt1`" in comparison
    assert md.index("## Run `baseline`") < md.index("## Run `opt1`")
    assert md.count("### Proposals") == 2 and md.count("### Checklist") == 2
    assert "| component | dimension | verdict |" in md
    for label in ("baseline", "opt1"):
        overlap = analysis_of(ws, label)["overlap"]
        section = md[md.index(f"## Run `{label}`"):]
        assert f"overlap of loading and compute (whole run): {overlap['verdict']}" in section
        assert f"![timeline of {label}]({label}/timeline.png)" in section
        assert f"![step time, wait for data per step and throughput of {label}]({label}/steps.png)" in section
        # the pictures come first, under the headline figures, before the tables
        assert section.index(f"({label}/steps.png)") < section.index("### Time by category")
        assert section.index(f"({label}/timeline.png)") < section.index(f"({label}/steps.png)")
    assert "![timelines of baseline and opt1 side by side](compare-timelines.png)" in comparison
    assert "Lessons of this workspace: `lessons.md`." in md


def test_timeline_pictures_are_pngs_one_row_per_process(workspace):
    ws, _ = workspace
    forks = {}
    for label in ("baseline", "opt1"):
        png = (ws / label / "timeline.png").read_bytes()
        width, height = png_size(png)
        files = json.loads((ws / label / "run.json").read_text())["repeats"][0]["trace_files"]
        forks[label] = sum(role_of(f["name"]) == "fork" for f in files)
        phases: dict = {}
        rows = len(timeline.intervals([ws / label / "traces" / "compact" / "rep-1"], phases))
        assert rows == 1 + forks[label], files  # the trainer and every worker that loaded
        assert list(phases) == ["waits for data"]  # no phase regions in the tiny program: the loop's waits
        panel = 0.3 * len(phases) + 0.4  # the per-phase panel above the per-process one
        assert width == 11 * 110 and abs(height - (max(2.0, 0.35 * rows + 1.2) + panel) * 110) <= 1
    assert forks["opt1"] > forks["baseline"] >= 2  # 3 workers per epoch against 2


def test_html_is_self_contained(workspace):
    ws, _ = workspace
    page = (ws / "report.html").read_text()
    assert page.startswith("<!DOCTYPE html>") and f"<title>dftpass report: {ws.name}</title>" in page
    links = re.findall(r"""\b(src|href)\s*=\s*["']([^"']*)""", page, re.IGNORECASE)
    pictures = [link for link in links if link[0].lower() == "src"]
    # the runs side by side, then per run its timeline and its step plots; the rest are links inside the page
    assert len(pictures) == 5, links
    assert all(target.startswith("#run-") for kind, target in links if kind.lower() == "href"), links
    files = ["compare-timelines.png"] + [f"{label}/{name}" for label in ("baseline", "opt1")
                                         for name in ("timeline.png", "steps.png")]
    for name, (_, src) in zip(files, pictures):
        assert src.startswith("data:image/png;base64,")
        assert base64.b64decode(src.split(",", 1)[1]) == (ws / name).read_bytes(), name
    for outside in ("<script", "<link", "@import", "url(", "http://", "https://"):
        assert outside not in page.lower()
    md_tables = re.findall(r"^\|[-:|]+\|$", (ws / "report.md").read_text(), re.MULTILINE)
    assert page.count("<table>") == len(md_tables) >= 1 + 1 + 2 * 3  # runs, comparison, per run: >= 3 each
    assert "<h2>Comparison</h2>" in page and '<h2 id="run-baseline">Run <code>baseline</code></h2>' in page
    right = '<td style="text-align:right">'
    assert re.search(rf'<td>baseline</td>\n{right}1</td>\n{right}\d+\.\d\d</td>', page)
    for label in ("baseline", "opt1"):
        assert f"overlap of loading and compute (whole run): {analysis_of(ws, label)['overlap']['verdict']}" in page


def test_report_twice_is_stable(workspace, cli):
    """The second report reads the saved analyses: the same document (but its date), no new lessons."""
    ws, err = workspace
    assert re.search(r"; \d+ new lessons in lessons.md", err)  # the first report found some
    lessons = (ws / "lessons.md").read_bytes()
    before = (ws / "report.md").read_text()
    res = cli("report", ws)
    assert res.code == 0 and "new lessons" not in res.err, res.err
    assert (ws / "lessons.md").read_bytes() == lessons
    after = (ws / "report.md").read_text()
    dated = re.compile(r"^Generated \S+ ", re.MULTILINE)
    assert dated.sub("Generated - ", after) == dated.sub("Generated - ", before)


def test_report_without_runs_is_a_usage_error(tmp_path, cli):
    res = cli("report", tmp_path)
    assert res.code == 2 and "no runs" in res.err and not (tmp_path / "report.md").exists()


def test_a_multi_line_command_keeps_its_table_row(tmp_path, cli):
    """A ``python -c`` script's newline used to end the runs table's row; the next run's row then
    started no table and to_html looped forever (a subprocess with a timeout, so a hang fails)."""
    ws = tmp_path / "ws"
    for label, script in (("baseline", "x = 1\nprint(x)"), ("opt1", "print(2)")):
        assert cli("trace", "--label", label, "--workspace", ws, "--cwd", tmp_path, "--", PY, "-c", script).code == 0
    done = subprocess.run([PY, "-m", "dftpass.cli", "report", str(ws)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    md = (ws / "report.md").read_text()
    assert re.search(r"^\| baseline \| 1 \| [\d.]+ \| - \| repeat 1 \| `\S+ -c x = 1 print\(x\)` \| .* \|$", md, re.MULTILINE), md
    page = (ws / "report.html").read_text()
    assert '<td>baseline</td>' in page and '<td>opt1</td>' in page


# -- html.to_html (markdown-it-py into the jinja2 template) ----------------------------------

def body(markdown: str) -> str:
    page = to_html(markdown, "t")
    return page[page.index("<body>\n") + 7:page.index("\n</body>")].strip()


def test_headings_paragraphs_and_lists():
    out = body("# Top\n\n## Second **bold**\n\nsome text\nwrapped on\n\n- one\n- two `code`\n\n#### Four")
    assert "<h1>Top</h1>" in out and "<h2>Second <strong>bold</strong></h2>" in out
    assert "<p>some text\nwrapped on</p>" in out and "<h4>Four</h4>" in out
    assert "<li>one</li>" in out and "<li>two <code>code</code></li>" in out


def test_pipe_table_right_aligns_numeric_columns():
    md = "| name | count |\n|---|---:|\n| `a/b` | 3 |\n| **c** | 10 |"
    out = body(md)
    assert '<th style="text-align:right">count</th>' in out
    assert '<td><code>a/b</code></td>\n<td style="text-align:right">3</td>' in out
    assert '<td><strong>c</strong></td>\n<td style="text-align:right">10</td>' in out


def test_text_is_escaped_and_images_are_data_uris():
    png = "data:image/png;base64,iVBORw0KGgo="
    out = body(f"a < b & `x<y>` and 1 > 0\n\n![timeline of run]({png})")
    assert "<p>a &lt; b &amp; <code>x&lt;y&gt;</code> and 1 &gt; 0</p>" in out
    assert f'<img src="{png}" alt="timeline of run" />' in out
    assert "<script>" not in body("<script>alert(1)</script>")
    assert body("<script>alert(1)</script>") == "<p>&lt;script&gt;alert(1)&lt;/script&gt;</p>"


def test_page_is_one_document_with_its_title_escaped_and_runs_listed():
    page = to_html("## Run `base<1>`\n\ntext", "report <ws>")
    assert page.startswith("<!DOCTYPE html>") and "<title>report &lt;ws&gt;</title>" in page
    assert page.rstrip().endswith("</html>") and "<style>" in page and "<script" not in page
    assert '<a href="#run-base-lt-1-gt-">base&lt;1&gt;</a>' in page and 'id="run-base-lt-1-gt-"' in page


def test_a_pipe_line_that_starts_no_table_is_a_paragraph():
    code = "import sys; from dftpass.analysis.html import to_html; sys.stdout.write(to_html(sys.stdin.read(), 't'))"
    done = subprocess.run([sys.executable, "-c", code], input="| a | b\nnot a separator\n\n| last line",
                          capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    page = done.stdout
    assert "<p>| a | b\nnot a separator</p>" in page and "<p>| last line</p>" in page


# -- timeline.intervals ---------------------------------------------------------------------

T0 = 1_795_000_000_000_000  # us


def at(ms: float) -> int:
    return T0 + round(ms * 1000)


def test_intervals_merge_per_process_and_class(tmp_path):
    """The class events of two processes over 1 s: gaps up to span/2000 = 0.5 ms are closed,
    per process and class; events of neither class do not count (not even for the span)."""
    ms = 1000
    write_trace(tmp_path / "trace-00000000000000aa-app.pfw.gz", pid=100, events=[
        event("compute", "forward", at(0), 10 * ms, step=1),
        event("compute", "backward", at(2), 2 * ms, step=1),       # nested: no new interval
        event("compute", "forward", at(10.2), 9800, step=2),   # 0.2 ms gap: merged
        event("compute", "forward", at(30), 10 * ms, step=3),      # 10 ms gap: a new interval
        event("compute", "forward", at(60), 1 * ms, step=4),
        event("compute", "forward", at(61.8), 200, step=5),   # 0.8 ms gap: kept apart
        event("data", "item", at(50), 1 * ms, image_idx=1),        # the same process, the other class
        event("pipeline", "epoch", at(0), 2000 * ms, epoch=1),     # neither class: ignored
        event("dataloader", "fetch.iter", at(70), 3000 * ms),      # the loop waiting: neither class
    ])
    write_trace(tmp_path / "trace-00000000000000bb-fork.pfw.gz", pid=200, events=[
        event("data", "item", at(0), 5 * ms, image_idx=2),
        event("data", "item", at(5.1), 2900, image_idx=3),
        event("POSIX", "read", at(900), 100 * ms, ret=4096),
        event("POSIX", "write", at(1500), 100 * ms, ret=4096),    # not loading
    ])
    got = timeline.intervals([tmp_path])

    def ms_of(key, cls):  # back to ms after the first event (10 us precision: floats of epoch seconds)
        return [(round((a - T0 / 1e6) * 1e3, 2), round((b - T0 / 1e6) * 1e3, 2)) for a, b in got[key][cls]]

    assert set(got) == {("node1", 100), ("node1", 200)}
    assert set(got["node1", 100]) == {COMPUTE, LOADING} and set(got["node1", 200]) == {LOADING}
    assert ms_of(("node1", 100), COMPUTE) == [(0, 20), (30, 40), (60, 61), (61.8, 62)]
    assert ms_of(("node1", 100), LOADING) == [(50, 51)]
    assert ms_of(("node1", 200), LOADING) == [(0, 8), (900, 1000)]


def test_no_class_events_draw_no_picture(tmp_path):
    write_trace(tmp_path / "t.pfw.gz", [event("pipeline", "epoch", at(0), 1000, epoch=1)])
    assert timeline.intervals([tmp_path]) == {} and timeline.plot_png([tmp_path], "t") is None


def test_picture_of_hand_made_traces(tmp_path):
    pytest.importorskip("matplotlib", reason="the timeline picture needs matplotlib")
    write_trace(tmp_path / "a.pfw.gz", [event("compute", "forward", at(0), 5000, step=1)], pid=1)
    write_trace(tmp_path / "b.pfw.gz", [event("data", "item", at(1), 2000, image_idx=0)], pid=2)
    write_trace(tmp_path / "c.pfw.gz", [event("data", "item", at(2), 2000, image_idx=1)], pid=3)
    png = timeline.plot_png([tmp_path], "three processes")
    width, height = png_size(png)
    assert width == 1210 and abs(height - max(2.0, 0.35 * 3 + 1.2) * 110) <= 1


def test_a_pipe_inside_a_cell_stays_in_its_cell():
    from dftpass.analysis.render import cell

    page = to_html(f"| command | n |\n|---|---:|\n| {cell('python -c a|b')} | 3 |\n", "t")
    assert '<td>python -c a|b</td>\n<td style="text-align:right">3</td>' in page


def test_table_cells_keep_their_text_when_rendered():
    """A Markdown cell is escaped outside code: ``Dataset.__getitem__`` is not a bold "getitem",
    ``a * b`` no emphasis, a pipe no column; text in backticks stays code."""
    from dftpass.analysis.html import markdown_to_html
    from dftpass.analysis.render import cell

    text = "| event | note |\n|---|---|\n" + f"| {cell('data/Dataset.__getitem__')} | {cell('a * b | c `x_y`')} |\n"
    html = markdown_to_html(text)
    assert "Dataset.__getitem__" in html and "<strong>" not in html and "<em>" not in html
    assert "a * b | c" in html and "<code>x_y</code>" in html and html.count("<td>") == 2


def test_compare_markdown_marks_changes_with_words_not_emoji():
    from dftpass.analysis.render import compare_markdown

    cmp = {"labels": ["base", "new"], "threshold_pct": 5.0, "verdicts": ["new vs base: net improvement."],
           "rows": [{"metric": "wall_s", "unit": "s", "cells": [
               {"value": 2.0, "change_pct": None, "cls": "info"},
               {"value": 1.0, "change_pct": -50.0, "cls": "improved", "within_noise": False}]}],
           "proposal_impacts": []}
    text = compare_markdown(cmp)
    assert "-50.0% (better)" in text
    assert not any(ord(ch) > 0x2FFF for ch in text)  # no emoji (they need an emoji font)


def test_the_repeats_line_says_which_repeat_the_breakdown_is_of():
    """With an even number of repeats the median wall time lies between two repeats: the line
    says the shown one's own wall time, so the header and the breakdown below do not disagree
    silently."""
    from dftpass.analysis.render import repeats_line

    a = {"repeats": [{"repeat": 1, "wall_s": 4.0}, {"repeat": 2, "wall_s": 5.0}], "metrics": {"wall_s": 4.5},
         "shown_repeat": 1}
    assert repeats_line(a).endswith("show repeat 1 (wall 4.00 s, the lower of the two middle ones)")
    a = {"repeats": [{"repeat": k, "wall_s": w} for k, w in ((1, 4.0), (2, 5.0), (3, 6.0))],
         "metrics": {"wall_s": 5.0}, "shown_repeat": 2}
    assert repeats_line(a).endswith("show repeat 2 (the median one)")
