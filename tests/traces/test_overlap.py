"""The overlap: the bucket method on hand-made timelines, and on the real run."""

from __future__ import annotations

import gzip

import numpy as np
import pytest

from dftpass.traces import COMPUTE, LOADING, ClassEvent, analyze, busy_of_events, class_events, judge, summarize
from dftpass.traces import overlap as O
from dftpass.traces.classes import NONE, classify
from dftpass.traces.sketch import RELATIVE_ERROR
from dftpass.traces.timeunit import DEFAULT_METRIC as US
from dftpass.traces.summary import Cell, ProcessSummary, Summary

from tests.traces.trace_data import APP_FILE, REAL

MS = 1e-3


def ev(pid: int, cls: int, start_ms: float, dur_ms: float, name: str = "x") -> ClassEvent:
    """An event ``start_ms`` after an epoch-like origin, in microseconds like dftracer's default."""
    cat = "compute" if cls == COMPUTE else "data"
    return ClassEvent(pid, cat, name, 1_000_000_000 + round(start_ms * 1000), round(dur_ms * 1000), cls, "h", US)


def with_worker(pid: int = 2) -> Summary:
    """A summary whose process ``pid`` is a worker that loaded data."""
    worker = ProcessSummary("w.pfw.gz", pid, "h", "fork", by_key={("data", "item"): Cell(1, 1, 0)})
    return Summary(processes={("w.pfw.gz", pid): worker})


def overlap_of(events: list[ClassEvent], width_ms: float) -> O.Overlap:
    return judge(with_worker(), busy_of_events(events, width_ms * MS))


def test_full_overlap_in_two_processes():
    result = overlap_of([ev(1, COMPUTE, 0, 10), ev(2, LOADING, 0, 10)], 5)
    assert result.overlap_fraction == pytest.approx(1.0) and result.verdict == O.TARGET_MET
    assert result.loading_share == pytest.approx(1.0) and result.stall_share == pytest.approx(0.0)


def test_serial_work_does_not_overlap():
    result = overlap_of([ev(1, COMPUTE, 0, 5), ev(2, LOADING, 5, 5)], 10)
    assert result.overlap_s == 0 and result.verdict == O.NO_OVERLAP


def test_short_loading_hidden_behind_long_compute_is_not_called_no_overlap():
    """Compute-bound: 2 ms of loading inside 100 ms of compute overlaps only 2% of compute,
    the most it could; what matters is that all of the loading was hidden."""
    result = overlap_of([ev(1, COMPUTE, 0, 100), ev(2, LOADING, 40, 2)], 1)
    assert result.overlap_fraction == pytest.approx(0.02) and result.loading_share == pytest.approx(1.0)
    assert result.verdict == O.LOADING_HIDDEN


def test_events_are_split_at_bucket_boundaries():
    """One 25 ms event over 10 ms buckets is 5 + 10 + 10. With its twin in another process the
    bound proves 20 ms of overlap: in the first bucket each is busy half the time, which a
    serial schedule would also fit (a lower bound, not the exact overlap)."""
    busy = busy_of_events([ev(1, COMPUTE, 5, 25), ev(2, LOADING, 5, 25)], 10 * MS)
    buckets, values = busy.get(COMPUTE)
    assert np.diff(buckets).tolist() == [1, 1] and values.tolist() == [5_000_000, 10_000_000, 10_000_000]
    assert judge(with_worker(), busy).overlap_s == pytest.approx(0.020)


def test_nested_events_of_a_process_count_once():
    """An item around its read is 10 ms of loading, not 12: busy never passes the bucket."""
    events = [ev(2, LOADING, 0, 10, "item"), ev(2, LOADING, 2, 2, "read"), ev(2, LOADING, 3, 5)]
    assert busy_of_events(events, 10 * MS).get(LOADING)[1].tolist() == [10_000_000]
    # one event per block: no union across blocks, the cap at the bucket width still holds
    assert busy_of_events(events, 10 * MS, block=1).get(LOADING)[1].tolist() == [10_000_000]


def test_busy_is_the_max_over_processes_not_the_sum():
    busy = busy_of_events([ev(2, LOADING, 0, 6), ev(3, LOADING, 0, 6)], 10 * MS)
    assert busy.get(LOADING)[1].tolist() == [6_000_000]


