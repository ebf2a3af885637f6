"""Issue 31's first measurement: can sampled step regions use dftracer's own enable/disable,
or does dftpass need its own gate? (docs/decisions.md, "Sampled step regions: ...")

    python bench/sampling_gate.py            # the gate's cost, in this process
    python bench/sampling_gate.py --toggle   # dftpass trace this script's --traced mode and print the events

``--toggle`` runs a 12-step loop over ``ai.dataloader.fetch.iter`` (each fetch sleeps 2 ms, each
step 5 ms) under ``dftpass trace``, switching the ``dataloader`` and ``compute`` subtrees on for
one step in 4 with their ``enable()``/``disable()``, and prints each event's duration.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import timeit
from pathlib import Path


class Sampler:
    """The gate dftpass.runtime would hold: a step counter, the warm-up steps, one step in k."""

    __slots__ = ("every", "warmup", "n", "on")

    def __init__(self, every: int, warmup: int) -> None:
        self.every, self.warmup, self.n, self.on = every, warmup, 0, True

    def step(self) -> bool:
        n = self.n = self.n + 1
        self.on = n <= self.warmup or n % self.every == 0
        return self.on


def gate_cost() -> None:
    g = {"s": Sampler(8, 3)}
    per = {what: min(timeit.repeat(stmt, globals=g, number=1_000_000, repeat=5)) * 1e3  # ns a call
           for what, stmt in (("step()", "s.step()"), ("if s.on", "if s.on:\n    pass"))}
    print(" ".join(f"{what}: {ns:.0f} ns" for what, ns in per.items()))


def traced_loop() -> None:
    from dftracer.python import ai, dftracer

    log = dftracer.initialize_log(logfile=os.environ.get("DFTRACER_LOG_FILE"), data_dir=None, process_id=-1)

    def batches(n):
        for i in range(n):
            time.sleep(0.002)
            yield i

    try:
        for step, _ in enumerate(ai.dataloader.fetch.iter(batches(12))):
            traced = step % 4 == 0
            for node in (ai.dataloader, ai.compute):
                (node.enable if traced else node.disable)()
            with ai.compute:
                time.sleep(0.005)
    finally:
        ai.dataloader.enable()
        ai.compute.enable()
        log.finalize()


def toggle() -> None:
    with tempfile.TemporaryDirectory() as ws:
        subprocess.run([sys.executable, "-m", "dftpass", "-q", "trace", "--label", "t", "--workspace", ws,
                        "--no-compact", "--", sys.executable, __file__, "--traced"], check=True)
        import gzip
        for path in sorted(Path(ws).rglob("*.pfw*")):
            opener = gzip.open if path.suffix == ".gz" else open
            with opener(path, "rt") as fh:
                for line in fh:
                    line = line.strip().rstrip(",")
                    if line and line not in "[]":
                        e = json.loads(line)
                        if e.get("ph") == 1 and e.get("cat") in ("dataloader", "compute"):
                            print(f"{e['cat']:10} {e['name']:12} {e['dur'] / 1000:6.2f} ms")


if __name__ == "__main__":
    if "--traced" in sys.argv:
        traced_loop()
    elif "--toggle" in sys.argv:
        toggle()
    else:
        gate_cost()
