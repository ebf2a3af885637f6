"""`dftpass trace`: the canonical layout, run.json, repeats, failures, compaction."""

from __future__ import annotations

import gzip
import json

import pytest

from tests.analysis.helpers import PY, write_trace_like
from dftpass.runs.compact import compact_dir
from dftpass.traces import summarize
from dftpass.traces.files import role_of


@pytest.fixture(scope="module")
def traced(tiny_program, tmp_path_factory):
    """One run of the tiny program, two repeats, made by the real CLI in a subprocess-free way."""
    from dftpass.cli import main

    ws = tmp_path_factory.mktemp("ws")
    code = main(["trace", "--label", "base", "--workspace", str(ws), "--cwd", str(tiny_program), "--repeat", "2",
                 "--", PY, "tiny.py"])
    assert code == 0
    return ws / "base"


def test_layout_and_run_record(traced):
    record = json.loads((traced / "run.json").read_text())
    assert record["label"] == "base" and record["dftracer"] and len(record["repeats"]) == 2
    rep = record["repeats"][0]
    assert rep["exit_code"] == 0 and rep["wall_s"] > 0 and rep["command"][-1] == "tiny.py"
    assert rep["environment"]["DFTRACER_ENABLE"] == "1" and rep["environment"]["DFTRACER_INC_METADATA"] == "1"
    assert rep["environment"]["DFTRACER_LOG_FILE"] == str(traced / "traces" / "raw" / "rep-1" / "trace")
    raw = sorted(p.name for p in (traced / "traces" / "raw" / "rep-1").glob("*.pfw.gz"))
    assert [f["name"] for f in rep["trace_files"]] == raw
    assert sum(role_of(n) == "app" for n in raw) == 1 and sum(role_of(n) == "fork" for n in raw) >= 2
    assert rep["empty_trace_files"] == []
    compact = sorted(p.name for p in (traced / "traces" / "compact" / "rep-1").iterdir())
    assert compact == [f["name"] for f in rep["compact_files"]] == raw  # one chunk per small file
    assert (traced / "traces" / "raw" / "rep-2").is_dir()


def test_compacted_traces_hold_the_same_events(traced):
    raw = summarize([traced / "traces" / "raw" / "rep-1"])
    compact = summarize([traced / "traces" / "compact" / "rep-1"])
    assert {k: (s.count, s.dur_ns) for k, s in raw.by_key.items()} == \
        {k: (s.count, s.dur_ns) for k, s in compact.by_key.items()}
    assert raw.by_key[("compute", "forward")].count == 8  # 2 epochs x 4 batches


def test_append_adds_repeats_and_a_new_run_replaces(traced, tiny_program, cli):
    ws = traced.parent
    assert cli("trace", "--label", "base", "--workspace", ws, "--cwd", tiny_program, "--append", "--",
               PY, "tiny.py").code == 0
    assert [r["repeat"] for r in json.loads((traced / "run.json").read_text())["repeats"]] == [1, 2, 3]
    assert cli("trace", "--label", "base", "--workspace", ws, "--cwd", tiny_program, "--", PY, "tiny.py").code == 0
    assert [r["repeat"] for r in json.loads((traced / "run.json").read_text())["repeats"]] == [1]
    assert not (traced / "traces" / "raw" / "rep-2").exists()


def test_a_failing_command_is_recorded_and_its_exit_code_passed_through(tmp_path, cli):
    r = cli("trace", "--label", "crash", "--workspace", tmp_path, "--", PY, "-c", "import sys; sys.exit(3)")
    assert r.code == 3 and "exit code 3" in r.err
    rep = json.loads((tmp_path / "crash" / "run.json").read_text())["repeats"][0]
    assert rep["exit_code"] == 3


def test_a_command_that_cannot_start_is_recorded(tmp_path, cli):
    r = cli("trace", "--label", "nope", "--workspace", tmp_path, "--", "/no/such/program")
    assert r.code == 1 and "cannot run" in r.err
    rep = json.loads((tmp_path / "nope" / "run.json").read_text())["repeats"][0]
    assert rep["exit_code"] == 127 and "/no/such/program" in rep["launch_error"]


