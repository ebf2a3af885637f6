"""Beyond PyTorch: a fixture app per framework, annotated by the CLI and run for real.

Each app (Lightning with hydra, Keras ``fit``, a TensorFlow custom loop, Flax NNX) runs as
written, annotated with tracing off, and annotated with tracing on (``dftpass trace``, as a
user would). The three runs print the same loss lines and write the same history files
byte for byte (every framework here is deterministic on the CPU: seeded, and TensorFlow with
op determinism on); the traced run's trace holds the categories the framework's rules place.
The annotated copy matches its reviewed snapshot and a second annotation changes nothing.

The frameworks come with the README's test command (``./dev test`` installs the
``frameworks`` extra). One that is missing fails its tests by name: never a silent skip.
Select them with ``-m frameworks`` (or one: ``-m lightning``), leave them out with
``-m "not frameworks"``.
"""

from __future__ import annotations

import gzip
import importlib.util
import json
import re
import shutil
import sys
from collections import Counter
from pathlib import Path

import attrs
import pytest

from tests.conftest import APPS
from tests.e2e.harness import check_snapshot, run_program

pytestmark = [pytest.mark.e2e, pytest.mark.frameworks]

#: printed lines compared between the runs (timings and library chatter are not)
RESULT_LINE = re.compile(r"^(epoch \d+|test)[: ]")


@attrs.frozen
class FrameworkApp:
    name: str
    #: the modules the app imports (each must be installed)
    modules: tuple[str, ...]
    #: the command after ``python``, run in the app's folder ({data} and {out} are filled in)
    argv: tuple[str, ...]
    #: files the program writes to {out}, compared byte for byte
    outputs: tuple[str, ...]
    #: (cat, name) pairs the traced run must hold
    events: tuple[tuple[str, str], ...]
    env: tuple[tuple[str, str], ...] = ()


APPS_BY_FRAMEWORK = [
    pytest.param(FrameworkApp(
        "lightning_hydra", ("lightning", "hydra"),
        ("src/train.py", "paths.output_dir={out}", "paths.data_dir={data}"), ("results.json",),
        (("ai_root", "ai_root"), ("pipeline", "train"), ("pipeline", "epoch"), ("pipeline", "evaluate"),
         ("pipeline", "test"), ("compute", "compute"), ("compute", "forward"), ("compute", "backward"),
         ("compute", "step"), ("data", "item"), ("dataloader", "fetch"), ("checkpoint", "checkpoint.io.write")),
        env=(("PYTHONPATH", "."),)), id="lightning_hydra", marks=pytest.mark.lightning),
    pytest.param(FrameworkApp(
        "keras_fit", ("tensorflow", "keras"), ("train.py", "--data", "{data}", "--out", "{out}"), ("history.json",),
        # tf.data loads inside TensorFlow's runtime: its Python reader is timed (data item, from
        # tf.data's threads), the wait for a batch is inside each step (no dataloader event)
        (("ai_root", "ai_root"), ("pipeline", "train"), ("pipeline", "epoch"), ("pipeline", "evaluate"),
         ("compute", "compute"), ("data", "item"), ("checkpoint", "capture"))),
        id="keras_fit", marks=pytest.mark.tensorflow),
    pytest.param(FrameworkApp(
        "tf_loop", ("tensorflow", "keras"), ("train.py", "--data", "{data}", "--out", "{out}"), ("history.json",),
        (("ai_root", "ai_root"), ("pipeline", "train"), ("pipeline", "epoch.block"), ("compute", "compute"),
         ("dataloader", "fetch.iter"), ("data", "item"), ("checkpoint", "capture"))),
        id="tf_loop", marks=pytest.mark.tensorflow),
    pytest.param(FrameworkApp(
        "flax_nnx", ("jax", "flax", "optax", "orbax.checkpoint"), ("train.py", "--data", "{data}", "--out", "{out}"),
        ("history.json",),
        (("ai_root", "ai_root"), ("pipeline", "train"), ("pipeline", "epoch.block"), ("compute", "compute"),
         ("dataloader", "fetch.iter"), ("data", "item"), ("data", "data.io.read"), ("checkpoint", "capture"))),
        id="flax_nnx", marks=pytest.mark.jax),
]


def require(app: FrameworkApp) -> None:
    missing = [m for m in app.modules if importlib.util.find_spec(m) is None]
    if missing:
        pytest.fail(f"{app.name} needs {', '.join(missing)}: not installed (./dev test installs the frameworks "
                    "extra: pip install -e '.[frameworks]')", pytrace=False)


