"""dftpass on code nobody here wrote: public training programs, and large libraries.

    # a training program from a checkout fetched outside the repository
    python bench/realworld.py program word_language_model --checkout /scratch/pytorch-examples
    python bench/realworld.py program nanogpt --checkout /scratch/nanoGPT
    python bench/realworld.py program mingpt --checkout /scratch/minGPT
    python bench/realworld.py program mnist --checkout /scratch/pytorch-examples --python /scratch/tvenv/bin/python
    python bench/realworld.py program imagenet --checkout /scratch/pytorch-examples --python /scratch/tvenv/bin/python

    # libraries downloaded from the package index: annotate, then validate dftpass's own output
    python bench/realworld.py library transformers deepspeed lightning keras torch==2.13.0

    # the memory figure kept for `run` on torch's sources: peak RSS <= 500 MB
    python bench/realworld.py library torch==2.13.0 --max-rss-mb 500

A program is copied to a scratch folder, annotated with ``dftpass run`` (whose output must
pass ``dftpass validate`` and be left as it is by a second ``run``: "own_checks"), then run as
written, annotated with tracing off and annotated with tracing on, with the smallest
settings that still train on 2 CPU cores (docs/realworld.md). The printed loss lines are
compared with their timings stripped, saved weights byte for byte; the trace is read and
its categories, event counts and root span are printed. Nothing is written inside the
repository; the project's code is never committed.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import re
import shutil
import signal
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Callable

import attrs

DFTPASS = [sys.executable, "-m", "dftpass"]


# -- programs ----------------------------------------------------------------------------------

def _wlm_data(work: Path, project: Path) -> list[str]:
    """Lines 1-400 of valid.txt as train.txt, 401-600 as valid.txt, 200 lines of test.txt."""
    src = project / "data" / "wikitext-2"
    data = work / "wlm-data"
    data.mkdir(exist_ok=True)
    valid = (src / "valid.txt").read_text(encoding="utf-8").splitlines(keepends=True)
    test = (src / "test.txt").read_text(encoding="utf-8").splitlines(keepends=True)
    (data / "train.txt").write_text("".join(valid[:400]), encoding="utf-8")
    (data / "valid.txt").write_text("".join(valid[400:600]), encoding="utf-8")
    (data / "test.txt").write_text("".join(test[:200]), encoding="utf-8")
    return ["main.py", "--data", str(data), "--epochs", "2", "--emsize", "32", "--nhid", "32", "--bptt", "35",
            "--batch_size", "20", "--log-interval", "5", "--save", "{out}/model.pt"]


def _nanogpt_data(work: Path, project: Path) -> list[str]:
    """~200 KB of local text as the character corpus; prepare.py with a stub `requests`."""
    folder = project / "data" / "shakespeare_char"
    text = Path(__file__).resolve().parents[1].joinpath("README.md").read_text(encoding="utf-8")
    (folder / "input.txt").write_text((text * 200)[:200_000], encoding="utf-8")
    stub = work / "stub"
    stub.mkdir(exist_ok=True)
    (stub / "requests.py").write_text("def get(*a, **k):\n    raise RuntimeError('no network')\n")
    subprocess.run([ARGS.python, "prepare.py"], cwd=folder, check=True, capture_output=True,
                   env={**os.environ, "PYTHONPATH": str(stub)})
    return ["train.py", "config/train_shakespeare_char.py", "--device=cpu", "--compile=False", "--eval_iters=5",
            "--log_interval=5", "--block_size=64", "--batch_size=8", "--n_layer=2", "--n_head=2", "--n_embd=64",
            "--max_iters=40", "--lr_decay_iters=40", "--dropout=0.0", "--out_dir={out}"]


def _mnist_data(work: Path, project: Path) -> list[str]:
    """MNIST in torchvision's raw format, from random bytes with a learnable bar per label."""
    import numpy as np

    raw = work / "data" / "MNIST" / "raw"  # main.py reads ../data: the runs start in work/out-*
    raw.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(0)
    for split, n in (("train", 640), ("t10k", 200)):
        labels = rng.integers(0, 10, n)
        images = (rng.random((n, 28, 28)) * 60).astype(np.uint8)
        for i, label in enumerate(labels):
            images[i, 2 + 2 * label, 4:24] = 250
        for name, array, magic in ((f"{split}-images-idx3-ubyte", images, 2051),
                                   (f"{split}-labels-idx1-ubyte", labels, 2049)):
            with open(raw / name, "wb") as fh:
                fh.write(struct.pack(">I", magic) + b"".join(struct.pack(">I", d) for d in array.shape))
                fh.write(array.astype(np.uint8).tobytes())
    return ["main.py", "--epochs", "2", "--batch-size", "64", "--test-batch-size", "100", "--save-model", "--no-accel"]


