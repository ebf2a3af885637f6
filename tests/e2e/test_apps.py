"""The shapes real programs come in, each a fixture app run for real: annotated by the CLI,
run as written, annotated with tracing off and annotated with tracing on. The three runs
compute byte for byte the same files, and the traced run's trace holds every category the
program's shape should give (issue: "Reach real programs").

Each app's annotated copy matches its reviewed snapshot in ``fixtures/expected/<app>``
(``DFTPASS_UPDATE_SNAPSHOTS=1`` rewrites them: review the diff before committing), and a
second annotation of the copy changes nothing.
"""

from __future__ import annotations

import shutil
import sys
from collections import Counter
from pathlib import Path

import attrs
import pytest

from tests.conftest import APPS
from tests.e2e.harness import check_snapshot, events_of, run_program, trace_files

pytest.importorskip("torch", reason="torch is not installed (./dev setup installs the CPU build)")
pytest.importorskip("dftracer.python", reason="dftracer is not installed (./dev setup installs it)")
pytestmark = pytest.mark.e2e


@attrs.frozen
class App:
    name: str
    #: the command after ``python``, run in the app's folder ({data} and {out} are filled in)
    argv: tuple[str, ...]
    #: files the program writes to {out}, compared byte for byte
    outputs: tuple[str, ...]
    #: (cat, name) pairs the traced run's main process must hold
    events: tuple[tuple[str, str], ...]
    #: trace files the traced run writes
    processes: int = 1
    #: whether the batch events carry the epoch (iteration-based programs have none)
    epochs: bool = True


COMMON = (("ai_root", "ai_root"), ("compute", "backward"), ("compute", "step"))
SHAPES = [
    App("script_memmap", ("train.py", "--data", "{data}", "--out", "{out}", "--iters", "12"),
        ("result.json", "ckpt.pt"),
        COMMON + (("pipeline", "train"), ("pipeline", "evaluate"), ("compute", "forward"),
                  ("dataloader", "fetch"), ("data", "item")), epochs=False),
    App("next_trainer", ("run.py", "--data", "{data}", "--out", "{out}"), ("result.json", "weights.pt"),
        COMMON + (("pipeline", "train"), ("compute", "forward"), ("dataloader", "fetch"), ("data", "item")),
        epochs=False),
    # issue 29's data path: a generator method behind functools.partial, next() in a
    # module-level loop, reads inside IterableDataset.__iter__, transfers before the yield
    App("stream_partial", ("train.py", "--data", "{data}", "--out", "{out}"), ("result.json", "ckpt.pt"),
        COMMON + (("pipeline", "train"), ("pipeline", "evaluate"), ("compute", "forward"),
                  ("dataloader", "fetch"), ("data", "item"), ("device", "transfer"),
                  ("checkpoint", "capture")), epochs=False),
    App("namespace_model", ("train.py", "--data", "{data}", "--out", "{out}"), ("result.json", "weights.pt"),
        COMMON + (("pipeline", "train"), ("pipeline", "epoch.block"), ("compute", "forward"),
                  ("dataloader", "fetch.iter"), ("data", "item"))),
    App("spawn_workers", ("train.py", "--out", "{out}"), ("rank0.json", "rank1.json"),
        COMMON + (("pipeline", "train"), ("dataloader", "fetch.iter")), processes=3, epochs=False),
    App("ddp_gloo", ("train.py", "--out", "{out}", "--steps", "5"), ("rank0.json", "rank1.json"),
        COMMON + (("compute", "forward"), ("dataloader", "fetch.iter"),
                  ("comm", "all_reduce"), ("comm", "all_gather"), ("comm", "barrier"), ("device", "transfer")),
        processes=3, epochs=False),
]
BY_NAME = {app.name: app for app in SHAPES}


def annotate_app(name: str, tmp: Path) -> tuple[Path, Path]:
    """(a pristine copy of the app, its annotated copy)."""
    from dftpass.cli import main

    src = tmp / "src" / name
    shutil.copytree(APPS / name, src, ignore=shutil.ignore_patterns("__pycache__"))
    out = tmp / "annotated" / name
    assert main(["run", str(src), "--out", str(out)]) == 0
    return src, out


#: the sampled run's k: small, so that these short programs leave steps untraced
SAMPLE_EVERY = 3


def three_runs(app: App, src: Path, annotated: Path, base: Path, sampled: bool = False) -> tuple[list[str], Path]:
    """Run the original, the annotated copy with tracing off and with tracing on (and, with
    ``sampled``, traced with 1 step in :data:`SAMPLE_EVERY` into ``traces-sampled``); return
    their stdouts and the traced run's trace folder."""
    data = base / "data"
    stdouts = []
    runs = [("original", src, False), ("off", annotated, False), ("on", annotated, True)]
    if sampled:
        runs.append(("sampled", annotated, True))
    for label, folder, traced in runs:
        out = base / label
        argv = [a.format(data=data, out=out) for a in app.argv]
        cwd = base / f"cwd-{label}"
        cwd.mkdir(parents=True)
        prefix = base / ("traces-sampled" if label == "sampled" else "traces") / "trace" if traced else None
        extra = {"PYTHONPATH": str(folder)}
        if label == "sampled":
            extra["DFTPASS_SAMPLE_EVERY"] = str(SAMPLE_EVERY)
        proc = run_program([sys.executable, str(folder / argv[0]), *argv[1:]], cwd, prefix, extra)
        assert not (cwd / "dft.log").exists(), f"{label}: dft.log left in the working directory"
        stdouts.append(proc.stdout)
    return stdouts, base / "traces"