@pytest.fixture(scope="module", params=APPS_BY_FRAMEWORK)
def framework_run(request, tmp_path_factory):
    """The app annotated, then run three ways; (app, annotated copy, stdouts, out folders, events)."""
    from dftpass.cli import main

    app: FrameworkApp = request.param
    require(app)
    tmp = tmp_path_factory.mktemp(app.name)
    src, annotated = tmp / "src", tmp / "annotated"
    shutil.copytree(APPS / app.name, src, ignore=shutil.ignore_patterns("__pycache__"))
    assert main(["run", str(src), "--out", str(annotated), "-q"]) == 0
    data = tmp / "data"
    stdouts, outs = {}, {}
    env = dict(app.env)
    for label, folder in (("original", src), ("off", annotated)):
        outs[label] = tmp / f"out-{label}"
        argv = [a.format(data=data, out=outs[label]) for a in app.argv]
        stdouts[label] = run_program([sys.executable, *argv], folder, None, env).stdout
    outs["on"] = tmp / "out-on"
    argv = [a.format(data=data, out=outs["on"]) for a in app.argv]
    workspace = tmp / "ws"
    code = main(["trace", "--label", "on", "--workspace", str(workspace), "--cwd", str(annotated), "--",
                 "env", *(f"{k}={v}" for k, v in env.items()), "OMP_NUM_THREADS=1", sys.executable, *argv])
    assert code == 0, f"the traced run of {app.name} failed"
    record = json.loads((workspace / "on" / "run.json").read_text())
    stdouts["on"] = ""  # dftpass trace does not capture the program's output: compare the files
    events: Counter = Counter()
    images: list = []
    for path in sorted((workspace / "on" / "traces" / "raw" / "rep-1").glob("*.pfw.gz")):
        with gzip.open(path, "rt") as fh:
            for line in fh:
                if not line.strip():
                    continue
                e = json.loads(line)
                if e.get("ph") == 1:
                    events[(e["cat"], e["name"])] += 1
                    if e["cat"] == "checkpoint" and "io" in e["name"]:
                        images.append(e.get("args", {}).get("image_size"))
    # the same, with the step regions of 1 step in 3 (issue 31): the callbacks' steps too
    outs["sampled"] = tmp / "out-sampled"
    argv = [a.format(data=data, out=outs["sampled"]) for a in app.argv]
    code = main(["trace", "--label", "sampled", "--sample-every", "3", "--workspace", str(workspace), "--cwd",
                 str(annotated), "--", "env", *(f"{k}={v}" for k, v in env.items()), "OMP_NUM_THREADS=1",
                 sys.executable, *argv])
    assert code == 0, f"the sampled run of {app.name} failed"
    return app, annotated, stdouts, outs, events, record, images


def test_the_annotated_copy_matches_its_reviewed_snapshot(framework_run):
    app, annotated, *_ = framework_run
    check_snapshot(app.name, annotated)


def test_a_second_annotation_changes_nothing(framework_run, tmp_path, cli):
    _, annotated, *_ = framework_run
    r = cli("plan", annotated, "--no-diff")
    assert r.code == 0 and " 0 edits" in r.err, r.err


def test_the_program_computes_the_same_with_tracing_off_and_on(framework_run):
    app, _, stdouts, outs, *_ = framework_run
    printed = {label: [line for line in text.splitlines() if RESULT_LINE.match(line)]
               for label, text in stdouts.items() if text}
    assert printed["original"] and printed["original"] == printed["off"], printed
    for name in app.outputs:
        original = (outs["original"] / name).read_bytes()
        assert original == (outs["off"] / name).read_bytes(), f"{name}: tracing off changed it"
        assert original == (outs["on"] / name).read_bytes(), f"{name}: tracing on changed it"


def test_a_sampled_run_computes_the_same_and_writes_fewer_step_events(framework_run):
    """``dftpass trace --sample-every 3``: the same files; the phases whole; the step regions
    of fewer steps where the framework's loop is the clock (a fetch region or ``fetch.iter``);
    the analysis reads the sampling back."""
    from dftpass.traces import summarize

    app, _, _, outs, events, *_ = framework_run
    for name in app.outputs:
        assert (outs["original"] / name).read_bytes() == (outs["sampled"] / name).read_bytes(), name
    folder = outs["sampled"].parent / "ws" / "sampled" / "traces" / "raw" / "rep-1"
    files = sorted(folder.glob("*.pfw.gz"))
    sampled: Counter = Counter()
    for path in files:
        with gzip.open(path, "rt") as fh:
            for line in fh:
                e = json.loads(line) if line.strip() else {}
                if e.get("ph") == 1:
                    sampled[(e["cat"], e["name"])] += 1
    for key, count in events.items():
        if key[0] in ("pipeline", "ai_root"):
            assert sampled[key] == count, (key, sampled[key], count)
    summary = summarize(files)
    clock = any(k[0] == "dataloader" for k in events)
    if clock:  # a batch loop dftpass wraps (Keras fits inside TensorFlow's runtime: no clock, every step)
        assert summary.sampling is not None and summary.sampling.sampled, summary.sampling
        assert sum(c for k, c in sampled.items() if k[0] == "compute") < sum(
            c for k, c in events.items() if k[0] == "compute")
    else:
        assert summary.sampling is None or not summary.sampling.sampled


def test_the_trace_holds_what_the_framework_rules_place(framework_run):
    app, _, _, _, events, record, images = framework_run
    missing = [key for key in app.events if not events[key]]
    assert not missing, f"{app.name}: no {missing} events; found {sorted(events)}"
    assert all(size and size > 0 for size in images), images  # checkpoint writes measured in memory


def test_a_jax_program_that_checkpoints_with_orbax_traces_without_posix_interception(framework_run):
    """tensorstore's file locks fail under dftracer's POSIX interception; dftpass trace keeps it
    out of a project that imports orbax (the traced run above saved its checkpoints)."""
    app, _, _, outs, _, record, _ = framework_run
    notes = " ".join(n for rep in record["repeats"] for n in rep.get("notes", []))
    if "orbax.checkpoint" in app.modules:
        assert "DFTRACER_DISABLE_POSIX=1" in notes and "orbax" in notes
        assert any((outs["on"] / "ckpt").iterdir())
    else:
        assert "DFTRACER_DISABLE_POSIX" not in notes
