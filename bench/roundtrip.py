"""A corpus round trip over large real codebases downloaded from the package index.

    python bench/roundtrip.py [--jobs 2] [SPEC | FOLDER ...]

Default corpus (~8,000 files): torch==2.13.0, transformers, keras, deepspeed, lightning,
megatron-core and timm. For each codebase, over every file dftpass considers:

1. no rule (``--ignore 'ML-R*'``): the copy is byte-identical to the source;
2. the default rules, in program mode (a library is otherwise left alone, and this measures
   the rules): every file written compiles;
3. ``validate`` of the annotated copy exits 0: dftpass's own output passes its own checks;
4. a second ``plan`` of the annotated copy changes nothing;
5. ``dftpass strip`` of the annotated copy gives back every file's original bytes.

Prints a table of counts and times; exits 1 if any file fails a check (and names it).
Sources are cached under bench/.cache/downloads (never committed).
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache" / "downloads"
DFTPASS = [sys.executable, "-m", "dftpass"]
CORPUS = ["torch==2.13.0", "transformers", "keras", "deepspeed", "lightning", "megatron-core", "timm"]


def fetch(spec: str, into: Path) -> Path:
    """The package's sources, unpacked into ``into`` (wheels preferred: their .py files are the
    library; sdists for packages that ship only those); a spec that is a folder (a checkout of a
    project that is no package, Megatron-LM's ``megatron/``, minGPT, DLIO) is copied."""
    if Path(spec).is_dir():
        shutil.copytree(spec, into, symlinks=True)
        return into
    CACHE.mkdir(parents=True, exist_ok=True)
    name = spec.split("==")[0].replace("-", "_").lower()

    def cached() -> list[Path]:
        version = spec.split("==")[1] if "==" in spec else ""
        return [p for p in CACHE.iterdir() if p.name.replace("-", "_").lower().startswith(f"{name}_{version}")]

    if not cached():
        subprocess.run([sys.executable, "-m", "pip", "download", "--no-deps", "-q", "-d", str(CACHE), spec],
                       check=True)
    archive = sorted(cached(), key=lambda p: (p.suffix == ".whl", p.name))[-1]  # a wheel if there is one
    shutil.unpack_archive(str(archive), str(into), "zip" if archive.suffix == ".whl" else None)
    return into


def python_files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*.py"))
            if ".dftpass" not in p.parts and p.is_file() and not p.is_symlink()}


def dftpass(*args: str) -> tuple[int, float, str]:
    start = time.perf_counter()
    proc = subprocess.run([*DFTPASS, *args], capture_output=True, text=True, errors="replace")
    return proc.returncode, time.perf_counter() - start, proc.stdout + proc.stderr


def round_trip(spec: str, jobs: int) -> dict:
    work = Path(tempfile.mkdtemp(prefix="dftpass-roundtrip-"))
    src = fetch(spec, work / "src")
    original = python_files(src)
    row: dict = {"codebase": spec, "files": len(original), "problems": []}
    jobs_args = ["--jobs", str(jobs)]

    code, seconds, out = dftpass("run", str(src), "--out", str(work / "none"), "--ignore", "ML-R*", *jobs_args)
    same = python_files(work / "none")
    row["no_rule_s"] = round(seconds, 1)
    row["no_rule_same"] = sum(same.get(k) == v for k, v in original.items())
    row["problems"] += [f"no rule changed {k}" for k, v in original.items() if same.get(k) != v]

    code, seconds, out = dftpass("run", str(src), "--out", str(work / "ann"), "--set", "project.kind=program",
                                 *jobs_args)
    annotated = python_files(work / "ann")
    changed = [k for k, v in original.items() if annotated.get(k) != v]
    row["annotate_s"] = round(seconds, 1)
    row["edited"] = len(changed)
    not_compiling = []
    for k in changed:
        try:
            compile(annotated[k], k, "exec", dont_inherit=True)
        except (SyntaxError, ValueError):
            not_compiling.append(k)
    row["edited_compile"] = len(changed) - len(not_compiling)
    row["problems"] += [f"does not compile: {k}" for k in not_compiling]

    # dftpass's own output passes its own checks: validate exits 0 (a warning or an error on
    # what dftpass wrote or decided is a problem; notes are not)
    code, seconds, out = dftpass("validate", str(work / "ann"), "--set", "project.kind=program", *jobs_args)
    findings = [line for line in out.splitlines() if ": warning: " in line or ": error: " in line]
    row["validate_s"] = round(seconds, 1)
    row["validate_exit"] = code
    row["validate_findings"] = len(findings)
    if code != 0:
        row["problems"] += [f"validate exits {code}"] + [f"validate: {line}" for line in findings[:20]]

    code, seconds, out = dftpass("plan", str(work / "ann"), "--no-diff", "--set", "project.kind=program", *jobs_args)
    again = [line for line in out.splitlines() if ": ML-R" in line and ": warning:" not in line
             and ": error:" not in line]
    row["second_plan_s"] = round(seconds, 1)
    row["second_plan_edits"] = len(again)
    row["problems"] += [f"second run edits again: {line}" for line in again[:20]]

    code, seconds, out = dftpass("strip", str(work / "ann"), "--out", str(work / "stripped"), *jobs_args)
    stripped = python_files(work / "stripped")
    row["strip_s"] = round(seconds, 1)
    row["strip_same"] = sum(stripped.get(k) == v for k, v in original.items())
    row["problems"] += [f"strip did not give back {k}" for k, v in original.items() if stripped.get(k) != v]
    shutil.rmtree(work, ignore_errors=True)
    return row


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("specs", nargs="*", default=CORPUS)
    parser.add_argument("--jobs", type=int, default=2)
    args = parser.parse_args()
    rows = []
    for spec in args.specs:
        row = round_trip(spec, args.jobs)
        rows.append(row)
        print(f"{spec}: {row['files']} files, {row['edited']} edited; problems: {len(row['problems'])}", flush=True)
        for problem in row["problems"][:30]:
            print(f"    {problem}", flush=True)
    print()
    print("| codebase | files | no rule: same bytes | edited (compile) | validate: exit (problems) | "
          "second plan: edits | strip: same bytes | times no-rule / annotate / validate / plan / strip (s) |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['codebase']} | {r['files']} | {r['no_rule_same']} | {r['edited']} ({r['edited_compile']}) | "
              f"{r['validate_exit']} ({r['validate_findings']}) | {r['second_plan_edits']} | {r['strip_same']} | "
              f"{r['no_rule_s']} / {r['annotate_s']} / {r['validate_s']} / {r['second_plan_s']} / {r['strip_s']} |")
    total = sum(r["files"] for r in rows)
    print(f"\n{total} files in all; {sum(len(r['problems']) for r in rows)} problems")
    return 1 if any(r["problems"] for r in rows) else 0


if __name__ == "__main__":
    sys.exit(main())
