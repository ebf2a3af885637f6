"""What dftpass's regions cost a training loop, per rule group, with tracing off and on.

    python bench/overhead.py [--rounds 60] [--steps-ms 1 6] [--groups io budgeted]
                             [--max-on-pct 3] [--max-off-pct 0.5]

A small real training program (torch, CPU, one thread, in-memory data set, a DataLoader, a
checkpoint per epoch, argparse) is generated with a step of about 1 ms and of about 6 ms
(a layer width sized on this machine). It is annotated with rule groups:

    lifecycle   ML-R1 only (initialize, root region, finalize)
    ai          + the AI regions (phases, epochs, batches, forward/backward/step, items,
                  metadata, checkpoints, transfers, workers)
    generic     + ML-R19 (dft_fn regions that clear the cost estimator)
    io          + the I/O phases (ML-R25/26/27): every default rule
    budgeted    every default rule, annotated with ``--step-time`` of the step measured: the
                tracing budget (3 %) coarsens what a step writes (plugins/analyses/overhead.py)

The training loop's figure is paired: one process (tracing off, then one with tracing on)
imports the original and every variant and runs their ``train`` an epoch of ~0.1 s each in
turn, ``--rounds`` times, ABC then CBA. Each variant's epoch is set against the original's
epoch of the same round; the figure is the median of those ratios with their quartiles,
and beside it the fastest epoch against the original's fastest. Separate runs of the whole
program spread ±15-50 % here (another tenant's load moves within seconds), far more than
what is measured; turns of 0.1 s side by side meet the same machine. Every variant's loss
must equal the original's in every round.

Also printed: the fixed cost per process (the import of dftracer, with and without
dftpass's import prelude, wall time), the cost of one use of each construct in a loop of
its own, the events each variant writes a step (one traced epoch), and whether each whole
program still gives the original's loss, tracing off and on.

Exits 1 when a group exceeds ``--max-on-pct`` / ``--max-off-pct`` (the compass: 3 % on,
0.5 % off) or a loss differs.
"""

from __future__ import annotations

import argparse
import gzip
import json
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
    start, cpu = time.perf_counter(), time.process_time()
    for epoch in range(args.epochs):
        total = train(model, loader, optimizer, device, epoch)
        save_checkpoint(model, optimizer, epoch, os.path.join(args.out, "last.pt"))
    print("LOOP_S", time.perf_counter() - start)
    print("LOOP_CPU_S", time.process_time() - cpu)
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


#: a program of two files for the prelude's placement: the entry starts tracing and imports
#: a model module that gets a region (its own dftracer import)
ENTRY = '''import torch
from model import Net


def main():
    net = Net()
    for _ in range(3):
        net(torch.ones(4, 8)).sum().backward()


if __name__ == "__main__":
    main()
'''
MODEL = '''import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(8, 1)

    def forward(self, x):
        return self.fc(x)
'''


def prelude_placement(work: Path, base_env: dict, repeats: int, prelude: str) -> None:
    """The import cost of an annotated two-file program (``python -c "import prog"``) with the
    prelude in the file that starts tracing only (as dftpass writes it) and in every file that
    imports dftracer (as it wrote it before): medians with quartiles, runs interleaved."""
    src = work / "two-files"
    src.mkdir()
    (src / "prog.py").write_text(ENTRY)
    (src / "model.py").write_text(MODEL)
    entry_only = work / "two-files-entry"
    subprocess.run([*DFTPASS, "run", str(src), "--out", str(entry_only), "-q"], check=True, capture_output=True)
    every = work / "two-files-every"
    shutil.copytree(entry_only, every)
    model = (every / "model.py").read_text()
    assert prelude not in model and "from dftracer.python import" in model
    (every / "model.py").write_text(model.replace("from dftracer.python import", f"{prelude}\nfrom dftracer.python import", 1))
    times: dict[str, list[float]] = {"entry only": [], "every file": []}
    for _ in range(repeats):
        for name, folder in (("entry only", entry_only), ("every file", every)):
            wall, _ = run([sys.executable, "-c", "import prog"], env=base_env, cwd=folder)
            times[name].append(wall)
    print("\n## the import prelude's place (`python -c 'import prog'`, two files, s: median [quartiles])")
    for name, ts in times.items():
        q = statistics.quantiles(ts, n=4) if len(ts) > 1 else [ts[0]] * 3
        print(f"  prelude in {name:12s} {statistics.median(ts):6.3f} [{q[0]:.3f}, {q[2]:.3f}]")
    ratio = [a / b for a, b in zip(times["entry only"], times["every file"])]
    print(f"  entry only / every file: {statistics.median(ratio):.3f} (median of {len(ratio)} paired runs)")


