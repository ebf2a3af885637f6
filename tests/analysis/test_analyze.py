"""`dftpass analyze`: categories (ML-R15), HIP (ML-R16), overlap and diagnosis (ML-R24), on real
and hand-made traces, through the real CLI."""

from __future__ import annotations

import json
import shutil

import pytest

from tests.analysis.helpers import PY, event, write_trace
from tests.conftest import APPS, FIXTURES, line_of

REAL = FIXTURES / "traces" / "real_workers"
T0 = 1_795_000_000_000_000


def analyze(cli, *args) -> dict:
    r = cli("analyze", *args, "--json")
    assert r.code in (0, 1), r.err
    return json.loads(r.out)


def test_real_traces_of_a_program_with_workers(cli):
    a = analyze(cli, REAL)
    cats = {c["cat"] for c in a["categories"]}
    assert {"compute", "data", "dataloader", "pipeline"} <= cats
    assert a["processes"]["roles"] == {"app": 1, "fork": 4}
    assert a["overlap"]["verdict"] != "cannot judge" and a["overlap"]["loading_workers"] > 0
    assert 0 <= a["overlap"]["overlap_fraction"] <= 1
    # the program that made these traces has no root region: the one gap ML-R15 names
    gaps = [f["message"] for f in a["findings"] if f["rule"] == "ML-R15"]
    assert len(gaps) == 1 and "no 'ai_root' events" in gaps[0] and "ML-R1" in gaps[0]


def test_missing_categories_name_the_rule_that_should_have_produced_them(cli, tmp_path):
    write_trace(tmp_path / "t" / "trace-0123456789abcdef-app.pfw.gz",
                [event("compute", "forward", T0 + 1000 * i, 500) for i in range(5)])
    a = analyze(cli, tmp_path / "t")
    msgs = [f["message"] for f in a["findings"] if f["rule"] == "ML-R15"]
    for cat, rule in [("data", "ML-R9"), ("dataloader", "ML-R6"), ("pipeline", "ML-R2/ML-R3"),
                      ("ai_root", "ML-R1")]:
        assert any(f"no '{cat}' events" in m and rule in m for m in msgs), (cat, msgs)
    assert not any("'compute'" in m for m in msgs)


def test_io_events_without_image_size_are_reported(cli, tmp_path):
    write_trace(tmp_path / "t" / "trace-0123456789abcdef-app.pfw.gz", [
        event("data", "data.io.read", T0, 100),
        event("data", "data.io.read", T0 + 200, 100),
        event("checkpoint", "checkpoint.io.write", T0 + 400, 100, image_size=4096),
        # an open moves no bytes: it has no size to carry
        event("data", "data.io.open", T0 + 600, 100),
    ])
    msgs = [f["message"] for f in analyze(cli, tmp_path / "t")["findings"] if f["rule"] == "ML-R15"]
    assert any("2 'data.io.read' events carry no image_size" in m and "ML-R25" in m for m in msgs)
    assert not any("checkpoint.io.write" in m or "data.io.open" in m for m in msgs)


def test_hip_events_are_required_only_for_projects_that_run_hip(cli, tmp_path):
    write_trace(tmp_path / "t" / "trace-0123456789abcdef-app.pfw.gz", [event("compute", "forward", T0, 100)])
    hip_project = tmp_path / "hip"
    hip_project.mkdir()
    (hip_project / "train.py").write_text("import torch\nprint(torch.version.hip)\n")
    plain = tmp_path / "plain"
    plain.mkdir()
    (plain / "train.py").write_text("import torch\n")
    hip = [f for f in analyze(cli, tmp_path / "t", "--project", hip_project)["findings"] if f["rule"] == "ML-R16"]
    assert len(hip) == 1 and "DFTRACER_ENABLE_HIP_TRACING=ON" in hip[0]["message"]
    assert not [f for f in analyze(cli, tmp_path / "t", "--project", plain)["findings"] if f["rule"] == "ML-R16"]
    write_trace(tmp_path / "t" / "trace-fedcba9876543210-app.pfw.gz",
                [{"name": "hipMemcpy", "cat": "HIP", "ts": T0, "dur": 5}], pid=101)
    assert not [f for f in analyze(cli, tmp_path / "t", "--project", hip_project)["findings"]
                if f["rule"] == "ML-R16"]


