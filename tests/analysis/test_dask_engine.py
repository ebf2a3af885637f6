"""The Dask engine computes the same numbers as the local one, on a trace set split across
many files (``dftpass.analysis.engine``; ``analysis.md``, Overlap of data loading and compute).

The trace set is written here in the real dftracer 2.x line format (the sample lines of
``trace-format.md``): two training processes (``-app`` files) with compute and the batch
loop's ``fetch.iter``/``fetch.block``, ten DataLoader workers (``-fork`` files) with
``data/item`` around POSIX ``open64``/``read``/``close``, one of them in nanoseconds, and
one worker whose events are split over two compacted chunks (``trace-…`` and ``trace.1-…``,
as ``dftpass trace`` names them). That split worker is the only loading process while the
second rank runs a long forward pass, with alternating items in its two chunks: only if the
two chunks are read as one process is the bucket union right.

Cluster starts (about a second each): one module-wide ``LocalCluster`` for ``--scheduler``,
one by ``analyze_traces(..., engine="dask")``, one by the CLI's ``--engine dask``.
"""

from __future__ import annotations

import gzip
import json
import re
from collections import defaultdict
from pathlib import Path

import pytest

distributed = pytest.importorskip("dask.distributed", reason="the Dask engine needs dask[distributed]")

from dftpass.analysis import engine as engine_mod  # noqa: E402
from dftpass.analysis.engine import EngineError, analyze_traces  # noqa: E402
from dftpass.traces import ClassBusy, busy_of_events, class_events, judge  # noqa: E402
from dftpass.traces.files import trace_files  # noqa: E402

HHASH = "6882804a826580cd"
HOST = "vm"
BASE_US = 1_795_944_796_000_000  # a multiple of 10 ms: 10 ms buckets start on it
MS = 1000  # microseconds

OVERLAP_FIELDS = ("verdict", "overlap_fraction", "stall_share", "loading_share", "compute_s", "loading_s",
                  "overlap_s", "bucket_width_s", "fetch_iter_s", "fetch_block_s", "loading_workers")


class TraceFile:
    """The lines of one dftracer 2.x process file, written as dftracer 2.2.0 writes them."""

    def __init__(self, pid: int, metric: str = "US", ppid: int | None = None) -> None:
        self.pid, self.metric, self.unit = pid, metric, 1000 if metric == "NS" else 1
        self.lines = [
            self._meta("HH", HOST, HHASH),
            self._meta("thread_name", str(pid), "thread_name"),
            self._meta("CM", "time_metric", metric),
        ]
        self.next_id = 1
        self.events: list[dict] = []
        if ppid is not None:
            self.add("start", "dftracer", 1, 0, 0, {"ppid": ppid, "version": 20003})

    def _meta(self, name: str, key: str, value: str) -> str:
        return json.dumps({"name": name, "cat": "dftracer", "type": 1, "pid": self.pid, "tid": self.pid, "ph": 4,
                           "args": {"hhash": HHASH, "name": key, "value": value}}, separators=(",", ":"))

    def add(self, name: str, cat: str, type_: int, start_us: int, dur_us: int, args: dict | None = None) -> None:
        event = {"id": self.next_id, "name": name, "cat": cat, "type": type_, "pid": self.pid, "tid": self.pid,
                 "ts": (BASE_US + start_us) * self.unit, "dur": dur_us * self.unit, "ph": 1,
                 "args": {"hhash": HHASH, **(args or {})}}
        self.next_id += 1
        self.events.append(event)

    def item(self, start_us: int, dur_us: int, idx: int, read_us: int) -> None:
        """``ai.data.item`` around the POSIX calls of one sample read (children first, as dftracer
        writes them: ids in completion order)."""
        self.add("open64", "POSIX", 3, start_us + 40, 8, {"flags": 524288, "fhash": "278bd6a215349faf"})
        self.add("read", "POSIX", 3, start_us + 60, read_us, {"ret": 4096, "count": 4097, "fhash": "278bd6a215349faf"})
        self.add("read", "POSIX", 3, start_us + 70 + read_us, 1, {"ret": 0, "count": 1, "fhash": "278bd6a215349faf"})
        self.add("close", "POSIX", 3, start_us + 80 + read_us, 2, {"ret": 0, "fhash": "278bd6a215349faf"})
        self.add("item", "data", 6, start_us, dur_us, {"image_size": 4096, "image_idx": idx})

    def write(self, path: Path) -> Path:
        body = self.lines + [json.dumps(e, separators=(",", ":")) for e in self.events]
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            fh.write("\n".join(body) + "\n")
        return path


def training(pid: int, steps: int, long_forward_ms: int = 0) -> TraceFile:
    t = TraceFile(pid, ppid=1)
    for s in range(steps):
        at = s * 20 * MS
        t.add("fetch.iter", "dataloader", 6, at, 2 * MS + 37 * (s % 5), {"step": s, "count": 1})
        t.add("forward", "compute", 6, at + 3 * MS, 10 * MS + 13 * s, {"step": s, "epoch": 0})
        t.add("backward", "compute", 6, at + 13 * MS + 13 * s, 5 * MS, {"step": s, "epoch": 0})
        t.add("fetch.block", "dataloader", 6, at + 2 * MS, 18 * MS, {"step": s, "count": 1})
    if long_forward_ms:  # evaluation after training: one long forward at 1000 ms
        t.add("forward", "compute", 6, 1000 * MS, long_forward_ms * MS, {"step": steps, "epoch": 1})
    return t


