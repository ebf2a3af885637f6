"""dftpass against an expert: a project annotated by hand, stripped, annotated again by dftpass.

    python bench/expert.py CHECKOUT [--set project.kind=program] [--show-missed KIND]
    python bench/expert.py --expert bench/experts/NAME.csv PROGRAM_ROOT [--show-missed all]
    python bench/expert.py --scoreboard CHECKOUTS   # every bench/experts/*.csv, CHECKOUTS/NAME each

The second form scores dftpass against an annotation written by hand into a CSV file
(bench/experts/README.md): the bare program is annotated by ``dftpass run`` and compared with
the CSV, counted only in the files and on the labels the expert used (``generic`` is out of
scope: the scoreboard measures the ai.* regions). It also prints the lines dftpass changed
(``diff`` of the copy against the original, added + removed), the figure issue 30 holds
against the expert's size.

``CHECKOUT`` is a project whose authors annotated it with dftracer by hand (the DLIO
benchmark is the canonical one: ``rules.md``, reference patterns). The script copies it to a
scratch folder, takes every dftracer annotation out (``dftpass strip --all``), annotates the
bare copy with ``dftpass run``, and compares the two inventories of regions per function:

    kind            what counts
    root            ``@ai`` / ``with ai:`` / ``ai.start()``
    pipeline.*      ``@ai.pipeline.train`` ..., epoch loops (``epoch.iter`` or ``with ai.pipeline.epoch``)
    compute.*       ``@ai.compute`` and its children, ``with`` and start/stop alike
    dataloader      ``fetch.iter`` / ``fetch.start`` / ``@ai.dataloader.fetch``
    data.*          item, preprocess, collate, ``data.io.*``
    checkpoint.*    capture, restart, init, ``checkpoint.io.*``
    comm.*, device  collectives, transfers
    generic         ``@dlp.log`` / ``@dlp.log_init`` (any ``dft_fn`` logger)
    image_size      ``X.update(image_size=...)``
    step            ``ai.update(step=...)`` (or a subtree's ``update``)

A region matches when the same function (file and qualified name) has the same kind in
both. Per kind: the expert's count, dftpass's, the matches, recall (matched / expert) and
precision (matched / dftpass). Nothing is written inside the repository.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path
from typing import Iterable

DFTPASS = [sys.executable, "-m", "dftpass"]

#: construct path (as emitter.recognize returns it) -> the kind compared
_METHODS = ("iter", "start", "stop", "update", "log", "log_init", "log_static")


def kind_of(path: str, keywords: tuple = ()) -> str | None:
    """The compared kind of one recognised construct, or None for what is not a region."""
    if path.startswith("dftracer.") or path in ("dftracer", "module"):
        return None  # initialize_log, finalize, metadata: lifecycle, not regions
    if path.startswith("dft_fn"):
        return "generic" if path.rsplit(".", 1)[-1].startswith("log") else None
    node, _, method = path.rpartition(".")
    if method not in _METHODS:
        node, method = path, ""
    if method == "update":
        names = {k for k, _ in keywords}
        if "image_size" in names:
            # the size of a read or a sample; a checkpoint's is part of its checkpoint.io region
            return None if node.startswith("checkpoint") else "image_size"
        # the batch loop's update (step=...); an epoch loop's update(epoch=...) alone is no step
        return "step" if "step" in names else None
    if method == "stop":
        return None  # the start of the same region counted it
    # ``@ai.data.preprocess.derive(name="collate")``: recognised as ``data.preprocess.derive``
    # (it was compared as that, which no expert label is: collate regions were never counted)
    node = node.replace(".derive()", ".collate")
    if node == "data.preprocess.derive":
        return "data.collate"
    if node == "":
        return "root"
    if node.startswith("dataloader"):
        return "dataloader"
    if node.startswith(("data.io", "checkpoint.io", "other.io")):
        return node.rsplit(".", 1)[0]  # data.io.read -> data.io
    return node


def inventory(root: Path) -> Counter:
    """``(relpath, qualname, kind) -> count`` of the dftracer regions in a tree."""
    from dftpass.core.callgraph import build_callgraph
    from dftpass.core.config import load_config
    from dftpass.core.project import Project
    from dftpass.core.emitter import runtime_call
    from dftpass.plugins.checks.regions import module_loggers, region_of

    config = load_config(root)
    project = Project.discover(root, config.get("files.include"), config.exclude_globs())
    project.load(config.get("files.max-bytes"), jobs=1)
    build_callgraph(project.summaries(), project.console_scripts())  # resolves re-exported names
    found: Counter = Counter()
    for fs in project.summaries():
        loggers = module_loggers(fs)
        for fn in fs.functions:
            # decorators, `with` items, calls (start/update/iter) and loop iterables alike
            texts = [(t, ()) for t in (*fn.decorators, *fn.withs)]
            # ``@ai.data.preprocess.derive(name=...)`` is a call the enclosing scope makes when
            # it defines the function: counted once, as the decorated function's decorator
            texts += [(c.callee, c.keywords) for c in fn.calls if not c.callee.endswith(".derive")]
            texts += [(layer.callee, ()) for loop in fn.loops for layer in loop.layers]
            for call in fn.calls:  # ``_dft_runtime.initialize(root=True)`` opens the root region
                if runtime_call(fs, call.callee) == "initialize" and ("root", "True") in call.keywords:
                    found[(fs.relpath, fn.qualname, "root")] += 1
            for text, keywords in texts:
                path = region_of(fs, text, loggers)
                kind = kind_of("" if path == "ai" else path, keywords) if path is not None else None
                if kind:
                    found[(fs.relpath, fn.qualname, kind)] += 1
    return found


#: kinds compared per file, not per function: a program has one root per entry, and ``@ai`` on
#: the ``main()`` a ``__main__`` block calls times the same span as ``ai.start()`` in that block
PER_FILE = ("root",)


def compare(expert: Counter, ours: Counter) -> dict[str, tuple[int, int, int]]:
    """Per kind: (expert, dftpass, matched) counted once per function (once per file for
    :data:`PER_FILE` kinds)."""
    by_kind: dict[str, list[set]] = defaultdict(lambda: [set(), set()])
    for (rel, qual, kind) in expert:
        by_kind[kind][0].add((rel, "" if kind in PER_FILE else qual))
    for (rel, qual, kind) in ours:
        by_kind[kind][1].add((rel, "" if kind in PER_FILE else qual))
    return {k: (len(e), len(o), len(e & o)) for k, (e, o) in sorted(by_kind.items())}


def read_expert(csv_path: Path) -> tuple[Counter, dict[str, str]]:
    """The rows of an expert CSV as an inventory, and its ``# key: value`` header."""
    import csv

    header: dict[str, str] = {}
    rows: list[str] = []
    for line in csv_path.read_text(encoding="utf-8").splitlines():
        if line.startswith("#"):
            key, _, value = line[1:].partition(":")
            header[key.strip()] = value.strip()
        elif line.strip():
            rows.append(line)
    found: Counter = Counter()
    for row in csv.DictReader(rows):
        found[(row["file"].strip(), row["function"].strip(), row["label"].strip())] += 1
    return found, header