CONSTRUCTS = r"""
import os, sys, time
{prelude}
from dftracer.python import ai, dftracer, env
if os.environ.get("DFTRACER_ENABLE") == "1":
    log = dftracer.initialize_log(logfile=os.environ.get("DFTRACER_LOG_FILE"), data_dir=None, process_id=-1)
N = 20000

def cost(label, f):
    times = []
    for _ in range(5):
        start = time.process_time()
        for i in range(N):
            f(i)
        times.append((time.process_time() - start) / N * 1e6)
    times.sort()
    print(f"{{label}}\t{{times[2]:.2f}}")

def region(i):
    with ai.compute.backward:
        pass

def start_stop(i):
    ai.compute.step.start()
    ai.compute.step.stop()

@ai.compute.forward
def decorated(i):
    return i

def fetch(i):
    for _ in ai.dataloader.fetch.iter(range(100)):
        pass

cost("ai.update(step=, epoch=) (the whole tree)", lambda i: ai.update(step=i, epoch=1))
cost("ai.compute/dataloader/device.update (ML-R8)", lambda i: (ai.compute.update(step=i, epoch=1),
     ai.dataloader.update(step=i, epoch=1), ai.device.update(step=i, epoch=1)))
def guarded(i):
    if env.DFTRACER_ENABLE:
        ai.compute.update(step=i, epoch=1); ai.dataloader.update(step=i, epoch=1); ai.device.update(step=i, epoch=1)

cost("the same, under `if env.DFTRACER_ENABLE:` (as emitted)", guarded)
cost("with ai.compute.backward:", region)
cost("ai.compute.step.start() / .stop()", start_stop)
cost("@ai.compute.forward call", decorated)
cost("fetch.iter, per element (x100)", lambda i: fetch(i) if i % 100 == 0 else None)
if os.environ.get("DFTRACER_ENABLE") == "1":
    log.finalize()
"""


CONSTRUCT_COSTS: dict[str, dict[str, str]] = {}


def construct_costs(work: Path, base_env: dict, prelude: str) -> None:
    """The cost of one use of each construct dftpass emits, in one process (µs, median of 5
    rounds of 20,000): precise where whole-program figures drown in the machine's noise."""
    script = work / "constructs.py"
    script.write_text(CONSTRUCTS.format(prelude=prelude))
    rows: dict[str, dict[str, str]] = {}
    for tracing in ("off", "on"):
        env = dict(base_env)
        if tracing == "on":
            from dftpass.core.emitter import traced_env

            env.update(traced_env(str(work / "trace-constructs" / "trace")))
        out = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, env=env, check=True).stdout
        for line in out.splitlines():
            label, value = line.split("\t")
            rows.setdefault(label, {})[tracing] = value
    print("\n## one use of each construct (µs, in one process)")
    CONSTRUCT_COSTS.update(rows)
    print("| construct | off | on |")
    print("|---|---|---|")
    for label, values in rows.items():
        print(f"| {label} | {values['off']} | {values['on']} |")


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


def run(cmd: list[str], env: dict | None = None, cwd: Path | None = None) -> tuple[float, str]:
    """The wall time of a command and its output."""
    start = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=cwd)
    wall = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"failed: {' '.join(cmd)}\n{proc.stdout}\n{proc.stderr}")
    return wall, proc.stdout