@pytest.fixture(scope="module")
def annotated_app(tmp_path_factory):
    from dftpass.cli import main

    out = tmp_path_factory.mktemp("app") / "torch_basic-dftpass"
    assert main(["run", str(APPS / "torch_basic"), "--out", str(out)]) == 0
    return out


def test_no_workers_is_no_overlap_and_the_cause_is_linked_to_its_line(cli, annotated_app, tmp_path):
    """num_workers=0: loading runs in the training process, serial with compute."""
    r = cli("trace", "--label", "w0", "--workspace", tmp_path, "--cwd", annotated_app, "--",
            PY, "train.py", "--data", tmp_path / "data", "--out", tmp_path / "out", "--workers", "0", "--epochs", "1")
    assert r.code == 0, r.err
    a = analyze(cli, tmp_path / "w0")
    # loading seen in the training process itself: serial with compute, judged as no overlap
    assert a["overlap"]["verdict"] == "no overlap" and a["overlap"]["overlap_fraction"] == 0.0
    assert "training process itself" in a["overlap"]["reason"]
    assert a["project"] == str(annotated_app)
    line = line_of(annotated_app / "train.py", "train_loader = DataLoader(")
    causes = [c for c in a["causes"] if c["id"] == "A.num_workers"]
    assert any(c["path"] == "train.py" and c["line"] == line for c in causes)
    assert any(f["rule"] == "ML-R24" and f["path"] == "train.py" and f["line"] == line for f in a["findings"])
    assert (tmp_path / "w0" / "analysis.json").is_file()
    ids = [p["id"] for p in a["proposals"]]
    assert "IO-L1-num-workers" in ids
    assert all(p["citations"] for p in a["proposals"])
    # the wall time the trace does not cover is accounted for: before its first event and after its last
    o = a["time_accounting"]
    assert o["wall_s"] > o["span_s"] > 0 and o["untraced_s"] == pytest.approx(o["wall_s"] - o["span_s"])
    assert o["untraced_before_s"] > 0 and o["untraced_after_s"] >= 0
    result = cli("analyze", tmp_path / "w0")
    text = result.out
    assert "untraced" in text and "before the first event" in text
    # the stall is an error that fails the exit code, and the text says so: the summary shows
    # the diagnosis once, but never hides the finding that set the code
    errors = [f for f in a["findings"] if f["severity"] == "error"]
    assert any(f["rule"] == "ML-R24" for f in errors) and result.code == 1
    assert all(f"error: {f['rule']}" in text and f["message"] in text for f in errors), text
    # the parts of the wall time add up to it
    t = a["time_accounting"]
    assert t["root"] and t["inside_root_s"] > 0
    assert t["inside_root_s"] + t["traced_outside_root_s"] + t["untraced_s"] == pytest.approx(t["wall_s"])
    assert t["untraced_before_s"] + t["untraced_after_s"] == pytest.approx(t["untraced_s"], abs=0.05)
    assert "wall " in text and "inside the root" in text
    # the tables by category, event and process are behind -v: the summary fits a screen
    assert "nested events of a category counted once" not in text and "(-v adds the time by category" in text
    verbose = cli("analyze", tmp_path / "w0", "-v").out
    assert "nested events of a category counted once" in verbose and "-v adds" not in verbose
    assert len(text.splitlines()) <= 30 < len(verbose.splitlines())