#: the kinds the scoreboard leaves out: generic loggers are cost-gated, not the expert's ai.* regions
OUT_OF_SCOPE = ("generic",)


def scoped(expert: Counter, ours: Counter) -> Counter:
    """dftpass's inventory limited to the files and labels the expert annotated."""
    files = {rel for (rel, _, _) in expert}
    labels = {kind for (_, _, kind) in expert}
    return Counter({k: n for k, n in ours.items() if k[0] in files and k[2] in labels})


def changed_lines(original: Path, annotated: Path, files: Iterable[str] | None = None) -> int:
    """Lines added plus lines removed by the annotation (``diff -r``, dftpass's own folder left
    out); only in ``files`` (paths relative to the roots) when given."""
    if files is not None:
        total = 0
        for rel in files:
            a, b = original / rel, annotated / rel
            if a.is_file() and b.is_file():
                out = subprocess.run(["diff", str(a), str(b)], capture_output=True, text=True).stdout
                total += sum(1 for line in out.splitlines() if line[:2] in ("< ", "> "))
        return total
    out = subprocess.run(["diff", "-r", "-x", ".dftpass", "-x", "__pycache__", str(original), str(annotated)],
                         capture_output=True, text=True).stdout
    return sum(1 for line in out.splitlines() if line[:2] in ("< ", "> "))