@attrs.frozen
class Recipe:
    folder: str  # in the checkout
    setup: Callable[[Path, Path], list[str]]  # (work folder, project copy) -> argv after python
    lines: str  # the output lines to compare (timings stripped)
    files: tuple[str, ...] = ()  # written to {out} (or the working folder), compared byte for byte
    cwd: str = "project"  # "project" or "out": where the program runs
    bound_s: int | None = None  # programs too long to finish: compare the lines printed in this time


RECIPES = {
    "word_language_model": Recipe("word_language_model", _wlm_data, r"^\|", ("model.pt",)),
    "nanogpt": Recipe(".", _nanogpt_data, r"^(iter|step) "),
    "mingpt": Recipe(".", lambda w, p: ["projects/adder/adder.py", "--trainer.max_iters=60",
                                        "--trainer.num_workers=0", "--system.work_dir='{out}'"], r"train loss"),
    "mnist": Recipe("mnist", _mnist_data, r"(Loss|Accuracy)", ("mnist_cnn.pt",), cwd="out"),
    "imagenet": Recipe("imagenet", lambda w, p: ["main.py", "-a", "resnet18", "-b", "8", "--epochs", "1", "-j", "2",
                                                 "--dummy", "--seed", "0", "--print-freq", "5"],
                       r"^Epoch: \[0\]", bound_s=45),
}
INPUT_ERRORS = re.compile(r"does not parse|not valid text|cannot read")
TIMINGS = re.compile(r"(ms/batch|time:?|Time|Data|iter_dt)\s*[0-9.]+\s*(ms|s)?(\s*\(\s*[0-9.]+\))?;?|"
                     r"time [0-9.]+ms|mfu -?[0-9.]+%")


def run_once(recipe: Recipe, project: Path, argv: list[str], out: Path, trace: Path | None,
             sample_every: int | None = None):
    """(printed text, exit code or "bounded", seconds) of one run; ``sample_every``: a traced
    run's step regions for 1 step in k (the runtime's gate, ``DFTPASS_SAMPLE_EVERY``)."""
    out.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DFTRACER_", "DFTPASS_SAMPLE_"))}
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(project))
    if trace is not None:
        env.update(DFTRACER_ENABLE="1", DFTRACER_INC_METADATA="1", DFTRACER_LOG_FILE=str(trace / "trace"))
        if sample_every:
            env["DFTPASS_SAMPLE_EVERY"] = str(sample_every)
    cmd = [ARGS.python, str(project / argv[0]), *[a.format(out=out) for a in argv[1:]]]
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, cwd=project if recipe.cwd == "project" else out, env=env, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        text = proc.communicate(timeout=recipe.bound_s or 1800)[0]
        return text, proc.returncode, time.perf_counter() - start
    except subprocess.TimeoutExpired:
        # bounded by time: Ctrl-C, as a user would (the trace is finalized on the way out),
        # and the lines printed so far count
        proc.send_signal(signal.SIGINT)
        text = proc.communicate(timeout=120)[0]
        return text, "bounded", time.perf_counter() - start


