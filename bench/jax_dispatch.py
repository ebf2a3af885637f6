"""What ML-R14's wait changes: jitted steps timed with and without ``jax.block_until_ready``.

    python bench/jax_dispatch.py [--hidden 1536] [--repeats 3]

The Flax fixture app (``fixtures/apps/flax_nnx``) is annotated twice: as dftpass does it
(ML-R14: ``with ai.compute:`` around ``loss = train_step(...)`` and
``jax.block_until_ready(loss)`` inside), and with ML-R14 off (ML-R7 times the same call
without the wait). Both run traced (``dftpass trace``), alternately, ``--repeats`` times;
the table gives the median ``compute`` event and the median loop body (``fetch.block``,
the whole iteration) of each. Without the wait the region ends when the step is queued and
the rest of the step falls outside it (into the next ``float(loss)``). Needs the ``jax``
extra. Nothing is written inside the repository.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
APP = ROOT / "fixtures" / "apps" / "flax_nnx"
DFTPASS = [sys.executable, "-m", "dftpass"]


def durations(folder: Path) -> dict[str, list[int]]:
    out: dict[str, list[int]] = {"compute": [], "fetch.block": []}
    for path in folder.glob("*.pfw.gz"):
        with gzip.open(path, "rt") as fh:
            for line in fh:
                if not line.strip():
                    continue
                e = json.loads(line)
                if e.get("ph") != 1:
                    continue
                if e["cat"] == "compute":
                    out["compute"].append(e["dur"])
                elif e["name"] == "fetch.block":
                    out["fetch.block"].append(e["dur"])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hidden", type=int, default=1536, help="hidden width of the MLP (bigger: longer steps)")
    ap.add_argument("--repeats", type=int, default=3)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="dftpass-jax-"))
    try:
        variants = {"with the wait (ML-R14)": [], "without (ML-R14 off)": ["--ignore", "ML-R14"]}
        folders = {}
        for k, (label, extra) in enumerate(variants.items()):
            folders[label] = work / f"v{k}"
            subprocess.run([*DFTPASS, "run", str(APP), "--out", str(folders[label]), "-q", *extra], check=True)
        samples: dict[str, dict[str, list[float]]] = {label: {"compute": [], "fetch.block": []} for label in variants}
        for r in range(args.repeats):
            for k, label in enumerate(variants):
                ws = work / "ws"
                run_label = f"v{k}-{r}"
                subprocess.run([*DFTPASS, "trace", "--label", run_label, "--workspace", str(ws), "--cwd",
                                str(folders[label]), "--", sys.executable, "train.py", "--data", str(work / "data"),
                                "--out", str(work / f"out-{run_label}"), "--hidden", str(args.hidden)],
                               check=True, capture_output=True)
                found = durations(ws / run_label / "traces" / "raw" / "rep-1")
                for kind, values in found.items():
                    # the first call compiles: leave it out of the medians
                    samples[label][kind].append(statistics.median(sorted(values)[:-1]) / 1000 if values else 0.0)
        print(f"flax_nnx, hidden {args.hidden}, medians over {args.repeats} alternating runs (ms)")
        print("| variant | compute event | loop body (fetch.block) | compute / body |")
        print("|---|---|---|---|")
        for label, kinds in samples.items():
            compute, body = statistics.median(kinds["compute"]), statistics.median(kinds["fetch.block"])
            print(f"| {label} | {compute:.2f} | {body:.2f} | {compute / body:.2f} |")
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