def test_a_stale_log_file_variable_does_not_send_traces_elsewhere(tmp_path, cli, monkeypatch):
    monkeypatch.setenv("DFTRACER_LOG_FILE", str(tmp_path / "elsewhere" / "trace"))
    cli("trace", "--label", "env", "--workspace", tmp_path, "--", PY, "-c",
        "import os; print(os.environ['DFTRACER_LOG_FILE'])")
    rep = json.loads((tmp_path / "env" / "run.json").read_text())["repeats"][0]
    assert rep["environment"]["DFTRACER_LOG_FILE"].startswith(str(tmp_path / "env" / "traces" / "raw"))


def test_bad_label_and_missing_command_are_usage_errors(tmp_path, cli):
    assert cli("trace", "--label", "../up", "--workspace", tmp_path, "--", PY, "-V").code == 2
    assert cli("trace", "--label", "x", "--workspace", tmp_path).code == 2


def test_compaction_bounds_chunks_and_repeats_the_header(tmp_path):
    raw = tmp_path / "raw"
    path = write_trace_like(raw / "trace-0123456789abcdef-app.pfw", n_events=30000)
    chunks, problems = compact_dir(raw, tmp_path / "compact", chunk_mb=1)
    assert problems == [] and len(chunks) >= 3
    assert [role_of(c) for c in chunks] == ["app"] * len(chunks)
    total = 0
    for k, chunk in enumerate(chunks):
        text = gzip.decompress(chunk.read_bytes())
        assert len(text) <= (1 << 20) + 1024
        lines = text.splitlines()
        assert b'"time_metric"' in lines[1]  # every chunk can be read on its own
        total += sum(b'"ph":1' in line for line in lines)
    assert total == 30000
    assert summarize(chunks).by_key[("compute", "forward")].count == \
        summarize([path]).by_key[("compute", "forward")].count