def test_a_bare_folder_of_traces_and_bad_files_are_analysed_with_messages(cli, tmp_path):
    folder = tmp_path / "mixed"
    shutil.copytree(REAL, folder)
    shutil.copy(FIXTURES / "traces" / "bad" / "truncated.pfw.gz", folder / "trace-aaaaaaaaaaaaaaaa-fork.pfw.gz")
    (folder / "trace-bbbbbbbbbbbbbbbb-fork.pfw.gz").write_bytes(b"")
    a = analyze(cli, folder)
    assert a["label"] == "mixed" and a["events"] > 0
    problems = "\n".join(a["problems"])
    assert "truncated" in problems and "0-byte file" in problems
    r = cli("analyze", folder)
    assert "trace problems:" in r.out


def test_a_missing_run_is_a_usage_error(cli, tmp_path):
    r = cli("analyze", tmp_path / "nothing")
    assert r.code == 2 and "no such run" in r.err


def test_workers_started_again_each_epoch_are_seen_in_the_trace():
    from dftpass.analysis.diagnosis import PERSISTENT, trace_causes
    from dftpass.traces import ProcessSummary, Summary

    def worker(pid, first_s, last_s):
        return ProcessSummary("w.pfw.gz", pid, "h", "fork", first_ns=int(first_s * 1e9), last_ns=int(last_s * 1e9))

    two_generations = Summary(processes={("w", p.pid): p for p in [
        worker(1, 0, 1), worker(2, 0, 1), worker(3, 2, 3), worker(4, 2, 3)]})
    [cause] = trace_causes(two_generations, "run")
    assert cause.id == PERSISTENT and "4 DataLoader worker processes over the run, at most 2 at a time" in cause.message
    persistent = Summary(processes={("w", p.pid): p for p in [worker(1, 0, 3), worker(2, 0, 3)]})
    assert trace_causes(persistent, "run") == []


def test_a_data_dir_that_traced_no_io_is_reported(cli, tmp_path):
    run = tmp_path / "ws" / "r"
    write_trace(run / "traces" / "raw" / "rep-1" / "trace-0123456789abcdef-app.pfw.gz",
                [event("compute", "forward", T0, 100)])
    (run / "run.json").write_text(json.dumps({"label": "r", "created": "x", "repeats": [
        {"repeat": 1, "wall_s": 1.0, "command": [], "cwd": None,
         "environment": {"DFTRACER_DATA_DIR": "/abs/data"}}]}))
    msgs = [f["message"] for f in analyze(cli, run)["findings"] if f["rule"] == "ML-R15"]
    assert any("DFTRACER_DATA_DIR=/abs/data but no file I/O was traced" in m and "relative path" in m for m in msgs)


@pytest.mark.parametrize("content", ["empty", "bad files", "link loop"])
def test_a_folder_without_events_says_so_and_fails(cli, tmp_path, content):
    """It printed "0 events" and exited 0."""
    folder = tmp_path / "traces"
    folder.mkdir()
    if content == "bad files":
        (folder / "t-aaaaaaaaaaaaaaaa-app.pfw.gz").write_bytes(b"")
        (folder / "t-bbbbbbbbbbbbbbbb-app.pfw").write_text("not json\n")
    elif content == "link loop":
        (folder / "t-cccccccccccccccc-app.pfw").symlink_to(folder / "t-cccccccccccccccc-app.pfw")
    r = cli("analyze", folder)
    assert r.code == 2, r.err  # as --help says: no trace events is a usage error
    assert "error: ML-R15 traces: no trace events found" in r.out
    assert "category" not in r.out  # no empty tables hiding the reason
    if content == "empty":
        assert "no trace files" in r.out and "DFTRACER_ENABLE=1" in r.out
    if content == "bad files":  # the text lists what could not be read, as --json does
        assert "trace problems:" in r.out and "0-byte file" in r.out and "malformed" in r.out
        assert "2 trace file(s), none with events" in r.out
    if content == "link loop":
        assert "a link that leads nowhere" in r.out