@pytest.fixture(scope="module", params=[app.name for app in SHAPES])
def app_run(request, tmp_path_factory):
    app = BY_NAME[request.param]
    tmp = tmp_path_factory.mktemp(app.name)
    src, annotated = annotate_app(app.name, tmp)
    stdouts, traces = three_runs(app, src, annotated, tmp / "runs", sampled=True)
    return app, annotated, tmp / "runs", stdouts, traces


def test_annotated_copy_matches_its_reviewed_snapshot(app_run):
    app, annotated, *_ = app_run
    check_snapshot(app.name, annotated)


def test_a_second_annotation_changes_nothing(app_run, cli):
    _, annotated, *_ = app_run
    r = cli("plan", annotated)
    assert r.code == 0 and r.out.strip() == "", r.out


def test_the_program_computes_the_same_with_tracing_off_and_on(app_run):
    app, _, runs, stdouts, _ = app_run
    assert stdouts[0] == stdouts[1] == stdouts[2] == stdouts[3]
    for name in app.outputs:
        original = (runs / "original" / name).read_bytes()
        for label in ("off", "on", "sampled"):
            assert (runs / label / name).read_bytes() == original, f"{label}/{name} differs"


def test_a_sampled_run_writes_fewer_step_events_and_counts_every_batch(app_run):
    """The same program traced with 1 step in 3 (``DFTPASS_SAMPLE_EVERY``): the phases and the
    root whole, fewer step events, and the analysis counts the batches the full trace counts
    (from the loop's own counter) and says the run was sampled (issue 31)."""
    from dftpass.analysis.work import batches_received
    from dftpass.traces import summarize

    app, _, runs, _, traces = app_run
    full, sampled = trace_files(traces), trace_files(runs / "traces-sampled")
    assert len(sampled) == len(full) == app.processes, [f.name for f in sampled]
    seen = {label: Counter((e["cat"], e["name"]) for f in files for e in events_of(f))
            for label, files in (("full", full), ("sampled", sampled))}
    for key, count in seen["full"].items():
        if key[0] in ("pipeline", "ai_root", "checkpoint"):
            assert seen["sampled"][key] == count, key  # always written
    steps = [k for k in seen["full"] if k[0] in ("compute", "dataloader")]
    assert sum(seen["sampled"][k] for k in steps) < sum(seen["full"][k] for k in steps)
    summary = summarize(sampled)
    assert summary.sampling is not None and summary.sampling.every == SAMPLE_EVERY
    assert batches_received(summary) == batches_received(summarize(full))


def test_the_trace_holds_what_the_shape_should_give(app_run):
    app, _, _, _, traces = app_run
    files = trace_files(traces)
    assert len(files) == app.processes, [f.name for f in files]
    events = [e for f in files for e in events_of(f)]
    seen = Counter((e["cat"], e["name"]) for e in events)
    missing = [key for key in app.events if not seen[key]]
    assert not missing, f"missing {missing}; the trace has {sorted(seen)}"
    # from the first step on, every batch event tells its step (and epoch); a batch fetched
    # before the loop (nanoGPT's first get_batch) comes before any step
    batch = sorted((e for e in events if e["cat"] in ("dataloader", "compute")), key=lambda e: e["ts"])
    first = next(i for i, e in enumerate(batch) if "step" in e.get("args", {}))
    assert first <= 1 and all("step" in e["args"] for e in batch[first:]), "batch events without a step"
    if app.epochs:
        assert all("epoch" in e["args"] for e in batch[first:]), "batch events without an epoch"
    # every traced process has exactly one root region, which spans its steps
    for f in files:
        process = events_of(f)
        roots = [e for e in process if e["cat"] == "ai_root"]
        assert len(roots) == 1, f.name
        steps = [e for e in process if e["cat"] == "compute"]
        if steps:
            root = roots[0]
            assert root["ts"] <= min(e["ts"] for e in steps)
            assert root["ts"] + root["dur"] >= max(e["ts"] + e["dur"] for e in steps)


def test_every_rank_of_a_ddp_run_traces_its_collectives(tmp_path):
    """Two gloo ranks under DDP: each rank's own trace file holds its all-reduce per step
    (issue 8: "both ranks traced, comm events present, per-rank files")."""
    app = BY_NAME["ddp_gloo"]
    src, annotated = annotate_app(app.name, tmp_path)
    stdouts, traces = three_runs(app, src, annotated, tmp_path / "runs")
    assert stdouts[0] == stdouts[2] and "weights identical on all ranks: True" in stdouts[2]
    ranks = [f for f in trace_files(traces) if any(e["cat"] == "comm" for e in events_of(f))]
    assert len(ranks) == 2, [f.name for f in trace_files(traces)]
    for f in ranks:
        comm = Counter(e["name"] for e in events_of(f) if e["cat"] == "comm")
        assert comm["all_reduce"] == 5 and comm["all_gather"] == 1 and comm["barrier"] == 2, (f.name, comm)
