"""Every way a program starts gets one initialization, for real: an installed console
script, ``python -m``, a module-level script on each way out, Ctrl-C handled by the program
itself, and a project annotated by hand through its own re-export of dftracer."""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pytest

from tests.conftest import APPS, tree_bytes
from tests.e2e.harness import annotate_snippet, check_snapshot, clean_env, events_of, run_program, trace_files

pytest.importorskip("torch", reason="torch is not installed (./dev setup installs the CPU build)")
pytest.importorskip("dftracer.python", reason="dftracer is not installed (./dev setup installs it)")
pytestmark = pytest.mark.e2e

BENCH_EVENTS = [("ai_root", "ai_root"), ("pipeline", "train"), ("pipeline", "evaluate"), ("pipeline", "epoch.block"),
                ("compute", "compute"), ("dataloader", "fetch.iter"), ("data", "item")]


def pip_install(project: Path, target: Path) -> Path:
    """``pip install`` the project into ``target``; its console scripts land in target/bin."""
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--disable-pip-version-check", "--target", str(target), str(project)],
                   check=True, capture_output=True, timeout=300)
    return target / "bin"


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    from dftpass.cli import main

    tmp = tmp_path_factory.mktemp("bench")
    src = tmp / "src"
    shutil.copytree(APPS / "bench_factories", src, ignore=shutil.ignore_patterns("__pycache__", "*.egg-info", "build"))
    annotated = tmp / "annotated"
    assert main(["run", str(src), "--out", str(annotated)]) == 0
    return tmp, src, annotated


def test_bench_annotation_matches_its_snapshot(bench):
    _, _, annotated = bench
    check_snapshot("bench_factories", annotated)


def test_the_installed_console_script_traces_and_computes_the_same(bench):
    tmp, src, annotated = bench
    outputs, stdouts = {}, {}
    for label, project, traced in (("original", src, False), ("off", annotated, False), ("on", annotated, True)):
        site = tmp / f"site-{label}"
        bin_dir = pip_install(project, site)
        prefix = tmp / "traces" / "trace" if traced else None
        proc = run_program([str(bin_dir / "minibench"), "--data", str(tmp / "data"), "--out", str(tmp / label)],
                           tmp, prefix, {"PYTHONPATH": str(site)})
        stdouts[label] = proc.stdout
        outputs[label] = (tmp / label / "result.json").read_bytes()
    assert stdouts["original"] == stdouts["off"] == stdouts["on"]
    assert outputs["original"] == outputs["off"] == outputs["on"]
    [trace] = trace_files(tmp / "traces")
    events = events_of(trace)
    seen = Counter((e["cat"], e["name"]) for e in events)
    assert all(seen[key] for key in BENCH_EVENTS), sorted(seen)
    assert seen[("ai_root", "ai_root")] == 1
    assert seen[("compute", "compute")] == 24  # 2 epochs x (6 train + 6 eval) steps
    steps = [e for e in events if e["cat"] in ("compute", "dataloader")]
    assert all({"epoch", "step"} <= set(e["args"]) for e in steps)
    assert {e["args"]["epoch"] for e in steps} == {1, 2} and {e["args"]["step"] for e in steps} == set(range(6))


def test_python_dash_m_initializes_once_too(bench):
    """The console script's function is also run by the module's __main__ block: one
    initialization, inside the function, whichever way the program starts."""
    tmp, _, annotated = bench
    traces = tmp / "traces-m"
    run_program([sys.executable, "-m", "minibench.main", "--data", str(tmp / "data"), "--out", str(tmp / "m")],
                annotated, traces / "trace", {"PYTHONPATH": str(annotated)})
    [trace] = trace_files(traces)
    events = events_of(trace)
    assert sum(1 for e in events if e["cat"] == "ai_root") == 1
    main_py = (annotated / "minibench" / "main.py").read_text()
    assert main_py.count("_dft_runtime.initialize()") == 1
    guard = main_py[main_py.index('if __name__ == "__main__":'):]
    assert guard.strip() == 'if __name__ == "__main__":\n    main()'
    assert "def query" in main_py and "_dft_runtime.initialize" not in main_py[main_py.index("def query"):]


def test_validate_on_the_bench_passes_and_catches_a_console_script_left_untraced(bench, cli, tmp_path):
    """validate reports an entry that can be started without tracing: here the console
    script, when only the __main__ block initializes."""
    _, src, annotated = bench
    assert cli("validate", annotated).code == 0
    broken = tmp_path / "broken"
    shutil.copytree(src, broken)
    main_py = broken / "minibench" / "main.py"
    text = main_py.read_text().replace(
        'if __name__ == "__main__":\n    main()',
        'if __name__ == "__main__":\n    from dftracer.python import dftracer\n'
        '    log = dftracer.initialize_log(logfile=None, data_dir=None, process_id=-1)\n    main()\n    log.finalize()')
    main_py.write_text(text)
    r = cli("validate", broken)
    assert r.code == 1
    assert "ML-R1 not annotated: console script minibench: initialize and finalize" in r.out


# -- a project annotated by hand ---------------------------------------------------------------


def test_a_hand_annotated_project_gets_nothing_more(cli):
    app = APPS / "hand_annotated"
    before = tree_bytes(app)
    plan = cli("plan", app)
    assert plan.code == 0 and plan.out == "", plan.out
    assert cli("validate", app).code == 0
    assert tree_bytes(app) == before