def read_trace(folder: Path) -> dict:
    files = sorted(folder.glob("*.pfw.gz"))
    seen: Counter = Counter()
    root = span = 0.0
    for path in files:
        with gzip.open(path, "rt") as fh:
            events = [json.loads(line) for line in fh if line.strip().startswith("{")]
        events = [e for e in events if e.get("ph") == 1]
        seen.update(e["cat"] for e in events)
        if events:
            span = max(span, (max(e["ts"] + e["dur"] for e in events) - min(e["ts"] for e in events)) / 1e6)
            root = max([root] + [e["dur"] / 1e6 for e in events if e["cat"] == "ai_root"])
    out = {"files": len(files), "categories": dict(sorted(seen.items())), "root_s": round(root, 3),
           "span_s": round(span, 3), "bytes": sum(p.stat().st_size for p in files)}
    if files:  # as dftpass reads it: a sampled trace's totals are estimates for every step
        from dftpass.analysis.work import batches_received
        from dftpass.traces import summarize

        summary = summarize(files)
        out["batches"] = batches_received(summary)
        out["sampling"] = summary.sampling.describe() if summary.sampling else None
        out["totals_ms"] = {f"{c}/{n}": round(st.dur_ns / 1e6, 2) for (c, n), st in sorted(summary.by_key.items())
                            if c in ("compute", "dataloader", "device", "data")}
        steps = out["batches"] or 1
        out["events_per_step"] = round(sum(seen[c] for c in ("compute", "dataloader", "device", "data")) / steps, 2)
        out["bytes_per_step"] = round(out["bytes"] / steps, 1)
    return out


def analyze(recipe: Recipe, annotated: Path, argv: list[str], work: Path) -> dict:
    """``dftpass trace`` + ``dftpass analyze`` of the annotated program, as a user would run
    them: the verdict, the per-phase figures, the causes and the proposals."""
    out = work / "out-analyzed"
    out.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.startswith("DFTRACER_")}
    env.update(OMP_NUM_THREADS="1", PYTHONPATH=str(annotated))
    cmd = [ARGS.python, str(annotated / argv[0]), *[a.format(out=out) for a in argv[1:]]]
    cwd = annotated if recipe.cwd == "project" else out
    if recipe.bound_s:  # Ctrl-C after the bound, as run_once does
        cmd = ["timeout", "-s", "INT", str(recipe.bound_s), *cmd]
    trace = [*DFTPASS, "-q", "trace", "--label", "analyzed", "--workspace", str(work / "ws"), "--cwd", str(cwd), "--",
             *cmd]
    subprocess.run(trace, env=env, capture_output=True, text=True)
    done = subprocess.run([*DFTPASS, "-q", "analyze", str(work / "ws" / "analyzed"), "--project", str(annotated),
                           "--json"], env=env, capture_output=True, text=True)
    try:
        data = json.loads(done.stdout)
    except ValueError:
        return {"error": (done.stderr or done.stdout)[-2000:]}
    diagnosis = data.get("diagnosis") or {}
    return {"bottleneck": diagnosis.get("bottleneck"), "top_cause": diagnosis.get("top_cause"),
            "phases": {name: {k: p.get(k) for k in ("verdict", "reason", "span_s", "compute_s", "fetch_wait_s",
                                                    "loading_main_s", "loading_workers_s")}
                       for name, p in ((data.get("overlap") or {}).get("phases") or {}).items()},
            "accounting": data.get("time_accounting"),
            "findings": [f["message"] for f in data.get("findings", []) if f["rule"] in ("ML-R15", "ML-R24")],
            "proposals": [{k: p.get(k) for k in ("id", "title", "app_impact_pct", "preconditions", "estimate")}
                          for p in data.get("proposals", [])],
            "not_applicable": [v for v in data.get("checklist", []) if str(v.get("verdict", "")).startswith("not")]}