PAIRED = r"""
# the training loops of the variants, interleaved in one process (bench/overhead.py, generated)
import importlib.util, json, os, sys, time
{prelude}
import torch
from dftracer.python import dftracer

spec = json.loads(sys.argv[1])
log = None
if os.environ.get("DFTRACER_ENABLE") == "1":  # as ML-R1's main would
    log = dftracer.initialize_log(logfile=os.environ.get("DFTRACER_LOG_FILE"), data_dir=None, process_id=-1)
    if os.environ.get("DFTPASS_SAMPLE_EVERY"):  # as the runtime's initialize(sample_every=k) would
        from dftpass.runtime import sampling
        sampling.install(int(os.environ["DFTPASS_SAMPLE_EVERY"]), log=log)
torch.set_num_threads(1)
width, steps = spec["width"], spec["steps"]
state = {{}}
for name, path in spec["variants"].items():
    module_spec = importlib.util.spec_from_file_location(f"variant_{{name}}", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    torch.manual_seed(0)
    loader = torch.utils.data.DataLoader(module.Pairs(steps * 16, width), batch_size=16, shuffle=False)
    model = module.Net(width, width, 2)
    state[name] = (module, model, loader, torch.optim.SGD(model.parameters(), lr=1e-3))


def epoch(name, number):
    module, model, loader, optimizer = state[name]
    start = time.process_time()
    loss = module.train(model, loader, optimizer, torch.device("cpu"), number)
    return time.process_time() - start, loss


names = list(state)
for name in names:  # warm-up: allocator, caches, the lazily built parts of dftracer
    epoch(name, 0)
for r in range(spec["rounds"]):
    # ABC CBA ...: a drift of the machine's speed within a round falls on every variant alike
    for name in (names if r % 2 == 0 else names[::-1]):
        seconds, loss = epoch(name, r + 1)
        print(json.dumps({{"round": r, "variant": name, "cpu_s": seconds, "loss": loss}}), flush=True)
if log is not None:
    log.finalize()
"""


def paired(work: Path, base_env: dict, prelude: str, variants: dict[str, Path], width: int, steps: int,
           rounds: int, trace: Path | None, sample_every: int = 1) -> dict[str, list[dict]]:
    """One process runs every variant's training loop, an epoch each in turn, ``rounds`` times:
    the rows of each variant, in round order. ``sample_every``: the traced process samples its
    step regions (the gate is the process's: every variant alike)."""
    script = work / "paired.py"
    script.write_text(PAIRED.format(prelude=prelude))
    env = dict(base_env)
    if trace is not None:
        from dftpass.core.emitter import SAMPLING_ENV_EVERY, traced_env

        env.update(traced_env(str(trace / "trace")))
        if sample_every > 1:
            env[SAMPLING_ENV_EVERY] = str(sample_every)
    spec = {"width": width, "steps": steps, "rounds": rounds,
            "variants": {name: str(folder / "train.py") for name, folder in variants.items()}}
    proc = subprocess.run([sys.executable, str(script), json.dumps(spec)], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"the paired run failed:\n{proc.stdout}\n{proc.stderr}")
    rows: dict[str, list[dict]] = {name: [] for name in variants}
    for line in proc.stdout.splitlines():
        if line.startswith("{"):
            row = json.loads(line)
            rows[row["variant"]].append(row)
    return rows


def overhead(rows: dict[str, list[dict]], name: str) -> tuple[float, float, float]:
    """The median of the variant's per-round overhead against the original's epoch of the same
    round, and the quartiles of those ratios (%)."""
    ratios = sorted((v["cpu_s"] / o["cpu_s"] - 1) * 100 for v, o in zip(rows[name], rows["original"]))
    q1, _, q3 = statistics.quantiles(ratios, n=4) if len(ratios) > 1 else (ratios[0],) * 3
    return statistics.median(ratios), q1, q3