def test_a_hand_annotated_project_missing_one_region_gets_only_that(cli, tmp_path):
    app = tmp_path / "hand"
    shutil.copytree(APPS / "hand_annotated", app, ignore=shutil.ignore_patterns("__pycache__"))
    train = app / "handapp" / "train.py"
    train.write_text(train.read_text().replace("dft_ai.dataloader.fetch.iter(loader)", "loader", 1))
    plan = cli("plan", app, "--no-diff")
    lines = [line for line in plan.out.splitlines() if line]
    assert lines == [f"handapp/train.py:{_line(train, 'for step, (x, y) in enumerate(loader)')}: ML-R6 batch loop: "
                     "iterates loader, a data loader"]
    diff = cli("plan", app).out
    assert "+    for step, (x, y) in enumerate(dft_ai.dataloader.fetch.iter(loader)):" in diff
    assert "from dftracer" not in diff  # the project's own re-exported name is used


def _line(path: Path, text: str) -> int:
    return next(i for i, line in enumerate(path.read_text().splitlines(), 1) if text in line)


def test_the_hand_annotated_project_runs_traced(tmp_path):
    app = APPS / "hand_annotated"
    out = {}
    for label, traced in (("off", False), ("on", True)):
        prefix = tmp_path / "traces" / "trace" if traced else None
        run_program([sys.executable, "-m", "handapp.train", "--data", str(tmp_path / "data"),
                     "--out", str(tmp_path / label)], app, prefix, {"PYTHONPATH": str(app)})
        out[label] = (tmp_path / label / "result.json").read_bytes()
    assert out["off"] == out["on"]
    [trace] = trace_files(tmp_path / "traces")
    seen = {(e["cat"], e["name"]) for e in events_of(trace)}
    assert {("ai_root", "ai_root"), ("pipeline", "train"), ("dataloader", "fetch.iter"), ("data", "item"),
            ("compute", "forward")} <= seen


# -- the program behaves the same with tracing on ------------------------------------------------

INTERRUPTIBLE = '''import sys
import time

import torch


def train(steps):
    w = torch.zeros(3, requires_grad=True)
    opt = torch.optim.SGD([w], lr=0.1)
    for step in range(steps):
        (w - 1.0).pow(2).sum().backward()
        opt.step()
        opt.zero_grad()
        if step == 2:
            print("ready", flush=True)
        time.sleep(0.05)


try:
    train(10_000)
except KeyboardInterrupt:
    print("Exiting from training early", flush=True)
sys.exit(0)
'''


def test_ctrl_c_still_reaches_the_programs_own_handler(tmp_path, cli):
    """word_language_model's shape: `except KeyboardInterrupt:` at module level. With tracing
    on, dftracer's import installs a SIGINT handler that calls sys.exit(2); the emitted
    lifecycle gives the program Python's own back, and the trace is still finalized."""
    program = annotate_snippet(tmp_path, cli, "prog.py", INTERRUPTIBLE)
    traces = tmp_path / "traces"
    proc = subprocess.Popen([sys.executable, str(program)], cwd=tmp_path,
                            env=clean_env(traces / "trace"), stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "ready"
    time.sleep(0.2)
    proc.send_signal(signal.SIGINT)
    rest = proc.communicate(timeout=60)[0]
    assert proc.returncode == 0 and "Exiting from training early" in rest
    [trace] = trace_files(traces)
    events = events_of(trace)
    assert any(e["cat"] == "ai_root" for e in events) and any(e["name"] == "backward" for e in events)


SCRIPT = '''import sys

import torch

w = torch.zeros(2, requires_grad=True)
for step in range(4):
    (w * 2).sum().backward()
if sys.argv[1] == "raise":
    raise RuntimeError("boom")
if sys.argv[1] == "exit":
    sys.exit(3)
print("done")
'''


@pytest.mark.parametrize("mode, code", [("ok", 0), ("raise", 1), ("exit", 3)])
def test_a_module_level_script_finalizes_on_every_way_out(tmp_path, cli, mode, code):
    script = annotate_snippet(tmp_path, cli, "script.py", SCRIPT)
    traces = tmp_path / "traces"
    proc = subprocess.run([sys.executable, str(script), mode], cwd=tmp_path,
                          env=clean_env(traces / "trace"), capture_output=True, text=True, timeout=120)
    assert proc.returncode == code, proc.stderr
    [trace] = trace_files(traces)
    events = events_of(trace)
    root = [e for e in events if e["cat"] == "ai_root"]
    backward = [e for e in events if e["name"] == "backward"]
    assert len(root) == 1 and len(backward) == 4
    assert root[0]["ts"] <= backward[0]["ts"] and root[0]["ts"] + root[0]["dur"] >= backward[-1]["ts"]


FORKED = '''import multiprocessing as mp

import torch


def work(n):
    w = torch.zeros(2, requires_grad=True)
    for _ in range(n):
        (w * 3).sum().backward()


def main():
    work(1)
    child = mp.get_context("fork").Process(target=work, args=(4,))
    child.start()
    child.join()
    work(2)
    print("child exit", child.exitcode)


if __name__ == "__main__":
    main()
'''


def test_a_process_target_also_called_in_the_parent_survives_a_fork(tmp_path, cli):
    """`work` is a process target and is called in the parent before and after the fork: the
    parent initializes once and finalizes at exit, never in between (a forked child writing to
    a finalized tracer crashed with SIGSEGV); the child writes its own trace."""
    program = annotate_snippet(tmp_path, cli, "prog.py", FORKED)
    traces = tmp_path / "traces"
    proc = subprocess.run([sys.executable, str(program)], cwd=tmp_path, env=clean_env(traces / "trace"),
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0 and "child exit 0" in proc.stdout, proc.stdout + proc.stderr
    files = trace_files(traces)
    assert sorted(f.name.rsplit("-", 1)[-1] for f in files) == ["app.pfw.gz", "fork.pfw.gz"]
    backward = {f.name.rsplit("-", 1)[-1]: sum(e["name"] == "backward" for e in events_of(f)) for f in files}
    assert backward == {"app.pfw.gz": 3, "fork.pfw.gz": 4}