def test_never_above_one_on_random_timelines():
    rng = np.random.default_rng(7)
    events = [ev(int(rng.integers(1, 6)), int(rng.integers(0, 2)), float(rng.uniform(0, 500)),
                 float(rng.lognormal(0, 1.5))) for _ in range(3000)]
    for width in (0.05, 0.5, 3, 40):
        result = overlap_of(events, width)
        assert 0 <= result.overlap_fraction <= 1 and 0 <= result.loading_share <= 1


def test_a_value_above_one_is_a_bug_that_raises():
    busy = busy_of_events([ev(1, COMPUTE, 0, 10), ev(2, LOADING, 0, 10)], 10 * MS)
    busy.by_class[LOADING] = (busy.get(LOADING)[0], busy.get(LOADING)[1] * 3)  # what a missing cap would do
    with pytest.raises(AssertionError, match="outside"):
        judge(with_worker(), busy)


def test_classes():
    assert classify("compute", "forward") == COMPUTE
    assert classify("data", "item") == classify("POSIX", "pread64") == classify("dataloader", "fetch") == LOADING
    for cat, name in (("dataloader", "fetch.iter"), ("dataloader", "fetch.block"), ("POSIX", "write"),
                      ("pipeline", "epoch"), ("POSIX", "open64")):
        assert classify(cat, name) == NONE


def test_real_run_with_fork_workers():
    result = analyze([REAL], jobs=2)
    summary, overlap = result.summary, result.overlap
    assert overlap.verdict != O.CANNOT_JUDGE and overlap.loading_workers == 4
    assert 0 <= overlap.overlap_fraction <= 1
    # one training process whose forward events never overlap each other: busy = their total
    assert overlap.compute_s == pytest.approx(summary.by_key[("compute", "forward")].total_s)
    assert overlap.fetch_iter_s == summary.by_key[("dataloader", "fetch.iter")].total_s
    assert overlap.fetch_stall_share == pytest.approx(
        overlap.fetch_iter_s / (overlap.fetch_iter_s + overlap.fetch_block_s))
    assert round(overlap.bucket_width_s * 1e9) == O.default_width_ns(summary)


def test_default_width_is_the_shorter_class_median_and_can_be_overridden():
    summary = summarize([REAL])
    events = list(class_events([REAL]))
    medians = []
    for cls in (COMPUTE, LOADING):
        durations = np.sort([e.dur_s for e in events if e.cls == cls])
        medians.append(durations[int(np.ceil(0.5 * len(durations))) - 1] * 1e9)
    exact = min(medians)
    assert abs(O.default_width_ns(summary) - exact) <= RELATIVE_ERROR * exact + 1
    assert analyze([REAL], width_s=0.002).overlap.bucket_width_s == 0.002


def test_narrower_buckets_tighten_the_bound_until_it_converges():
    """The reason for the default: the lower bound only grows as buckets shrink, and the
    default is already near where it stops growing."""
    by_width = {w: analyze([REAL], width_s=w).overlap.overlap_s for w in (0.2, 0.02, 0.002, 0.0002)}
    values = list(by_width.values())
    assert values == sorted(values)
    default = analyze([REAL]).overlap.overlap_s
    assert default >= 0.9 * values[-1]


def test_stream_of_class_events_agrees_with_the_spill_path():
    result = analyze([REAL])
    workers = {(p.host, p.pid) for p in result.summary.workers()}
    busy = busy_of_events(class_events([REAL]), result.overlap.bucket_width_s, workers=workers)
    streamed = judge(result.summary, busy)
    assert streamed == result.overlap


def test_no_worker_traces_cannot_be_judged_never_zero():
    """The training process alone: what a spawn-start-method run leaves behind."""
    overlap = analyze([APP_FILE]).overlap
    assert overlap.verdict == O.CANNOT_JUDGE and "no worker process left loading events" in overlap.reason
    assert overlap.overlap_fraction is None and overlap.stall_share is None and overlap.loading_share is None


def test_no_compute_cannot_be_judged():
    workers = sorted(REAL.glob("*-fork.pfw.gz"))
    overlap = analyze(workers).overlap
    assert overlap.verdict == O.CANNOT_JUDGE and "compute" in overlap.reason