def test_analyze_of_a_run_keeps_its_cache_in_the_workspace(tmp_path, cli, tiny_program):
    ws = tmp_path / "ws"
    assert cli("trace", "--label", "base", "--workspace", ws, "--cwd", tiny_program, "--", PY, "tiny.py").code == 0
    assert cli("analyze", ws / "base", "--no-cache").code in (0, 1)
    assert not (ws / ".dftpass-cache").exists()
    first = json.loads(cli("analyze", ws / "base", "--json").out)
    assert any((ws / ".dftpass-cache" / "traces" / "files").glob("*.summary"))
    second = json.loads(cli("analyze", ws / "base", "--json").out)
    assert second["overlap"] == first["overlap"] and second["metrics"] == first["metrics"]
    # the workspace's runs are still its runs: the cache folder is not one of them
    assert cli("report", ws).code == 0


MISPLACED_ROOT = '''
import time
from dftracer.python import ai, dftracer

log = dftracer.initialize_log(logfile=None, data_dir=None, process_id=-1)
try:
    with ai:  # the root around one short call, not around the program's work
        time.sleep(0.001)
    for step in range(20):
        with ai.compute.forward:
            time.sleep(0.02)
finally:
    log.finalize()
'''


def test_a_root_region_that_misses_the_work_is_a_finding_and_the_wall_time_adds_up(tmp_path, cli):
    """The time of a run in parts that add up to its wall time; a root region around 1 ms of
    a 0.4 s program is named, with ML-R1's placement."""
    pytest.importorskip("dftracer.python", reason="the dftracer package is not installed")
    (tmp_path / "prog").mkdir()
    (tmp_path / "prog" / "misplaced.py").write_text(MISPLACED_ROOT)
    ws = tmp_path / "ws"
    assert cli("trace", "--label", "r", "--workspace", ws, "--cwd", tmp_path / "prog", "--", PY, "misplaced.py").code == 0
    a = json.loads(cli("analyze", ws / "r", "--json").out)
    acc = a["time_accounting"]
    parts = acc["inside_root_s"] + acc["traced_outside_root_s"] + acc["untraced_before_s"] + acc["untraced_after_s"]
    assert parts == pytest.approx(acc["wall_s"], rel=0.01)
    assert acc["root"] and acc["inside_root_s"] < 0.05 and acc["traced_outside_root_s"] > 0.35
    [root] = [f for f in a["findings"] if f["rule"] == "ML-R15" and "root region covers" in f["message"]]
    assert root["severity"] == "warning" and "ML-R1" in root["message"], root


@pytest.mark.parametrize("reason, titles", [
    ("no-compute", {"Forward and backward", "Optimizer step"}),
    ("no-loading-events", {"Dataset items", "Batch loop"}),
    ("spawn-untraced", {"DataLoader workers"}),
])
def test_a_remedy_names_the_rules_that_place_what_it_asks_for(monkeypatch, reason, titles):
    """The advice when the overlap cannot be judged names rules by id: each id is the rule that
    places what the advice asks for (it once sent users to ML-R4, the optimizer step, for the
    data set's ``__getitem__``)."""
    import re

    from dftpass.analysis.bottleneck import REMEDIES
    from dftpass.core.config import Config
    from dftpass.core.manager import PassManager

    monkeypatch.setenv("DFTPASS_DISABLE_PLUGIN_AUTOLOAD", "1")
    title_of = {rule.id: rule.title for rule in PassManager(Config(values={})).rules()}
    assert {title_of[rule] for rule in re.findall(r"ML-R\d+", REMEDIES[reason])} == titles, REMEDIES[reason]