def least(rows: dict[str, list[dict]], name: str) -> float:
    """The variant's fastest epoch against the original's fastest (%): another tenant's work
    only ever adds time, so the fastest turn is the least disturbed one."""
    return (min(r["cpu_s"] for r in rows[name]) / min(r["cpu_s"] for r in rows["original"]) - 1) * 100


def trace_bytes(trace: Path) -> int:
    return sum(p.stat().st_size for p in trace.glob("*.pfw*"))


#: the totals compared between a full and a sampled trace: (cat, name), and the overlap's compute
ESTIMATED = (("compute", "forward"), ("compute", "backward"), ("compute", "step"), ("device", "transfer"),
             ("dataloader", "fetch.iter"), ("dataloader", "fetch.block"))


ESTIMATE = r"""
# full and sampled epochs of one variant, alternating in one traced process (bench/overhead.py, generated)
import importlib.util, json, os, sys
{prelude}
import torch
from dftracer.python import dftracer
from dftpass.runtime import sampling

spec = json.loads(sys.argv[1])
log = dftracer.initialize_log(logfile=os.environ.get("DFTRACER_LOG_FILE"), data_dir=None, process_id=-1)
gate = sampling.install(spec["every"], warmup=0, log=log)
torch.set_num_threads(1)
module_spec = importlib.util.spec_from_file_location("variant", spec["path"])
module = importlib.util.module_from_spec(module_spec)
module_spec.loader.exec_module(module)
torch.manual_seed(0)
loader = torch.utils.data.DataLoader(module.Pairs(spec["steps"] * 16, spec["width"]), batch_size=16, shuffle=False)
model = module.Net(spec["width"], spec["width"], 2)
optimizer = torch.optim.SGD(model.parameters(), lr=1e-3)
for r in range(2 * spec["rounds"] + 2):
    # full, sampled, sampled, full, ...: each pair meets the same machine in both orders
    gate.every = 1 if r < 2 or (r // 2 + r) % 2 == 0 else spec["every"]
    module.train(model, loader, optimizer, torch.device("cpu"), r)
    print(json.dumps({{"round": r, "every": gate.every}}), flush=True)
log.finalize()
"""


def estimate_error(work: Path, base_env: dict, prelude: str, folder: Path, width: int, steps: int, rounds: int,
                   every: int) -> dict[str, list[float]]:
    """How far a sampled epoch's estimated totals are from a full epoch's, on the same run
    pattern: one traced process runs the variant's epochs alternately with every step traced
    and with 1 step in ``every`` (the runtime's gate, switched between epochs; the first two
    epochs warm up), and each sampled epoch is set against the full epoch beside it. A sampled
    epoch's totals are its events weighed as the analysis weighs them
    (:meth:`dftpass.traces.sampling.Sampling.weights`). Per pair: (estimate / full - 1) in %,
    and the difference as a share of the full epoch's loop (wait and body)."""
    from dftpass.core.emitter import traced_env
    from dftpass.traces import summarize

    trace = work / "estimate"
    shutil.rmtree(trace, ignore_errors=True)
    script = work / "estimate.py"
    script.write_text(ESTIMATE.format(prelude=prelude))
    env = {**base_env, **traced_env(str(trace / "trace"))}
    spec = {"path": str(folder / "train.py"), "width": width, "steps": steps, "rounds": rounds, "every": every}
    proc = subprocess.run([sys.executable, str(script), json.dumps(spec)], capture_output=True, text=True, env=env)
    if proc.returncode != 0:
        raise SystemExit(f"the estimate run failed:\n{proc.stdout}\n{proc.stderr}")
    order = [json.loads(line)["every"] for line in proc.stdout.splitlines() if line.startswith("{")]
    files = sorted(trace.glob("*.pfw*"))
    sampling = summarize(files).sampling
    events = []
    for path in files:
        with (gzip.open if path.suffix == ".gz" else open)(path, "rt") as fh:
            for line in fh:
                line = line.strip().rstrip(",")
                if line.startswith("{"):
                    event = json.loads(line)
                    if "dur" in event and (event.get("cat"), event.get("name")) in ESTIMATED:
                        events.append(event)
    ts = [e["ts"] * 1000 for e in events]
    weight = sampling.weights(ts)
    passes = sorted(p for p in sampling.passes)  # one per epoch, in order
    totals: list[dict[str, float]] = []
    for (start, end, *_), _ in zip(passes, order):
        mine = {}
        for event, t, w in zip(events, ts, weight):
            if start <= t <= end:
                key = f"{event['cat']}/{event['name']}"
                mine[key] = mine.get(key, 0.0) + event["dur"] * w
        totals.append(mine)
    errors: dict[str, list[float]] = {}
    full_loop = []
    for r in range(2, len(totals) - 1, 2):
        pair = {order[r]: totals[r], order[r + 1]: totals[r + 1]}
        if set(pair) != {1, every}:
            continue
        full, est = pair[1], pair[every]
        loop = full.get("dataloader/fetch.iter", 0.0) + full.get("dataloader/fetch.block", 0.0)
        full_loop.append(loop)
        for key, value in full.items():
            if value and key in est:
                errors.setdefault(key, []).append((est[key] / value - 1) * 100)
                errors.setdefault(f"{key} (% of the loop)", []).append((est[key] - value) / loop * 100)
    return errors