#: the lines of a diff an expert's region costs, in its most compact form (what an expert
#: writes by hand): a decorator is one added line; a loop wrapped in ``.iter(...)`` rewrites
#: its ``for`` line (one removed, one added); a statement region is ``start()`` and ``stop()``
#: around it (two added); an ``update(...)`` is one; the root is the initialization, its
#: finalize and the root region (four). A phase or forward at module level is a statement
#: region. Each file the expert annotates adds its import line.
EXPERT_LINES = {
    "root": 4, "pipeline.epoch": 2, "dataloader": 2, "step": 1, "image_size": 1,
    "compute.backward": 2, "compute.step": 2, "device.transfer": 2, "data.io": 2, "checkpoint.io": 2,
    "other.io": 2,
}
DECORATOR_KINDS = ("compute.forward", "compute", "data.item", "data.preprocess", "data.collate",
                   "checkpoint.capture", "checkpoint.restart", "checkpoint.init", "pipeline.train",
                   "pipeline.evaluate", "pipeline.test", "generic")


def expert_lines(expert: Counter) -> int:
    """The changed lines of the expert's annotation, estimated region by region (EXPERT_LINES)."""
    total = len({rel for (rel, _, _) in expert})  # one import line a file
    for (_, qualname, kind), n in expert.items():
        if kind in DECORATOR_KINDS:
            total += n * (1 if qualname != "<module>" else 2)
        else:
            total += n * EXPERT_LINES.get(kind, 2)  # comm.* and the rest: a statement region
    return total


def _lines_without_generic(root: Path, work: Path, sets: list[str], files: set[str]) -> int:
    """The changed lines of dftpass's annotation in the expert's files, without the generic
    ``dft_fn`` regions (ML-R19) the expert's annotation leaves out as well (OUT_OF_SCOPE)."""
    out = work / "ours-no-generic"
    subprocess.run([*DFTPASS, "run", str(root), "--out", str(out), "-q", "--ignore", "ML-R19", *sets],
                   capture_output=True, text=True)
    return changed_lines(root, out, files) if out.exists() else 0


def score_program(csv_path: Path, root: Path, sets: list[str], show: list[str]) -> dict:
    """Annotate a copy of ``root`` and score it against the expert CSV; prints the table."""
    expert, header = read_expert(csv_path)
    work = Path(tempfile.mkdtemp(prefix="dftpass-expert-"))
    try:
        ours_root = work / "ours"
        run = subprocess.run([*DFTPASS, "run", str(root), "--out", str(ours_root), "-q", *sets],
                             capture_output=True, text=True)
        mine = scoped(expert, inventory(ours_root)) if ours_root.exists() else Counter()
        table = compare(expert, mine)
        e_all = sum(e for e, _, _ in table.values())
        o_all = sum(o for _, o, _ in table.values())
        m_all = sum(m for _, _, m in table.values())
        result = {"name": csv_path.stem, "source": header.get("source", "?"), "rc": run.returncode,
                  "recall": m_all / e_all if e_all else 1.0, "precision": m_all / o_all if o_all else 1.0,
                  "expert": e_all, "dftpass": o_all, "matched": m_all,
                  "changed_lines": changed_lines(root, ours_root) if ours_root.exists() else 0, "kinds": table,
                  "expert_files_lines": _lines_without_generic(root, work, sets, {rel for (rel, _, _) in expert}),
                  "expert_lines": expert_lines(expert)}
        print(f"\n## {csv_path.stem} ({result['source']}), dftpass run exit {run.returncode}")
        print("| kind | expert | dftpass | matched | recall | precision |")
        print("|---|---|---|---|---|---|")
        for kind, (e, o, m) in table.items():
            print(f"| {kind} | {e} | {o} | {m} | {m / e if e else 0:.2f} | {m / o if o else 1:.2f} |")
        print(f"| **all** | {e_all} | {o_all} | {m_all} | {result['recall']:.2f} | {result['precision']:.2f} |")
        print(f"changed lines: {result['changed_lines']} (in the expert's files {result['expert_files_lines']}; "
              f"the expert's, estimated: {result['expert_lines']})")
        for which, a, b in (("missed", expert, mine), ("extra", mine, expert)):
            for kind in sorted({k for (_, _, k) in a}):
                if "all" not in show and kind not in show:
                    continue
                def keys(inv):
                    return {(r, "" if kind in PER_FILE else q) for (r, q, k) in inv if k == kind}
                only = sorted(keys(a) - keys(b))
                for rel, qual in only:
                    print(f"  {which} {kind}: {rel}: {qual}")
        return result
    finally:
        shutil.rmtree(work, ignore_errors=True)


