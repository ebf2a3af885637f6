"""Small real programs to trace, and hand-made trace files (dftracer's 2.x line format)."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

PY = sys.executable

#: a small real program: initialize, an epoch loop, a DataLoader with 2 fork workers whose
#: samples are @ai.data.item, compute regions, finalize on the way out
TINY = '''
import sys, time
import torch
from torch.utils.data import DataLoader, Dataset
from dftracer.python import ai, dftracer

log = dftracer.initialize_log(logfile=None, data_dir=None, process_id=-1)


class Items(Dataset):
    def __len__(self):
        return 16

    @ai.data.item
    def __getitem__(self, i):
        time.sleep(0.002)
        return torch.full((4,), float(i))


def main(workers):
    loader = DataLoader(Items(), batch_size=4, num_workers=workers)
    for epoch in ai.pipeline.epoch.iter(range(2), include_iter=False):
        for step, batch in enumerate(ai.dataloader.fetch.iter(loader)):
            ai.update(step=step, epoch=epoch)
            with ai.compute.forward:
                time.sleep(0.005)
                batch.sum()


try:
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 2)
finally:
    log.finalize()
'''


def write_trace(path: Path, events: list[dict], time_metric: str = "US", pid: int = 100) -> Path:
    """A dftracer 2.x trace file: metadata lines, then the given complete events (ph 1)."""
    lines = [
        {"name": "HH", "cat": "dftracer", "type": 1, "pid": pid, "tid": pid, "ph": 4,
         "args": {"hhash": "h1", "name": "node1", "value": "h1"}},
        {"name": "CM", "cat": "dftracer", "type": 1, "pid": pid, "tid": pid, "ph": 4,
         "args": {"hhash": "h1", "name": "time_metric", "value": time_metric}},
    ]
    for i, e in enumerate(events, 1):
        lines.append({"id": i, "type": 6, "pid": pid, "tid": pid, "ph": 1, "args": {"hhash": "h1"}, **e})
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(json.dumps(line, separators=(",", ":")) + "\n" for line in lines).encode()
    path.write_bytes(gzip.compress(data) if path.name.endswith(".gz") else data)
    return path


def event(cat: str, name: str, ts: int, dur: int, **args) -> dict:
    e = {"name": name, "cat": cat, "ts": ts, "dur": dur}
    if args:
        e["args"] = {"hhash": "h1", **args}
    return e



def write_trace_like(path: Path, n_events: int, pid: int = 100) -> Path:
    """``n_events`` forward events of 1 ms, back to back."""
    start = 1_795_000_000_000_000
    return write_trace(path, [event("compute", "forward", start + 1000 * i, 900, epoch=1, step=i)
                              for i in range(n_events)], pid=pid)