def test_compaction_keeps_what_a_truncated_file_holds_and_reports_it(tmp_path):
    raw = tmp_path / "raw"
    full = write_trace_like(raw / "trace-0123456789abcdef-app.pfw.gz", n_events=2000)
    data = full.read_bytes()
    full.write_bytes(data[: len(data) // 2])
    (raw / "trace-fedcba9876543210-fork.pfw.gz").write_bytes(b"")
    chunks, problems = compact_dir(raw, tmp_path / "compact")
    kinds = sorted(p.kind for p in problems)
    assert "truncated" in kinds and "empty" in kinds
    assert len(chunks) == 1 and 0 < summarize(chunks).by_key[("compute", "forward")].count < 2000


def test_the_original_program_is_recorded_as_the_baseline_not_warned_about(tmp_path, cli):
    """The README's workflow traces the original program for a reference: that is a baseline
    (wall time, outputs, resource use), with no warning, and analyze reads it without error;
    a run that should have traced and did not is still warned about."""
    plain = tmp_path / "plain.py"
    plain.write_text("print('training, untraced')\n")
    r = cli("trace", "--label", "plain", "--workspace", tmp_path / "ws", "--", PY, plain)
    assert r.code == 0, r.err
    assert "0 trace files" in r.err and "no trace files" not in r.err and "plain: a baseline" in r.err
    record = json.loads((tmp_path / "ws" / "plain" / "run.json").read_text())
    rep = record["repeats"][0]
    assert record["baseline"] is True and not rep.get("problems")
    assert rep["resources"]["cpu_user_s"] >= 0 and rep["resources"]["max_rss_mb"] > 0
    shown = cli("analyze", tmp_path / "ws" / "plain")
    assert shown.code == 0, shown.out + shown.err
    assert "run plain: a baseline (no tracing)" in shown.out and "peak memory" in shown.out
    other = cli("trace", "--label", "other", "--workspace", tmp_path / "ws", "--", PY, "-c", "pass")
    assert "warning: no trace files: no process initialized dftracer" in other.err
    assert json.loads((tmp_path / "ws" / "other" / "run.json").read_text())["baseline"] is False


def test_trace_baseline_runs_the_program_with_tracing_off(tmp_path, cli, tiny_program):
    r = cli("trace", "--baseline", "--label", "ref", "--workspace", tmp_path, "--cwd", tiny_program, "--",
            PY, "tiny.py")
    assert r.code == 0, r.err
    record = json.loads((tmp_path / "ref" / "run.json").read_text())
    rep = record["repeats"][0]
    assert record["baseline"] is True and rep["trace_files"] == []
    assert "DFTRACER_ENABLE" not in rep["environment"]


def test_compare_against_the_baseline_reports_the_cost_of_tracing(tmp_path, cli, tiny_program):
    """Against the untraced baseline, the difference is what tracing costs: compare says so
    (with the goal), not "improved" or "regressed" on metrics the baseline cannot have."""
    for how, label in (("--baseline", "ref"), (None, "traced")):
        r = cli("trace", *([how] if how else []), "--label", label, "--workspace", tmp_path, "--cwd", tiny_program,
                "--", PY, "tiny.py")
        assert r.code == 0, r.err
    shown = cli("compare", tmp_path / "ref", tmp_path / "traced")
    assert shown.code == 0, shown.err
    assert "traced vs ref: the cost of tracing: wall_s " in shown.out and "against the untraced baseline" in shown.out
    assert "net regression" not in shown.out and "net improvement" not in shown.out


def test_view_writes_the_run_as_one_chrome_trace_for_perfetto(traced, tmp_path, cli, monkeypatch):
    """``dftpass view``: every event of a repeat as trace-event JSON (``X``/``C`` with times
    in microseconds), each process named by its role, training processes first; a bare folder
    of traces is only read (the file goes to the current folder)."""
    from dftpass.traces import analyze

    r = cli("view", traced, "--repeat", "1")  # (an earlier test may have replaced the run by one repeat)
    assert r.code == 0, r.err
    assert "ui.perfetto.dev" in r.out
    data = json.loads((traced / "trace-rep-1.json").read_text())
    events = [e for e in data["traceEvents"] if e["ph"] != "M"]
    assert {e["ph"] for e in events} <= {"X", "C"} and all(e["dur"] >= 0 for e in events if e["ph"] == "X")
    assert len(events) == analyze([traced / "traces" / "compact" / "rep-1"]).summary.events
    names = [e["args"]["name"] for e in data["traceEvents"] if e["name"] == "process_name"]
    assert names[0].startswith("training process") and any(n.startswith("DataLoader worker") for n in names)
    assert any(e["cat"] == "pipeline" and e["name"].startswith("epoch") for e in events)  # the phases' bars
    monkeypatch.chdir(tmp_path)
    bare = cli("view", traced / "traces" / "compact" / "rep-1")
    assert bare.code == 0, bare.err
    assert (tmp_path / "rep-1-trace.json").is_file()
    assert cli("view", traced, "--repeat", "9").code == 2


def test_one_output_convention_on_analyze_and_compare(traced, tmp_path, cli):
    """``--format text|json|markdown|sarif`` where each makes sense, ``--output FILE``,
    ``--exit-zero``; the older ``--json``/``--markdown`` still work; a bad format is the
    command's own usage error."""
    r = cli("analyze", traced, "--format", "sarif", "--output", tmp_path / "a.sarif")
    assert r.code == 0, r.err
    sarif = json.loads((tmp_path / "a.sarif").read_text())
    as_json = json.loads(cli("analyze", traced, "--json").out)
    assert len(sarif["runs"][0]["results"]) == len(as_json["findings"])
    assert cli("analyze", traced, "--format", "markdown").out.startswith("## Run `base`")
    assert cli("analyze", traced, "--markdown").out.startswith("## Run `base`")
    import subprocess
    import sys

    bad = subprocess.run([sys.executable, "-m", "dftpass", "analyze", str(traced), "--format", "xml"],
                         capture_output=True, text=True)
    assert bad.returncode == 2 and "usage: dftpass analyze" in bad.stderr and "invalid choice: 'xml'" in bad.stderr
    shown = cli("compare", traced, traced, "--format", "markdown", "--output", tmp_path / "c.md")
    assert shown.code == 0 and (tmp_path / "c.md").read_text().startswith("| metric |")
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli("analyze", empty).code == 2  # no events: nothing was analysed
    crash = cli("trace", "--label", "crash", "--workspace", tmp_path / "ws", "--", PY, "-c", "import sys; sys.exit(3)")
    assert crash.code == 3


def test_the_summary_says_the_diagnosis_once(traced, cli):
    """The bottleneck, its causes and the overlap are shown once; ML-R24's findings, which
    restate them, stay in JSON/SARIF and are not printed a second and third time."""
    out = cli("analyze", traced).out
    assert out.count("bottleneck: ") == 1
    assert "warning: ML-R24" not in out
    assert any(f["rule"] == "ML-R24" for f in json.loads(cli("analyze", traced, "--format", "json").out)["findings"])