def program(name: str) -> int:
    recipe = RECIPES[name]
    work = Path(tempfile.mkdtemp(prefix=f"dftpass-{name}-"))
    original = work / "original"
    shutil.copytree(Path(ARGS.checkout) / recipe.folder, original, ignore=shutil.ignore_patterns("__pycache__", ".git"))
    argv = recipe.setup(work, original) + list(ARGS.arg)
    annotated = work / "annotated"
    annotation = subprocess.run([*DFTPASS, "run", str(original), "--out", str(annotated), *ARGS.dftpass_arg],
                                check=True, capture_output=True, text=True)
    own = own_checks(annotated)
    for generated in original.glob("data/*/*.bin"):  # nanoGPT's prepared tokens
        shutil.copy2(generated, annotated / generated.relative_to(original))
    for generated in original.glob("data/*/meta.pkl"):
        shutil.copy2(generated, annotated / generated.relative_to(original))
    runs: dict[str, dict] = {}
    labels = [("original", original, False), ("off", annotated, False), ("on", annotated, True)]
    if ARGS.sample_every:
        labels.append(("sampled", annotated, True))
    for repeat in range(ARGS.repeat):  # alternating, so the machine's noise falls on all of them alike
        for label, project, traced in (labels if repeat % 2 == 0 else labels[::-1]):
            out = work / f"out-{label}-{repeat}"
            trace = work / f"trace-{label}-{repeat}" if traced else None
            text, code, seconds = run_once(recipe, project, argv, out, trace,
                                           ARGS.sample_every if label == "sampled" else None)
            lines = [TIMINGS.sub("", line).rstrip() for line in text.splitlines() if re.search(recipe.lines, line)]
            run = runs.setdefault(label, {"lines": lines, "exit": [], "seconds": [], "out": out})
            run["exit"].append(code)
            run["seconds"].append(seconds)
    base = runs["original"]
    report: dict = {"program": name, "work": str(work), "annotation": annotation.stderr.strip().splitlines(),
                    "own_checks": own,
                    "lines_compared": len(base["lines"]),
                    "original": {"exit": base["exit"], "median_s": round(statistics.median(base["seconds"]), 2)}}
    for label in [name for name, _, _ in labels[1:]]:
        run = runs[label]
        n = min(len(base["lines"]), len(run["lines"])) if recipe.bound_s else len(base["lines"])
        report[label] = {
            "same_lines": n > 0 and base["lines"][:n] == run["lines"][:n] and (
                recipe.bound_s is not None or len(run["lines"]) == n),
            "same_files": all((run["out"] / f).read_bytes() == (base["out"] / f).read_bytes() for f in recipe.files),
            "exit": run["exit"], "median_s": round(statistics.median(run["seconds"]), 2)}
        # the run against the original of the same round (alternating): median [range] of the ratios
        ratios = sorted(a / b for a, b in zip(run["seconds"], base["seconds"]))
        report[label]["vs_original"] = {"median": round(statistics.median(ratios), 3),
                                        "range": [round(ratios[0], 3), round(ratios[-1], 3)]}
        if label in ("on", "sampled"):
            report[label]["trace"] = read_trace(work / f"trace-{label}-0")
    report["trace"] = read_trace(work / "trace-on-0")
    if ARGS.analyze:
        report["analysis"] = analyze(recipe, annotated, argv, work)
    print(json.dumps(report, indent=2))
    ok = all(report[label]["same_lines"] and report[label]["same_files"] for label, _, _ in labels[1:])
    return 0 if ok and own["validate_exit"] == 0 and not own["second_run_changed"] else 1


def own_checks(annotated: Path) -> dict:
    """dftpass's own output passes its own checks: ``validate`` exits 0, and a second ``run``
    on the annotated copy exits 0 and changes no file (run before any data is copied in)."""
    check = subprocess.run([*DFTPASS, "validate", str(annotated)], capture_output=True, text=True)
    again = annotated.with_name(annotated.name + "-again")
    rerun = subprocess.run([*DFTPASS, "run", str(annotated), "--out", str(again), "-q"], capture_output=True, text=True)
    changed = sorted(str(p.relative_to(again)) for p in again.rglob("*.py")
                     if p.read_bytes() != (annotated / p.relative_to(again)).read_bytes())
    shutil.rmtree(again, ignore_errors=True)
    return {"validate_exit": check.returncode,
            "validate_problems": [ln for ln in check.stdout.splitlines() if ": warning: " in ln or ": error: " in ln],
            "second_run_exit": rerun.returncode, "second_run_changed": changed}