def worker(pid: int, ppid: int, slot: int, metric: str = "US") -> TraceFile:
    t = TraceFile(pid, metric=metric, ppid=ppid)
    for k in range(8):
        at = slot * 4 * MS + k * 100 * MS + 211 * k
        t.item(at, 8 * MS + 517 * ((slot + k) % 7), slot * 100 + k, 25 + 31 * ((slot * k) % 9))
    return t


def split_worker() -> tuple[TraceFile, TraceFile, TraceFile]:
    """The worker of the long forward: items at 0-4 ms and 5-9 ms of each 10 ms bucket, the
    first in chunk 0, the second in chunk 1; and the same process as one file."""
    first, second, whole = TraceFile(2099, ppid=1100), TraceFile(2099), TraceFile(2099, ppid=1100)
    for b in range(15):
        at = 1000 * MS + b * 10 * MS
        for chunk, offset in ((first, 0), (second, 5 * MS)):
            chunk.item(at + offset, 4 * MS, 9000 + 2 * b + bool(offset), 30)
            whole.item(at + offset, 4 * MS, 9000 + 2 * b + bool(offset), 30)
    return first, second, whole


def name(k: int, role: str, chunk: int = 0) -> str:
    return f"trace{'.' + str(chunk) if chunk else ''}-{k:016x}-{role}.pfw.gz"


def expected_counts(files: list[TraceFile]) -> dict[tuple[str, str], tuple[int, int]]:
    """(cat, name) -> (count, total ns) of the complete events, from what was written."""
    out: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0, 0])
    for f in files:
        for e in f.events:
            out[(e["cat"], e["name"])][0] += 1
            out[(e["cat"], e["name"])][1] += e["dur"] * (1 if f.metric == "NS" else 1000)
    return {k: (n, d) for k, (n, d) in out.items()}


@pytest.fixture(scope="module")
def trace_set(tmp_path_factory):
    """(split dir, same set with the split worker in one file, expected per-key numbers)."""
    split, whole = tmp_path_factory.mktemp("split"), tmp_path_factory.mktemp("whole")
    files = [(name(1, "app"), training(1000, 40)), (name(2, "app"), training(1100, 40, long_forward_ms=150))]
    for j in range(10):
        ppid = 1000 if j < 5 else 1100
        files.append((name(100 + j, "fork"), worker(2001 + j, ppid, j % 5, metric="NS" if j == 9 else "US")))
    first, second, one = split_worker()
    for fname, tf in files:
        tf.write(split / fname)
        tf.write(whole / fname)
    first.write(split / name(999, "fork"))
    second.write(split / name(999, "fork", chunk=1))
    one.write(whole / name(999, "fork"))
    expected = expected_counts([tf for _, tf in files] + [first, second])
    assert expected == expected_counts([tf for _, tf in files] + [one])
    return split, whole, expected


@pytest.fixture(scope="module")
def cluster():
    cluster = distributed.LocalCluster(n_workers=1, threads_per_worker=1, processes=True,
                                       dashboard_address=":0")  # None still takes port 8787
    try:
        yield cluster.scheduler_address
    finally:
        cluster.close()


@pytest.fixture(scope="module")
def local(trace_set):
    return analyze_traces([trace_set[0]], engine="local", jobs=2)


@pytest.fixture(scope="module")
def dask(trace_set):
    """The Dask engine on its own LocalCluster (2 worker processes)."""
    return analyze_traces([trace_set[0]], engine="dask", jobs=2)


def numbers(analysis) -> dict:
    """Everything both engines must agree on, as plain values."""
    s = analysis.summary
    return {
        "by_key": {k: (v.count, v.dur_ns, v.bytes, v.p50_s, v.p99_s) for k, v in s.by_key.items()},
        "processes": {k: (p.host, p.role, p.ppid, p.first_ns, p.last_ns, p.total.count, p.total.dur_ns)
                      for k, p in s.processes.items()},
        "files": sorted(s.files),
        "problems": sorted(map(str, s.problems)),
        "overlap": {f: getattr(analysis.overlap, f) for f in OVERLAP_FIELDS},
    }


def test_the_trace_set_is_many_files_of_many_processes(trace_set, local):
    split, _, expected = trace_set
    assert len(trace_files([split])) == 14
    pids = {pid for _, pid in local.summary.processes}
    assert pids == {1000, 1100, 2099} | set(range(2001, 2011))
    # the split worker is two (file, pid) entries of one (host, pid)
    assert sum(pid == 2099 for _, pid in local.summary.processes) == 2
    assert local.summary.hosts == [HOST] and local.summary.problems == []
    assert {k: (v.count, v.dur_ns) for k, v in local.summary.by_key.items()} == expected
    assert local.summary.by_key[("POSIX", "read")].bytes == 4096 * (10 * 8 + 30)