def test_a_process_split_over_files_is_one_process(tmp_path):
    """Compacted traces split one process into chunks: its files are judged together."""
    lines = gzip.decompress(APP_FILE.read_bytes()).splitlines(keepends=True)
    half = len(lines) // 2
    for name, part in (("a-0000000000000001-app.pfw", lines[:half]), ("a-0000000000000002-app.pfw", lines[half:])):
        (tmp_path / name).write_bytes(b"".join(part))
    workers = sorted(REAL.glob("*-fork.pfw.gz"))
    whole = analyze([APP_FILE, *workers]).overlap
    split = analyze([tmp_path, *workers], jobs=2, width_s=whole.bucket_width_s).overlap
    assert split == whole


FETCH_REGION_PROGRAM = '''
import os, time
import torch
from dftracer.python import ai, dftracer
from torch.utils.data import DataLoader, Dataset


class Slow(Dataset):
    def __len__(self):
        return 40

    @ai.data.item
    def __getitem__(self, index):
        time.sleep(0.01)
        return torch.full((4,), float(index))


log = dftracer.initialize_log(logfile=os.environ["DFTRACER_LOG_FILE"], data_dir=None, process_id=-1)
try:
    it = iter(DataLoader(Slow(), batch_size=4, num_workers=1, multiprocessing_context="fork"))
    with ai.pipeline.train:
        while True:  # minGPT's Trainer.run: next(it) between fetch.start() and .stop()
            ai.dataloader.fetch.start()
            try:
                batch = next(it)
            except StopIteration:
                ai.dataloader.fetch.stop()
                break
            ai.dataloader.fetch.stop()
            with ai.compute.forward:
                time.sleep(0.01)
finally:
    log.finalize()
'''


def test_a_fetch_region_in_the_training_process_is_its_wait_not_loading(tmp_path):
    """A loop that times ``next(it)`` with a fetch region (not ``fetch.iter``) waits for its
    batch there: the region is the wait (and the loop has no body events, so the phase is the
    loop), and it is not loading that could overlap compute."""
    import os
    import subprocess
    import sys

    from dftpass.analysis.metrics import run_metrics
    from dftpass.core import emitter as E

    script = tmp_path / "loop.py"
    script.write_text(FETCH_REGION_PROGRAM)
    env = {**os.environ, **E.traced_env(str(tmp_path / "traces" / "trace"))}
    subprocess.run([sys.executable, str(script)], env=env, cwd=tmp_path, check=True, capture_output=True)
    result = analyze([tmp_path / "traces"])
    train = result.overlap.phases["train"]
    # 10 batches of 4 items at 10 ms in one worker: ~40 ms a batch against 10 ms of compute
    assert train.fetch_wait_s > 0.2 and train.fetch_block_s == 0
    assert train.batches in (10, 11)  # ten batches, and the wait that found the loader exhausted
    assert train.loading_main_s == 0 and train.loading_workers_s > 0.3
    assert train.fetch_stall_share == pytest.approx(train.fetch_wait_s / train.span_s) and train.fetch_stall_share > 0.5
    metrics = run_metrics(result.summary, result.overlap, None)
    assert metrics["fetch_wait_s"] == pytest.approx(train.fetch_wait_s, rel=0.05)


def test_a_batch_at_a_phases_last_instant_is_counted_in_that_phase():
    """Batches are labelled with a phase by the instant they arrive, not by the middle of their
    bucket: a 30 ms bucket from 90 to 120 ms has its middle in evaluation, but the batch that
    arrived at 95 ms belongs to training, which ends at 100 ms (eval_bound once counted 7
    training batches of 8 this way, and the runs looked like different work)."""
    from dftpass.traces.busy import BusyAccumulator
    from dftpass.traces.classes import BATCHES
    from dftpass.traces.summary import PHASE_CODES

    ms = 1_000_000
    summary = with_worker()
    summary.intervals.extend([("t.pfw.gz", 1, PHASE_CODES["train"], 0, 100 * ms),
                              ("t.pfw.gz", 1, PHASE_CODES["evaluate"], 100 * ms, 200 * ms)])
    acc = BusyAccumulator(30 * ms)
    acc.count(BATCHES, np.array([10, 50, 95, 150], np.int64) * ms)
    phases, primary = O.phases_of(summary, acc.result(), workers=1)
    assert primary == "train"
    assert (phases["train"].batches, phases["evaluate"].batches) == (3, 1)
