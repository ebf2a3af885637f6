"""Sampled step regions, end to end with the real wheel: a program traced in full and with
``dftpass trace --sample-every 4`` writes fewer step events, the same phase events, balanced
event scopes and the sampling's metadata, and the analysis of the sampled trace scales its
totals back to the full trace's (issue 31)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

from dftpass.traces import analyze, summarize
from tests.e2e.harness import events_of

pytest.importorskip("dftracer.python", reason="the dftracer package is not installed")

#: 2 epochs of 30 steps (the first pass through fetch.iter, the second through next() in a
#: fetch region); an early break ends a third pass; the program finalizes itself (its own
#: log.finalize(), then atexit's). ``SLOW``: the step whose forward takes 30 ms (-1: none)
PROGRAM = '''
import sys, time
import dftpass.runtime as rt
SLOW = int(sys.argv[2])
from dftracer.python import ai

@ai.compute.forward
def forward(x):
    time.sleep(0.03 if x == SLOW else 0.002)
    return x

def main():
    log = rt.initialize(sample_every=int(sys.argv[1]))
    with ai.pipeline.train:
        for b in ai.dataloader.fetch.iter(list(range(30))):
            ai.compute.update(step=b)
            forward(b)
            with ai.compute.backward:
                time.sleep(0.001)
        it = iter(range(30, 60))
        while True:
            ai.dataloader.fetch.start()
            b = next(it, None)
            ai.dataloader.fetch.stop()
            if b is None:
                break
            forward(b)
        for b in ai.dataloader.fetch.iter(list(range(10))):
            if b == 3:
                break
    with ai.pipeline.evaluate:
        forward(0)  # outside any step: traced whatever the last step was
    print("done")
    log.finalize()

main()
'''


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("sampled")
    (root / "prog.py").write_text(PROGRAM)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DFTRACER_", "DFTPASS_"))}
    out = {}
    # step 4 (0-based) is untraced with k = 4 and a warm-up of 2 (traced: 0, 1, 2, 6, 10, ...)
    for label, extra, slow in (("full", [], -1), ("sampled", ["--sample-every", "4"], -1),
                               ("outlier", ["--sample-every", "4"], 4)):
        subprocess.run([sys.executable, "-m", "dftpass", "-q", "trace", "--label", label, "--workspace",
                        str(root / "ws"), *extra, "--", sys.executable, "prog.py", "1", str(slow)], cwd=root, env=env,
                       check=True, capture_output=True, timeout=300)
        run = root / "ws" / label
        files = sorted((run / "traces").rglob("*.pfw*"))
        raw = [f for f in files if "raw" in f.parts]
        out[label] = (json.loads((run / "run.json").read_text()), raw or files)
    return out


def _events(files):
    return [e for f in files for e in events_of(f)]


def test_run_json_records_the_sampling(runs):
    assert runs["sampled"][0]["sampling"] == {"every": 4, "set_by": "--sample-every"}
    assert runs["sampled"][0]["repeats"][0]["environment"]["DFTPASS_SAMPLE_EVERY"] == "4"
    assert runs["full"][0]["sampling"]["every"] is None


def test_untraced_steps_write_nothing_and_phases_are_whole(runs):
    full, sampled = (_events(runs[k][1]) for k in ("full", "sampled"))

    def count(events, name):
        return sum(e["name"] == name for e in events)

    # 30 + 30 + 4 steps: the first 3, each pass's first and last (when its length is known),
    # every 4th after the warm-up
    assert count(full, "forward") == 61 and count(full, "fetch.iter") == 33 and count(full, "fetch") == 31
    assert 0 < count(sampled, "forward") < 30 and count(sampled, "backward") < 15
    assert count(sampled, "train") == count(full, "train") == 1
    assert count(sampled, "evaluate") == 1
    # the forward outside any step (evaluation) is traced: the break left the gate open
    evaluate = next(e for e in sampled if e["name"] == "evaluate")
    assert any(e["name"] == "forward" and e["ts"] >= evaluate["ts"] for e in sampled)
    # a traced step's body event lasts its step, not several (dftracer's own enable/disable
    # kept a stale start: docs/decisions.md)
    blocks = [e["dur"] for e in sampled if e["name"] == "fetch.block"]
    assert blocks and max(blocks) < 2 * max(e["dur"] for e in full if e["name"] == "fetch.block")
    # the traced steps carry their place in the pass
    second = min(e["ts"] for e in sampled if e["name"] == "fetch")
    counts = sorted(e["args"]["count"] for e in sampled if e["name"] == "fetch.iter" and e["ts"] < second)
    assert counts[:4] == [1, 2, 3, 7] and counts[-1] == 30 and len(counts) < 15  # warm-up, every 4th, the last


def test_the_metadata_counts_every_step(runs):
    summary = summarize(runs["sampled"][1])
    sampling = summary.sampling
    assert sampling is not None and sampling.every == 4 and sampling.sampled
    assert sampling.steps == 30 + 31 + 4 and 0 < sampling.traced < sampling.steps
    assert sampling.wait_ns >= sampling.wait_traced_ns > 0 and sampling.body_ns > sampling.body_traced_ns > 0
    assert summarize(runs["full"][1]).sampling is None


def test_the_sampled_totals_are_the_full_ones(runs):
    """Scaled by the ratio of the measured step times, the sampled trace's totals are within
    15% of the full trace's: two runs of a sleeping program, so not the same steps; the
    benchmark measures the error on one run pattern (bench/overhead.py)."""
    full, sampled = (analyze(runs[k][1]) for k in ("full", "sampled"))
    for key in (("compute", "forward"), ("compute", "backward"), ("dataloader", "fetch.block")):
        f, s = full.summary.by_key[key], sampled.summary.by_key[key]
        assert s.dur_ns == pytest.approx(f.dur_ns, rel=0.15), key
        assert s.count == pytest.approx(f.count, rel=0.15), key
    assert sampled.overlap.whole.compute_s == pytest.approx(full.overlap.whole.compute_s, rel=0.15)


def test_an_untraced_outlier_is_said(runs):
    """Step 4 sleeps 30 ms and is not one the gate traces."""
    sampling = summarize(runs["outlier"][1]).sampling
    warnings = sampling.warnings()
    assert sampling.untraced_body_max_ns > 25_000_000
    assert any("an outlier step may be one that was not traced" in w for w in warnings), warnings


def test_a_traced_outlier_counts_once():
    """A regular traced step 10x its pass's others stands for itself (weight 1); the pass's
    other regular steps stand for the untraced ones."""
    from dftpass.traces.sampling import Sampling

    ms = 1_000_000
    # one pass of 20 steps, 6 traced: the first, the last, and 4 regular ones (one slow)
    sampling = Sampling(every=4, warmup=1, steps=20, traced=6, passes=((0, 100 * ms, 20, 6, 0, 0, 0, 0),))
    starts = np.array([0, 10, 30, 50, 70, 95]) * ms
    ends = starts + np.array([2, 2, 20, 2, 2, 2]) * ms
    waited = starts + ms // 2
    weighed = sampling.with_steps(starts, waited, np.array([1, 3, 7, 11, 15, 20]), waited, ends, [], [])
    _, _, weight = weighed.spans
    # forced: the first, the last and the slow one; the 3 other regular ones stand for 17 steps
    assert weighed.forced == 3 and weighed.traced_outliers == 1
    assert list(weight) == [1.0, 17 / 3, 1.0, 17 / 3, 17 / 3, 1.0]
    assert any("counted once" in w for w in weighed.warnings())


def test_a_sampled_run_gives_the_plan_its_step_and_what_tracing_one_costs(runs, tmp_path):
    """``--step-time RUN`` on a sampled run: the untraced steps' mean is the step without
    tracing, and a traced step's excess is the measured cost the plan chooses k with."""
    from dftpass.cli import main

    run = runs["sampled"][1][0]
    while run.name != "sampled":
        run = run.parent
    project = tmp_path / "project"
    project.mkdir()
    (project / "train.py").write_text(PROGRAM)
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err):
        code = main(["plan", str(project), "--step-time", str(run), "--sample-every", "1"])
    said = err.getvalue()
    assert code == 0, said
    line = next(ln for ln in said.splitlines() if ln.startswith("step time:"))
    ms = float(line.split()[2])
    assert "untraced steps of" in line and "a traced step cost" in line, line
    assert 2.0 < ms < 20.0, line  # 3 ms of sleep a step (2 ms forward, 1 ms backward), and the loop


def test_a_sampled_trace_cut_short_says_its_totals_are_low():
    """A sampled process killed before its finalize wrote only its k: no counts to scale by."""
    from dftpass.traces.sampling import Sampling

    cut = Sampling.of_metadata({"dftpass.sampling.every": "8"})
    assert cut is not None and cut.cut_short and not cut.sampled
    assert "ended before writing its step counts" in cut.describe()
    assert list(cut.weights([1, 2])) == [1.0, 1.0]
    assert Sampling.of_metadata({"dftpass.sampling.every": "1"}) is None  # every step traced: not sampled
    # a process with no batch loop to count (Keras fits inside TensorFlow): sampled nothing, says nothing
    idle = Sampling.of_metadata({"dftpass.sampling.every": "8", "dftpass.sampling.steps": "0"})
    assert not idle.cut_short and not idle.sampled and idle.describe() == ""
    assert Sampling.of_metadata({"dftpass.sampling.every": "x"}) is None  # unreadable: not sampled