def test_dask_gives_the_same_numbers_as_local(local, dask):
    assert numbers(dask) == numbers(local)
    assert dask.overlap == local.overlap
    o = local.overlap
    assert o.verdict != "cannot judge" and o.overlap_s > 0 and 0 < o.overlap_fraction <= 1
    assert o.loading_workers == 11  # 10 workers + the split worker, counted once across its two files


def test_files_of_one_process_are_read_as_one_process(trace_set, cluster):
    """The same set with the split worker in one file gives the same overlap, with either engine;
    read file by file instead, the split worker counts 4 ms per 10 ms bucket instead of 8."""
    split, whole, _ = trace_set
    results = {
        "local split": analyze_traces([split], engine="local", jobs=2, width_s=0.01),
        "local whole": analyze_traces([whole], engine="local", jobs=1, width_s=0.01),
        "dask split": analyze_traces([split], engine="dask", scheduler=cluster, width_s=0.01),
        "dask whole": analyze_traces([whole], engine="dask", scheduler=cluster, width_s=0.01),
    }
    # loading_workers counts (file, pid) entries: the split worker's two chunks count twice
    fields = [f for f in OVERLAP_FIELDS if f != "loading_workers"]
    overlaps = {k: {f: getattr(r.overlap, f) for f in fields} for k, r in results.items()}
    assert all(o == overlaps["local split"] for o in overlaps.values()), overlaps
    assert overlaps["local split"]["bucket_width_s"] == 0.01
    assert results["dask split"].overlap == results["local split"].overlap
    assert results["dask whole"].overlap == results["local whole"].overlap

    per_file = ClassBusy(10_000_000)
    for f in trace_files([split]):
        per_file.merge(busy_of_events(class_events([str(f)]), 0.01))
    ungrouped = judge(results["local split"].summary, per_file)
    assert results["local split"].overlap.overlap_s - ungrouped.overlap_s == pytest.approx(15 * 0.004, abs=1e-9)


def test_overlap_of_the_split_worker_alone_is_exact(trace_set, cluster):
    """The second rank and the split worker alone: the long forward (150 ms = 15 buckets of 10 ms)
    overlaps 8 ms of loading per bucket (items at 0-4 and 5-9 ms, one in each chunk): 120 ms."""
    split = trace_set[0]
    files = [split / name(2, "app"), split / name(999, "fork"), split / name(999, "fork", chunk=1)]
    for result in (analyze_traces(files, engine="local", jobs=2, width_s=0.01),
                   analyze_traces(files, engine="dask", scheduler=cluster, width_s=0.01)):
        o = result.overlap
        assert o.overlap_s == pytest.approx(0.120, abs=1e-9)
        assert o.loading_s == pytest.approx(0.120, abs=1e-9)  # 30 items of 4 ms, reads nested in them
        assert o.loading_share == pytest.approx(1.0)


def test_scheduler_address_gives_the_same_numbers(trace_set, local, cluster):
    result = analyze_traces([trace_set[0]], engine="dask", jobs=2, scheduler=cluster)
    assert numbers(result) == numbers(local)


def test_cli_engine_dask_reports_the_same_overlap(trace_set, cli):
    split = trace_set[0]
    by_engine = {}
    for eng in ("local", "dask"):
        res = cli("analyze", split, "--engine", eng, "--jobs", "2", "--json")
        assert res.code in (0, 1), res.err
        by_engine[eng] = json.loads(res.out)
    local, dask = by_engine["local"], by_engine["dask"]
    assert dask["overlap"] == local["overlap"]
    assert local["overlap"]["overlap_s"] > 0 and local["overlap"]["verdict"] != "cannot judge"
    for key in ("events", "span_s", "categories", "top", "io", "processes"):
        assert dask[key] == local[key], key


def test_unknown_engine_is_an_engine_error(trace_set):
    with pytest.raises(EngineError, match="unknown engine 'spark'"):
        analyze_traces([trace_set[0]], engine="spark")


@pytest.mark.parametrize("address, message", [
    ("tcp://127.0.0.1:9", r"cannot reach the Dask scheduler tcp://127\.0\.0\.1:9"),  # nothing listens there
    ("no-port-here", r"no-port-here"),  # not an address at all
])
def test_unreachable_scheduler_is_a_clean_usage_error(trace_set, cli, monkeypatch, address, message):
    """Exit code 2 and one line saying why, not a traceback (exit 3), and not a long wait."""
    assert engine_mod.SCHEDULER_TIMEOUT_S <= 10
    monkeypatch.setattr(engine_mod, "SCHEDULER_TIMEOUT_S", 1)
    res = cli("analyze", trace_set[0], "--engine", "dask", "--scheduler", address)
    assert res.code == 2, res.err
    assert "Traceback" not in res.err and "internal error" not in res.err
    assert re.search(r"dftpass: error: .*" + message, res.err), res.err
