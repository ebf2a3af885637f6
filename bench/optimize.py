"""``dftpass optimize`` on the bottleneck zoo: what it keeps, what it reverts, and what it measured.

    python bench/optimize.py [--repeat 5] [--max-attempts 2] [--cases io_workers0 ...] [--keep DIR]

For every zoo case whose first proposal has a mechanical form, and for the three traps
(augmentation from the global RNG, a loss threshold, an unseeded program), runs
``dftpass optimize`` through the real CLI and prints one row per attempt: the decision, the
estimate, the measured change of the median wall time, of the program's time (its root
region) and of the steady state (the epochs after the first), each with the noise between
repeats, and the same-work and same-output verdicts. Then the loop's own cost: the seconds
spent beyond the runs it made (annotation, analysis, judging).

Exits 1 when a case's decision is not the one it is built for (EXPECT).
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
ZOO = ROOT / "fixtures" / "apps" / "zoo"

#: case -> (script, arguments, what optimize must do with the first attempt)
CASES = {
    "io_workers0": None, "io_workers1": None, "workers_respawn": None, "spawn_workers": None,
    "preprocess_bound": None,
    # num_workers=2 on the evaluation loader: same work and output, but on 2 cores its workers'
    # start and shutdown cost what they save (program -4.7% ±8.8, training epochs +11.7% ±9.8)
    "eval_bound": ("eval_bound.py", ["--epochs", "2"], "reverted: time"),
    "augment_global_rng": ("augment_global_rng.py", [], "reverted: outputs"),
    "loss_threshold": ("loss_threshold.py", [], "reverted: work"),
    "unseeded": ("unseeded.py", [], "stopped"),
}
EXPECT_KEPT = "kept"


def case(name: str) -> tuple[str, list[str], str]:
    if CASES[name] is not None:
        return CASES[name]
    want = yaml.safe_load((ZOO / f"{name}.expected.yaml").read_text())
    return want.get("script", f"{name}.py"), [str(a) for a in want["args"]], EXPECT_KEPT


def decision(doc: dict) -> str:
    if not doc["attempts"]:
        return "stopped"
    first = doc["attempts"][0]
    if first["kept"]:
        return "kept"
    if first["same_work"] is False:
        return "reverted: work"
    if first["outputs_same"] is False:
        return "reverted: outputs"
    return "reverted: time"


def _pct(timing: dict | None, key: str) -> str:
    s = (timing or {}).get(key)
    if not s or s.get("change_pct") is None:
        return "-"
    return f"{s['change_pct']:+.1f}% ±{s['noise_pct']:.1f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--max-attempts", type=int, default=2)
    ap.add_argument("--cases", nargs="*", default=list(CASES))
    ap.add_argument("--keep", type=Path, help="keep the workspaces here")
    args = ap.parse_args()
    scratch = Path(args.keep or tempfile.mkdtemp(prefix="dftpass-bench-optimize-"))
    rows, wrong, overheads = [], [], []
    for name in args.cases:
        script, extra, expect = case(name)
        ws = scratch / name
        shutil.rmtree(ws, ignore_errors=True)
        cmd = [sys.executable, "-m", "dftpass", "-q", "optimize", str(ZOO), "--workspace", str(ws), "--repeat",
               str(args.repeat), "--max-attempts", str(args.max_attempts), "--", sys.executable, script,
               "--data", str(scratch / "data"), "--out", "out", *extra]
        subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=False)
        doc = json.loads((ws / "optimize.json").read_text())
        got = decision(doc)
        if got != expect:
            wrong.append(f"{name}: expected {expect}, got {got}")
        overheads.append((name, doc["overhead"]["runs"], doc["overhead"]["runs_s"], doc["overhead"]["beyond_runs_s"]))
        if not doc["attempts"]:
            rows.append(f"| {name} | - | stopped | - | - | - | - | - | - |")
        for a in doc["attempts"]:
            t = a.get("timing") or {}
            est = "-" if a["estimate_pct"] is None else f"{a['estimate_pct']:+.1f}%"
            rows.append(f"| {name} | {a['proposal']} | {'kept' if a['kept'] else 'reverted'} | {est} | "
                        f"{_pct(t, 'wall')} | {_pct(t, 'program')} | {_pct(t, 'steady')} | {a['same_work']} | "
                        f"{a['outputs_same']} |")
        print(f"{name}: {got} ({doc['seconds']:.0f} s)", file=sys.stderr, flush=True)
    print(f"repeats per side: {args.repeat}; changes are of the medians, after vs before (negative: faster), "
          "± the noise (the larger IQR of the two sides)\n")
    print("| case | proposal | decision | estimate | wall | program | steady state | same work | same output |")
    print("|---|---|---|---|---|---|---|---|---|")
    print("\n".join(rows))
    print("\n| case | runs | seconds in runs | seconds beyond the runs |\n|---|---|---|---|")
    for name, runs, in_runs, beyond in overheads:
        print(f"| {name} | {runs} | {in_runs:.1f} | {beyond:.1f} |")
    for w in wrong:
        print(f"WRONG: {w}", file=sys.stderr)
    return 1 if wrong else 0


if __name__ == "__main__":
    sys.exit(main())