# -- libraries ------------------------------------------------------------------------------------

def measured(cmd: list[str]) -> tuple[int, float, int, str, str]:
    """(exit code, seconds, peak RSS in MB of the main process, stdout, stderr) of one command.
    Worker processes (--jobs) are not counted: the main process holds every summary."""
    start = time.perf_counter()
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(cmd, stdout=out, stderr=err)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return (proc.returncode, time.perf_counter() - start, usage.ru_maxrss // 1024,
                out.read().decode(errors="replace"), err.read().decode(errors="replace"))


def library(spec: str) -> dict:
    work = Path(tempfile.mkdtemp(prefix="dftpass-lib-"))
    subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(work / "dl"), spec],
                   check=True)
    [archive] = list((work / "dl").iterdir())
    src = work / "src"
    if archive.suffix == ".whl":
        shutil.unpack_archive(str(archive), str(src), "zip")
    else:
        shutil.unpack_archive(str(archive), str(src))
    row = {"library": archive.name}
    for step, argv in (("run", ["run", str(src), "--out", str(work / "out"), "--jobs", str(ARGS.jobs)]),
                       ("validate", ["validate", str(work / "out"), "--jobs", str(ARGS.jobs)])):
        code, seconds, peak_mb, out, err = measured([*DFTPASS, *argv])
        row[step] = {"exit": code, "seconds": round(seconds, 1), "peak_rss_mb": peak_mb,
                     "summary": (err.strip().splitlines() or [""])[-1][:200],
                     "errors": [line for line in out.splitlines() + err.splitlines() if ": error:" in line]}
    shutil.rmtree(work, ignore_errors=True)
    return row


def main() -> int:
    global ARGS
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="what", required=True)
    p = sub.add_parser("program")
    p.add_argument("name", choices=sorted(RECIPES))
    p.add_argument("--checkout", required=True, help="the project's checkout (fetched outside the repository)")
    p.add_argument("--python", default=sys.executable, help="the interpreter that has torch (and torchvision)")
    p.add_argument("--repeat", type=int, default=1, help="alternating repeats (medians of the times)")
    p.add_argument("--sample-every", type=int, default=None, help="also a traced run with the step regions of "
                   "1 step in K (the runtime's gate): its time, its trace, its same outputs")
    p.add_argument("--arg", action="append", default=[], help="an argument added to the program's (repeatable; "
                   "minGPT: --arg=--trainer.num_workers=2)")
    p.add_argument("--dftpass-arg", action="append", default=[], help="an option added to `dftpass run` "
                   "(repeatable; `--dftpass-arg=--step-time=0.005`)")
    p.add_argument("--analyze", action="store_true", help="also `dftpass trace` and `dftpass analyze` the annotated "
                   "program and print the verdict, causes and proposals")
    lib = sub.add_parser("library")
    lib.add_argument("specs", nargs="+", help="package-index requirements (transformers, torch==2.13.0)")
    lib.add_argument("--jobs", type=int, default=2)
    lib.add_argument("--max-rss-mb", type=int, default=None, help="fail when run's peak RSS is above this")
    ARGS = parser.parse_args()
    if ARGS.what == "program":
        return program(ARGS.name)
    failed = 0
    for spec in ARGS.specs:
        row = library(spec)
        print(json.dumps(row, indent=2), flush=True)
        # a file the running Python cannot parse (torch ships one in 3.12 syntax) is the
        # input's problem, reported and left alone; any other error is dftpass's
        own = [e for e in row["validate"]["errors"] if not INPUT_ERRORS.search(e)]
        failed += bool(own) or row["validate"]["exit"] > 1
        if ARGS.max_rss_mb is not None and row["run"]["peak_rss_mb"] > ARGS.max_rss_mb:
            print(f"run's peak RSS {row['run']['peak_rss_mb']} MB is above {ARGS.max_rss_mb} MB", file=sys.stderr)
            failed += 1
    return 1 if failed else 0


ARGS = argparse.Namespace()

if __name__ == "__main__":
    sys.exit(main())