SCRIPT_WITHOUT_DATA_SET = '''import torch

torch.manual_seed(0)
fc = torch.nn.Linear(4, 1)


def get_batch():
    x = torch.randn(8, 4)
    return x, x.sum(1, keepdim=True)


for step in range(20):
    batch_x, batch_y = get_batch()
    fc.zero_grad()
    loss = torch.nn.functional.mse_loss(fc(batch_x), batch_y)
    loss.backward()
    for param in fc.parameters():
        param.data.add_(-0.01 * param.grad)
print(f"loss {loss.item():.6f}")
'''


def test_a_category_the_source_has_no_region_for_is_said_as_such_not_blamed_on_a_rule(cli, tmp_path):
    """A script with no data set (pytorch/examples' regression shape): dftpass times its layer's
    call as the forward and its hand-written update as the step, and the analysis says the
    source has no 'data' region (ML-R9 found nothing), never 'look at ML-R9 (not applied ...)'."""
    project = tmp_path / "p"
    project.mkdir()
    (project / "main.py").write_text(SCRIPT_WITHOUT_DATA_SET)
    assert cli("run", project, "--out", tmp_path / "ann").code == 0
    r = cli("trace", "--label", "a", "--workspace", tmp_path / "ws", "--cwd", tmp_path / "ann", "--", PY, "main.py")
    assert r.code == 0, r.err
    a = analyze(cli, tmp_path / "ws" / "a")
    r15 = [f for f in a["findings"] if f["rule"] == "ML-R15"]
    [data] = [f for f in r15 if "'data'" in f["message"]]
    assert data["severity"] == "info" and "ML-R9 found nothing to annotate" in data["message"], data
    assert not any("not applied" in f["message"] for f in r15), r15
    # the layer's call is the forward, the hand-written update the step: one of each per batch
    counts = {(e["cat"], e["name"]): e["count"] for e in a["top"]}
    assert counts[("compute", "forward")] == counts[("compute", "step")] == 20, counts



@pytest.mark.parametrize("wait_us, neck, severity, code", [
    (170, ("compute", "cannot-judge:no-loader"), "warning", 0),  # char-rnn: waits 17%, compute bound
    (300, ("loading", "stalled"), "error", 1),  # waiting is the bottleneck: a stall all the same
])
def test_a_program_without_a_loader_fails_the_gate_only_when_it_stalls(cli, tmp_path, wait_us, neck, severity, code):
    """Batches made in the training loop itself (char-rnn's shape). When compute is the
    bottleneck the overlap cannot be judged (no loader could run beside compute), so the
    phase's no-overlap verdict is a warning, as the bottleneck's label says; when waiting for
    data is the bottleneck it is a stall, and an error."""
    project = tmp_path / "p"
    project.mkdir()
    (project / "train.py").write_text(
        "import torch\n\n\ndef batches():\n    while True:\n        yield torch.randn(8, 4)\n\n\n"
        "model = torch.nn.Linear(4, 1)\nit = batches()\nfor step in range(10):\n"
        "    model(next(it)).sum().backward()\n")
    events = [event("pipeline", "train", T0, 10_000)]
    for i in range(10):
        start = T0 + 1000 * i
        events += [event("dataloader", "fetch", start, wait_us, epoch=1, step=i),
                   event("data", "item", start + 10, wait_us - 20, epoch=1, step=i),
                   event("train", "train", start + wait_us, 1000 - wait_us - 20, epoch=1, step=i),
                   event("compute", "forward", start + wait_us + 10, 1000 - wait_us - 40, epoch=1, step=i)]
    write_trace(tmp_path / "t" / "trace-0123456789abcdef-app.pfw.gz", events)
    r = cli("analyze", tmp_path / "t", "--project", project, "--json")
    a = json.loads(r.out)
    got = a["diagnosis"]["bottleneck"]
    assert (got["kind"], got["overlap"]) == neck, got
    overlap = [f for f in a["findings"] if f["rule"] == "ML-R24" and "no overlap" in f["message"]]
    assert overlap and all(f["severity"] == severity for f in overlap), a["findings"]
    assert r.code == code, a["findings"]