def events_per_step(trace: Path, steps: int) -> float:
    """dftpass's regions in a traced run of one variant (not dftracer's own records, intercepted
    calls or metadata), per training step."""
    events = 0
    for path in trace.glob("*.pfw*"):
        opener = gzip.open if path.suffix == ".gz" else open
        with opener(path, "rt") as fh:
            for line in fh:
                line = line.strip().rstrip(",")
                if line.startswith("{"):
                    event = json.loads(line)
                    events += event.get("cat") not in (None, "dftracer", "POSIX", "STDIO") and "dur" in event
    return events / steps


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=5, help="runs of each whole program (fixed costs, same loss)")
    ap.add_argument("--rounds", type=int, default=60, help="epochs of each variant in the paired loop figure")
    ap.add_argument("--steps-ms", type=float, nargs="+", default=[1.0, 6.0])
    ap.add_argument("--max-on-pct", type=float, default=None)
    ap.add_argument("--max-off-pct", type=float, default=None)
    ap.add_argument("--max-sampled-pct", type=float, default=None, help="fail when sampled tracing costs more")
    ap.add_argument("--sample-every", type=int, default=None,
                    help="k of the sampled column (default: what the plan chooses for the measured step)")
    ap.add_argument("--estimate-pairs", type=int, default=10, help="full/sampled epoch pairs for the estimate's error")
    ap.add_argument("--max-error-pct", type=float, default=None, help="fail when a sampled total is further off")
    ap.add_argument("--skip-fixed", action="store_true", help="leave out the fixed costs and the constructs")
    ap.add_argument("--keep", help="keep the generated programs and traces in this folder")
    ap.add_argument("--groups", nargs="+", choices=[*GROUPS, "budgeted"], default=["io", "budgeted"],
                    help="the variants beside the original (default: every rule, and every rule budgeted)")
    args = ap.parse_args()

    from dftpass.core.emitter import IMPORT_PRELUDE, traced_env
    from dftpass.plugins.analyses.overhead import decide

    IMPORTS["torch + dftracer, prelude"] = f"import torch; {IMPORT_PRELUDE}; from dftracer.python import ai"
    work = Path(args.keep or tempfile.mkdtemp(prefix="dftpass-overhead-"))
    if args.keep:
        shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True, exist_ok=True)
    src = work / "original"
    src.mkdir()
    (src / "train.py").write_text(PROGRAM)
    fixed = {"original": src}
    for group, selection in ((g, s) for g, s in GROUPS.items() if g in args.groups):
        out = work / group
        subprocess.run([*DFTPASS, "run", str(src), "--out", str(out), "-q", *selection], check=True,
                       capture_output=True)
        fixed[group] = out
    base_env = {k: v for k, v in os.environ.items() if not k.startswith("DFTRACER_")}
    failed = False

    if args.skip_fixed:
        args.repeats = 0
    print("## fixed cost per process (median wall of `python -c ...`, s)")
    import_times: dict[str, list[float]] = {k: [] for k in IMPORTS}
    for _ in range(args.repeats):
        for name, code in IMPORTS.items():
            wall, _ = run([sys.executable, "-c", code], env=base_env)
            import_times[name].append(wall)
    for name, times in import_times.items():
        if times:
            print(f"  {name:28s} {statistics.median(times):6.2f}")

    if not args.skip_fixed:
        prelude_placement(work, base_env, args.repeats, IMPORT_PRELUDE)
        construct_costs(work, base_env, IMPORT_PRELUDE)

    for step_ms in args.steps_ms:
        width = width_for(step_ms)
        # ~0.1 s an epoch: the shorter the turns, the more alike the machine each variant meets
        steps = max(20, int(100 / step_ms))
        # the step the original takes in the paired loop (the width only approximates the
        # target): the budgeted variant is planned for it, as `--step-time RUN` would
        # (measured beside the other variants: alone, the same loop ran up to 1.7x slower here)
        warm = paired(work, base_env, IMPORT_PRELUDE, fixed, width, steps, 16, None)
        # the later rounds: a fresh process's first seconds run slower (page faults, caches)
        step_s = float(f"{statistics.median(r['cpu_s'] for r in warm['original'][8:]) / steps:.2g}")
        variants = dict(fixed)
        if "budgeted" in args.groups:
            budgeted = work / f"budgeted-{step_ms:g}"
            planned = subprocess.run([*DFTPASS, "run", str(src), "--out", str(budgeted), "-q", "--step-time",
                                      str(step_s), "--sample-every", "1"], check=True, capture_output=True, text=True)
            print(f"\n{next((ln for ln in planned.stderr.splitlines() if ln.startswith('overhead:')), '')}")
            variants["budgeted"] = budgeted
        decision = decide(step_s, 0.03, transfers=1, sample_every=1)  # the program moves its batch once a step
        sampled = decide(step_s, 0.03, transfers=1)
        every = args.sample_every or sampled.sample_every
        if every > 1:
            print(f"sampling: 1 step in {every}" + (" (--sample-every)" if args.sample_every else
                                                   f" (the plan for {step_s * 1e3:g} ms: {sampled.describe()})"))
        predicted = {"io": decision.full_us, "budgeted": decision.kept_us}
        modes = ("off", "on", "sampled") if every > 1 else ("off", "on")
        measured = {mode: paired(work, base_env, IMPORT_PRELUDE, variants, width, steps, args.rounds,
                                 work / f"trace-{step_ms:g}-paired-{mode}" if mode != "off" else None,
                                 sample_every=every if mode == "sampled" else 1)
                    for mode in modes}
        loop_s = statistics.median(r["cpu_s"] for r in measured["off"]["original"])
        step_us = loop_s / steps * 1e6
        print(f"\n## step of about {step_ms:g} ms (width {width}, {steps} steps an epoch; the original's "
              f"step {step_us / 1000:.2f} ms): the training loop's CPU time against the original's epoch "
              f"of the same round, median [quartiles] of {args.rounds} rounds, one process each")
        print(f"| group | events a step (sampled) | bytes a step (sampled) | predicted on | off | on | on, sampled "
              f"1 in {every} | off, least | on, least | sampled, least | µs a step, on (in situ) | same loss |")
        print("|---|---|---|---|---|---|---|---|---|---|---|---|")
        for name, folder in variants.items():
            if name == "original":
                continue
            # the events it writes: one traced epoch of this variant alone
            per_step, per_step_bytes = {}, {}
            for how, k in (("full", 1), ("sampled", every)):
                trace = work / f"trace-{step_ms:g}-{name}-{how}"
                paired(work, base_env, IMPORT_PRELUDE, {name: folder}, width, steps, 4, trace, sample_every=k)
                per_step[how] = events_per_step(trace, steps * 5)  # the warm-up epoch and four rounds
                per_step_bytes[how] = trace_bytes(trace) / (steps * 5)
            cells = {}
            for tracing in modes:
                med, q1, q3 = overhead(measured[tracing], name)
                cells[tracing] = f"{med:+.1f}% [{q1:+.1f}, {q3:+.1f}]"
                limit = {"on": args.max_on_pct, "off": args.max_off_pct, "sampled": args.max_sampled_pct}[tracing]
                failed |= limit is not None and med > limit
            same = all(v["loss"] == o["loss"] for tracing in measured
                       for v, o in zip(measured[tracing][name], measured[tracing]["original"]))
            failed |= not same
            on_us = overhead(measured["on"], name)[0] / 100 * step_us
            guess = f"{predicted[name] / step_us * 100:+.1f}%" if name in predicted else "-"
            sampled_cell = cells.get("sampled", "-")
            sampled_least = f"{least(measured['sampled'], name):+.1f}%" if "sampled" in measured else "-"
            print(f"| {name} | {per_step['full']:.1f} ({per_step['sampled']:.2f}) | {per_step_bytes['full']:.0f} "
                  f"({per_step_bytes['sampled']:.0f}) | {guess} | {cells['off']} | {cells['on']} | {sampled_cell} | "
                  f"{least(measured['off'], name):+.1f}% | {least(measured['on'], name):+.1f}% | {sampled_least} | "
                  f"{on_us:.0f} | {'yes' if same else 'NO'} |")
        if every > 1 and "io" in variants and args.estimate_pairs:
            errors = estimate_error(work, base_env, IMPORT_PRELUDE, variants["io"], width, steps,
                                    args.estimate_pairs, every)
            print(f"\nthe sampled epochs' estimated totals (1 step in {every}, weighed as the analysis weighs them) "
                  f"against the full epochs beside them, every rule, one traced process, {args.estimate_pairs} pairs: "
                  "median [range] of (estimate / full - 1), and of the difference as a share of the full epoch's loop")
            print("| total | error | of the loop |\n|---|---|---|")
            for key in [k for k in errors if not k.endswith(")")]:
                rel, loop = errors[key], errors[f"{key} (% of the loop)"]
                print(f"| {key} | {statistics.median(rel):+.1f}% [{min(rel):+.1f}, {max(rel):+.1f}] | "
                      f"{statistics.median(loop):+.2f}% [{min(loop):+.2f}, {max(loop):+.2f}] |")
                # a total that is a small part of the loop is judged by its share of the loop
                worst = statistics.median(rel) if abs(statistics.median(loop)) >= 0.5 else 0.0
                if args.max_error_pct is not None and abs(worst) > args.max_error_pct:
                    failed = True
    # every whole program still runs to the original's result, tracing off and on
    results = {}
    for name, folder in fixed.items():
        for tracing in (("off",) if name == "original" else ("off", "on")):
            env = dict(base_env)
            if tracing == "on":
                env.update(traced_env(str(work / f"trace-program-{name}" / "trace")))
            _, out = run([sys.executable, "train.py", "--steps", "30", "--out", str(work / "ckpt")], env=env,
                         cwd=folder)
            results[(name, tracing)] = next(line for line in out.splitlines() if line.startswith("LOSS"))
    same = {key: value == results[("original", "off")] for key, value in results.items()}
    print("\nwhole programs (30 steps x 3 epochs), same loss as the original: "
          + ", ".join(f"{name} {tracing} {'yes' if ok else 'NO'}" for (name, tracing), ok in same.items()))
    failed |= not all(same.values())
    if not args.keep:
        shutil.rmtree(work, ignore_errors=True)
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