def scoreboard(checkouts: Path, sets: list[str], show: list[str]) -> int:
    """Every expert CSV against its program (``CHECKOUTS/NAME``), then one summary table."""
    results = []
    for csv_path in sorted(Path(__file__).parent.joinpath("experts").glob("*.csv")):
        # CHECKOUTS/NAME is the repository; the CSV's ``# root:`` names the program's folder in it
        root = checkouts / csv_path.stem / read_expert(csv_path)[1].get("root", ".")
        if not root.is_dir():
            print(f"{csv_path.stem}: no checkout at {root} (fetch it at the commit the CSV names)")
            continue
        results.append(score_program(csv_path, root, sets, show))
    print("\n| program | expert regions | dftpass (scoped) | recall | precision | changed lines | in the expert's "
          "files, no generic regions | the expert's (estimated) | ratio |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in results:
        ratio = r["expert_files_lines"] / r["expert_lines"] if r["expert_lines"] else 0
        print(f"| {r['name']} | {r['expert']} | {r['dftpass']} | {r['recall']:.2f} | {r['precision']:.2f} "
              f"| {r['changed_lines']} | {r['expert_files_lines']} | {r['expert_lines']} | {ratio:.2f} |")
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("checkout", type=Path)
    ap.add_argument("--expert", type=Path, help="an expert CSV (bench/experts/): score CHECKOUT, the program root")
    ap.add_argument("--scoreboard", action="store_true", help="CHECKOUT holds one folder per expert CSV")
    ap.add_argument("--set", action="append", default=[], help="passed to dftpass run (KEY=VALUE)")
    ap.add_argument("--show-missed", action="append", default=[], metavar="KIND",
                    help="list the functions of this kind the expert annotated and dftpass did not")
    ap.add_argument("--show-extra", action="append", default=[], metavar="KIND",
                    help="list the functions of this kind dftpass annotated and the expert did not")
    args = ap.parse_args()
    sets = [a for kv in args.set for a in ("--set", kv)]
    show = args.show_missed + args.show_extra
    if args.scoreboard:
        return scoreboard(args.checkout, sets, show)
    if args.expert:
        score_program(args.expert, args.checkout, sets, show)
        return 0

    work = Path(tempfile.mkdtemp(prefix="dftpass-expert-"))
    try:
        bare, ours = work / "bare", work / "ours"
        shutil.copytree(args.checkout, work / "expert", ignore=shutil.ignore_patterns(".git"))
        subprocess.run([*DFTPASS, "strip", str(work / "expert"), "--all", "--out", str(bare), "-q"], check=False)
        left = inventory(bare)
        if left:
            print(f"note: strip --all left {sum(left.values())} regions (counted as dftpass's below)")
        sets = [a for kv in args.set for a in ("--set", kv)]
        subprocess.run([*DFTPASS, "run", str(bare), "--out", str(ours), "-q", *sets], check=False)
        expert, mine = inventory(work / "expert"), inventory(ours)
        print(f"| kind | expert | dftpass | matched | recall | precision |")
        print("|---|---|---|---|---|---|")
        for kind, (e, o, m) in compare(expert, mine).items():
            recall = f"{m / e:.2f}" if e else "-"
            precision = f"{m / o:.2f}" if o else "-"
            print(f"| {kind} | {e} | {o} | {m} | {recall} | {precision} |")
        for kind, which, a, b in ([(k, "missed", expert, mine) for k in args.show_missed] +
                                  [(k, "extra", mine, expert) for k in args.show_extra]):
            only = sorted({(r, q) for (r, q, k) in a if k == kind} - {(r, q) for (r, q, k) in b if k == kind})
            print(f"\n{kind}, {which} ({len(only)}):")
            for rel, qual in only:
                print(f"  {rel}: {qual}")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
