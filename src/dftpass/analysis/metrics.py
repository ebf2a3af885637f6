"""The numbers of one traced run, as compared between runs and used to size proposals.

Every metric has a direction (is lower better?) and a unit, so :mod:`~dftpass.analysis.compare`
can colour a change without knowing what the metric means. Shares are of the run's wall
time (the command's, from ``run.json``), clipped to [0, 1]: time summed over processes
(workers) can exceed the wall time, a share cannot.
"""

from __future__ import annotations

from dataclasses import dataclass

from dftpass.core import emitter as E
from dftpass.traces import Overlap, Summary
from dftpass.traces import names as N
from dftpass.traces.overlap import stall_share

LOWER, HIGHER, NEUTRAL = "lower", "higher", "neutral"


@dataclass(frozen=True)
class Metric:
    name: str
    unit: str
    better: str  # LOWER | HIGHER | NEUTRAL
    doc: str


#: the metrics of a run, in report order
METRICS: dict[str, Metric] = {m.name: m for m in [
    Metric("wall_s", "s", LOWER, "wall time of the command (run.json)"),
    Metric("traced_span_s", "s", LOWER, "first to last traced event"),
    Metric("compute_s", "s", LOWER, "time in compute events (forward, backward, step, ...)"),
    Metric("fetch_wait_s", "s", LOWER, "time the batch loop waited for data (fetch.iter, fetch regions in training)"),
    Metric("fetch_block_s", "s", LOWER, "time in the batch loop's body (fetch.block)"),
    Metric("data_item_s", "s", LOWER, "time producing samples (data events, all processes)"),
    Metric("checkpoint_s", "s", LOWER, "time in checkpoint events"),
    Metric("comm_s", "s", LOWER, "time in communication events"),
    Metric("device_s", "s", LOWER, "time in device transfer events"),
    Metric("io_time_s", "s", LOWER, "time in POSIX/STDIO reads, writes and metadata calls (all processes)"),
    Metric("read_bandwidth", "B/s", HIGHER, "bytes read per second of read time"),
    Metric("write_bandwidth", "B/s", HIGHER, "bytes written per second of write time"),
    Metric("iops", "op/s", HIGHER, "reads and writes per second of I/O time"),
    Metric("metadata_ops_per_s", "op/s", HIGHER, "metadata calls per second of their time"),
    Metric("read_bytes", "B", NEUTRAL, "bytes read (POSIX/STDIO)"),
    Metric("overlap_fraction", "", HIGHER, "share of compute time with data loading running (ML-R24)"),
    Metric("fetch_stall_share", "", LOWER, "share of the batch loop spent waiting for data"),
    Metric("events", "", NEUTRAL, "events in the trace"),
]}


#: a process with these runs a batch loop: it trains, even as a child (a spawned DDP rank)
_LOOP_KEYS = frozenset({(N.DATALOADER_CAT, N.FETCH_ITER), (N.DATALOADER_CAT, N.FETCH)})


def in_training_processes(summary, keys) -> list:
    """The cells of ``keys`` in the processes that are not DataLoader workers: a child process
    that runs a batch loop (a rank ``mp.spawn`` started) trains."""
    workers = {(p.file, p.pid) for p in summary.workers() if not _LOOP_KEYS & p.by_key.keys()}
    return [cell for p in summary.processes.values() if (p.file, p.pid) not in workers
            for k, cell in p.by_key.items() if k in keys]


def _fetch_regions_in_training(summary) -> float:
    """Seconds of fetch regions (``fetch.start()`` / ``.stop()`` around ``next(it)``) in the
    processes that train: their wait for a batch, like ``fetch.iter``'s."""
    return sum(cell.dur_ns for cell in in_training_processes(summary, {(N.DATALOADER_CAT, N.FETCH)})) / 1e9


def _cat_total(summary: Summary, overlap: Overlap | None, cat: str) -> float:
    """A category's time, nested events counted once (the union of each process's events,
    added over processes: :attr:`Overlap.categories`); without a timeline, the sum of its
    events."""
    if overlap is not None and overlap.categories is not None:
        return overlap.categories.get(cat, 0.0)
    return sum(s.total_s for (c, _), s in summary.by_key.items() if c == cat)


def run_metrics(summary: Summary, overlap: Overlap | None, wall_s: float | None) -> dict[str, float | None]:
    """The metrics of one repeat of a run."""
    io = summary.io("syscall")
    wait = summary.by_key.get((N.DATALOADER_CAT, N.FETCH_ITER))
    block = summary.by_key.get((N.DATALOADER_CAT, N.FETCH_BLOCK))
    waited = (wait.total_s if wait else 0.0) + _fetch_regions_in_training(summary)
    return {
        "wall_s": wall_s,
        "traced_span_s": summary.span_s,
        "compute_s": _cat_total(summary, overlap, E.NODES["compute"][0]),
        "fetch_wait_s": waited,
        "fetch_block_s": block.total_s if block else 0.0,
        "data_item_s": _cat_total(summary, overlap, E.NODES["data.item"][0]),
        "checkpoint_s": _cat_total(summary, overlap, E.NODES["checkpoint.capture"][0]),
        "comm_s": _cat_total(summary, overlap, E.NODES["comm.barrier"][0]),
        "device_s": _cat_total(summary, overlap, E.NODES["device.transfer"][0]),
        "io_time_s": io.io_time_s,
        "read_bandwidth": io.read_bandwidth,
        "write_bandwidth": io.write_bandwidth,
        "iops": io.iops,
        "metadata_ops_per_s": io.metadata_ops_per_s,
        "read_bytes": float(io.read_bytes),
        "overlap_fraction": overlap.overlap_fraction if overlap else None,
        "fetch_stall_share": stall_share(waited, block.total_s if block else 0.0, summary.span_s),
        "events": float(summary.events),
    }


def shares(metrics: dict[str, float | None]) -> dict[str, float]:
    """What share of the wall time each bottleneck holds (the bound of any proposal's impact)."""
    wall = metrics.get("wall_s") or metrics.get("traced_span_s") or 0.0
    if not wall:
        return {}

    def share(seconds: float | None) -> float:
        return max(0.0, min(1.0, (seconds or 0.0) / wall))

    return {
        "data_stall": share(metrics["fetch_wait_s"]),
        "data_read": share(metrics["data_item_s"]),
        "io_time": share(metrics["io_time_s"]),
        "transfer": share(metrics["device_s"]),
        "comm_time": share(metrics["comm_s"]),
        "compute_time": share(metrics["compute_s"]),
        "checkpoint_time": share(metrics.get("checkpoint_s")),
    }
