"""What dftpass's regions cost a training loop, per rule group, with tracing off and on.

    python bench/overhead.py [--repeats 5] [--steps-ms 1 10] [--max-on-pct 3] [--max-off-pct 0.5]

A small real training program (torch, CPU, one thread, in-memory data set, a DataLoader, a
checkpoint per epoch, argparse) is generated with a step of about 1 ms and of about 10 ms
(a matmul sized on this machine). It is annotated with growing rule groups:

    lifecycle   ML-R1 only (initialize, root region, finalize)
    ai          + the AI regions (phases, epochs, batches, forward/backward/step, items,
                  metadata, checkpoints, transfers, workers)
    generic     + ML-R19 (dft_fn regions that clear the cost estimator)
    io          + the I/O phases (ML-R25/26/27): every default rule

Each variant runs with tracing off and on; the program reports the time of its training
loop (start-up excluded), and the figure is the median over alternating repeats, against
the original program's median from the same rounds. The fixed cost per process (the
import of dftracer, with and without dftpass's import prelude) is measured the same way.

Exits 1 when a group exceeds ``--max-on-pct`` / ``--max-off-pct`` (the compass: 3 % on,
0.5 % off).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

DFTPASS = [sys.executable, "-m", "dftpass"]

PROGRAM = '''"""A small training program for bench/overhead.py (generated)."""
import argparse
import os
import time

import torch
from torch.utils.data import DataLoader, Dataset


class Pairs(Dataset):
    def __init__(self, n, dim):
        g = torch.Generator().manual_seed(0)
        self.x = torch.randn(n, dim, generator=g)
        self.y = torch.randn(n, 1, generator=g)

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        return self.x[i], self.y[i]


class Net(torch.nn.Module):
    def __init__(self, dim, width, depth):
        super().__init__()
        self.layers = torch.nn.Sequential(*[torch.nn.Linear(dim if k == 0 else width, width) for k in range(depth)])
        self.head = torch.nn.Linear(width, 1)

    def forward(self, x):
        return self.head(torch.relu(self.layers(x)))


def save_checkpoint(model, optimizer, epoch, path):
    torch.save({"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch}, path)


def train(model, loader, optimizer, device, epoch):
    model.train()
    total = 0.0
    for step, (x, y) in enumerate(loader):
        x, y = x.to(device), y.to(device)
        optimizer.zero_grad()
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        optimizer.step()
        total += loss.item()
    return total


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--steps", type=int, default=100)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--depth", type=int, default=2)
    parser.add_argument("--epochs", type=int, default=3)
    parser.add_argument("--out", default="ckpt")
    args = parser.parse_args()
    torch.set_num_threads(1)
    torch.manual_seed(0)
    device = torch.device("cpu")
    batch = 16
    data = Pairs(args.steps * batch, args.width)
    loader = DataLoader(data, batch_size=batch, shuffle=False)
    model = Net(args.width, args.width, args.depth).to(device)
    optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
    os.makedirs(args.out, exist_ok=True)
    start = time.perf_counter()
    for epoch in range(args.epochs):
        total = train(model, loader, optimizer, device, epoch)
        save_checkpoint(model, optimizer, epoch, os.path.join(args.out, "last.pt"))
    print("LOOP_S", time.perf_counter() - start)
    print("LOSS", total)


if __name__ == "__main__":
    main()
'''

GROUPS = {
    "lifecycle": ["--select", "ML-R1"],
    "ai": ["--ignore", "ML-R19", "--ignore", "ML-R25", "--ignore", "ML-R26", "--ignore", "ML-R27"],
    "generic": ["--ignore", "ML-R25", "--ignore", "ML-R26", "--ignore", "ML-R27"],
    "io": [],
}
IMPORTS = {
    "torch": "import torch",
    "torch + dftracer": "import torch; from dftracer.python import ai",
    "torch + dftracer, prelude": None,  # filled from the emitter below
}


def width_for(step_ms: float, depth: int = 2) -> int:
    """The layer width whose training step takes about ``step_ms`` here (one thread)."""
    import torch

    torch.set_num_threads(1)
    best = 64
    for width in (64, 128, 256, 384, 512, 768, 1024, 1536, 2048, 3072):
        model = torch.nn.Sequential(*[torch.nn.Linear(width, width) for _ in range(depth)], torch.nn.Linear(width, 1))
        opt = torch.optim.SGD(model.parameters(), lr=1e-3)
        x, y = torch.randn(16, width), torch.randn(16, 1)
        times = []
        for _ in range(15):
            t = time.perf_counter()
            opt.zero_grad()
            torch.nn.functional.mse_loss(model(x), y).backward()
            opt.step()
            times.append(time.perf_counter() - t)
        if statistics.median(times[5:]) * 1000 > step_ms:
            break
        best = width
    return best


def run(cmd: list[str], env: dict | None = None, cwd: Path | None = None) -> tuple[float, float, str]:
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{proc.stdout}\n{proc.stderr}")
    loop = next((float(line.split()[1]) for line in proc.stdout.splitlines() if line.startswith("LOOP_S")), wall)
    return loop, wall, proc.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps-ms", type=float, nargs="+", default=[1.0, 10.0])
    ap.add_argument("--max-on-pct", type=float, default=None)
    ap.add_argument("--max-off-pct", type=float, default=None)
    ap.add_argument("--keep", help="keep the generated programs and traces in this folder")
    args = ap.parse_args()

    from dftpass.core.emitter import IMPORT_PRELUDE, traced_env

    IMPORTS["torch + dftracer, prelude"] = f"import torch; {IMPORT_PRELUDE}; from dftracer.python import ai"
    work = Path(args.keep or tempfile.mkdtemp(prefix="dftpass-overhead-"))
    if args.keep:
        shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    src = work / "original"
    src.mkdir()
    (src / "train.py").write_text(PROGRAM)
    variants = {"original": src}
    from dftpass.plugins.builtin import PASSES

    known = {p.id for p in PASSES}
    for group, selection in GROUPS.items():
        # a rule this checkout does not have yet is left out of the selection
        selection = [a for k, a in enumerate(selection)
                     if not ((a in known) is False and a.startswith("ML-R")) and
                     not (a.startswith("--") and k + 1 < len(selection) and selection[k + 1] not in known)]
        out = work / group
        subprocess.run([*DFTPASS, "run", str(src), "--out", str(out), "-q", *selection], check=True,
                       capture_output=True)
        variants[group] = out
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("DFTRACER_")}
    failed = False

    print("## fixed cost per process (median wall of `python -c ...`, s)")
    import_times: dict[str, list[float]] = {k: [] for k in IMPORTS}
    for _ in range(args.repeats):
        for name, code in IMPORTS.items():
            _, wall, _ = run([sys.executable, "-c", code], env=base_env)
            import_times[name].append(wall)
    for name, times in import_times.items():
        print(f"  {name:28s} {statistics.median(times):6.2f}")

    for step_ms in args.steps_ms:
        width = width_for(step_ms)
        steps = max(30, int(300 / step_ms))
        prog_args = ["--steps", str(steps), "--width", str(width), "--epochs", "3"]
        loops: dict[tuple[str, str], list[float]] = {}
        results: dict[tuple[str, str], set[str]] = {}
        for r in range(args.repeats):
            for name, folder in variants.items():
                for tracing in (("off",) if name == "original" else ("off", "on")):
                    env = dict(base_env)
                    if tracing == "on":
                        env.update(traced_env(str(work / f"trace-{step_ms}-{name}-{r}" / "trace")))
                    loop, _, out = run([sys.executable, "train.py", *prog_args, "--out", str(work / "ckpt")],
                                       env=env, cwd=folder)
                    loops.setdefault((name, tracing), []).append(loop)
                    results.setdefault((name, tracing), set()).add(
                        next(line for line in out.splitlines() if line.startswith("LOSS")))
        base = statistics.median(loops[("original", "off")])
        print(f"\n## step of about {step_ms:g} ms (width {width}, {steps} steps x 3 epochs; "
              f"original loop {base:.3f} s = {base / steps / 3 * 1000:.2f} ms/step), medians of {args.repeats}")
        print("| group | tracing | loop s | overhead | same loss |")
        print("|---|---|---|---|---|")
        same = results[("original", "off")]
        for (name, tracing), times in loops.items():
            med = statistics.median(times)
            pct = (med / base - 1) * 100
            print(f"| {name} | {tracing} | {med:.3f} | {pct:+.1f}% | {'yes' if results[(name, tracing)] == same else 'NO'} |")
            limit = args.max_on_pct if tracing == "on" else args.max_off_pct
            if name != "original" and limit is not None and pct > limit:
                failed = True
            if results[(name, tracing)] != same:
                failed = True
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
