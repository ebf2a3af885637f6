"""The bottleneck zoo, measured: what dftpass concludes on programs whose bottleneck is known.

    python bench/zoo.py [--repeat 3] [--cases io_workers0 eval_bound ...] [--keep DIR]

Annotates ``fixtures/apps/zoo`` once, traces every case ``--repeat`` times (the analysis
shows the median repeat) and prints:

1. the confusion table: expected bottleneck (rows) x reported bottleneck (columns), and each
   case's fields (phase, overlap label, top cause, first proposal) expected against reported;
2. for the cases with a ``fix`` (``io_workers0``, ``workers_respawn``, ``eval_bound``): the
   first proposal applied for real (``dftpass trace --applies``), and ``dftpass compare``'s
   estimate beside what was measured, in seconds of the bottleneck's own metric, of the
   traced span and of the wall time (medians over the repeats of each side);
3. per case and phase, the batches its loops received and their throughput (batches/s): the
   figure the tests only compare in direction (eval_bound: training faster than evaluation),
   since its ratio moves with the machine's load.

Exits 1 when a case's verdict differs from its expected file. Uses tests/zoo/runner.py, the
same code the tests use, so the table is what the tests assert.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from tests.zoo import runner as R  # noqa: E402


def confusion(rows: list[tuple[str, dict, dict]]) -> str:
    kinds = sorted({want["bottleneck"] for _, want, _ in rows} | {got["bottleneck"] or "-" for _, _, got in rows})
    counts = Counter((want["bottleneck"], got["bottleneck"] or "-") for _, want, got in rows)
    lines = ["| expected \\ reported | " + " | ".join(kinds) + " |", "|---|" + "---|" * len(kinds)]
    for k in kinds:
        if not any(want["bottleneck"] == k for _, want, _ in rows):
            continue
        lines.append(f"| {k} | " + " | ".join(str(counts.get((k, c), "")) for c in kinds) + " |")
    return "\n".join(lines)


def fields(rows: list[tuple[str, dict, dict]]) -> str:
    lines = ["| case | " + " | ".join(R.FIELDS) + " |", "|---|" + "---|" * len(R.FIELDS)]
    for case, want, got in rows:
        cells = []
        for f in R.FIELDS:
            ok = R.matches(f, want[f], got[f])
            cells.append(f"{got[f]}" if ok else f"**{got[f]}** (expected {want[f]})")
        lines.append(f"| {case} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


@contextlib.contextmanager
def _quiet_programs():
    """The traced programs print their losses on the inherited stdout: keep them out of the tables."""
    sys.stdout.flush()
    saved = os.dup(1)
    with open(os.devnull, "w") as devnull:
        os.dup2(devnull.fileno(), 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)


def _pct(value, wall):
    return f"{value:.3f} s ({100 * value / wall:.1f}%)" if value is not None and wall else "-"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cases", nargs="+", default=None)
    ap.add_argument("--keep", help="keep the annotated zoo and the workspace in this folder")
    args = ap.parse_args()
    work = Path(args.keep or tempfile.mkdtemp(prefix="dftpass-zoo-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        with _quiet_programs():
            rows, fixes = _run_cases(args, work)
        return _print_tables(args, rows, fixes)
    finally:
        if not args.keep:
            shutil.rmtree(work, ignore_errors=True)


def _run_cases(args, work: Path) -> tuple[list, list]:
    annotated = R.annotate(work / "zoo-dftpass") if not (work / "zoo-dftpass").is_dir() else work / "zoo-dftpass"
    ws = work / "ws"
    rows, fixes = [], []
    for case in args.cases or R.cases():
        start = time.perf_counter()
        analysis = R.analyze(R.trace(annotated, ws, case, repeat=args.repeat))
        got, want = R.reported(analysis), R.expected(case)
        rows.append((case, want, got, (analysis.get("overlap") or {}).get("phases") or {}))
        print(f"{case}: {got} ({time.perf_counter() - start:.1f} s)", file=sys.stderr, flush=True)
        fix = R.fix_args(case, analysis)
        if fix:
            first = analysis["proposals"][0]
            fixed = R.trace(annotated, ws, case, label=f"{case}-fixed", extra=tuple(fix),
                            applies=(first["id"],), repeat=args.repeat)
            R.analyze(fixed)
            [impact] = R.compare(ws / case, fixed)["proposal_impacts"]
            same = R.results(ws, f"{case}-fixed")["history"] == R.results(ws, case)["history"]
            fixes.append((case, " ".join(fix), analysis, impact, same))
    return rows, fixes


def throughput(rows: list) -> str:
    lines = ["| case | phase | batches | batches/s |", "|---|---|---|---|"]
    for case, _, _, phases in rows:
        for phase, figures in phases.items():
            if figures.get("batches"):
                rate = figures.get("batches_per_s")
                lines.append(f"| {case} | {phase} | {figures['batches']} | {f'{rate:.1f}' if rate else '-'} |")
    return "\n".join(lines)


def _print_tables(args, rows: list, fixes: list) -> int:
    print(f"## Confusion table ({len(rows)} cases, {args.repeat} repeats each, the median repeat judged)\n")
    print(confusion([row[:3] for row in rows]))
    print("\n" + fields([row[:3] for row in rows]))
    print("\n## Proposals applied for real (medians of the repeats of each side)\n")
    print("| case | proposal | change | metric | estimated | measured (metric) | traced span | wall time "
          "| same losses |")
    print("|---|---|---|---|---|---|---|---|---|")
    for case, fix, analysis, impact, same in fixes:
        wall = analysis["metrics"].get("wall_s")
        print(f"| {case} | {impact['proposal']} | `{fix}` | {impact.get('metric')} "
              f"| {_pct(impact.get('estimated_saved_s'), wall)} | {_pct(impact.get('measured_saved_s'), wall)} "
              f"| {_pct(impact.get('span_saved_s'), wall)} | {_pct(impact.get('wall_saved_s'), wall)} "
              f"| {'yes' if same else 'NO'} |")
    for case, _, _, impact, _ in fixes:
        print(f"\n{case}: {impact['formula']}")
    print("\n## Throughput per phase (the median repeat)\n")
    print(throughput(rows))
    wrong = [case for case, want, got, _ in rows if any(not R.matches(f, want[f], got[f]) for f in R.FIELDS)]
    if wrong:
        print(f"\nverdicts that differ from their expected file: {', '.join(wrong)}")
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
