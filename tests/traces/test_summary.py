"""The summary: exact counts/sums/bytes against an independent json recount, processes,
I/O, merging, bad files alongside good ones."""

from __future__ import annotations

import pytest

from dftpass.core import emitter as E
from dftpass.traces import problems as P
from dftpass.traces import summarize, summarize_file
from dftpass.traces.summary import MIN_RATE_NS, MIN_RATE_OPS, IOStats, Summary

from tests.traces.trace_data import AGGREGATED, APP_FILE, BAD, REAL, json_events, recount

REAL_FILES = sorted(REAL.glob("*.pfw.gz"))
ALL_EVENTS = [(path, e) for path in REAL_FILES for e in json_events(path)]


def test_counts_and_durations_equal_a_json_recount():
    summary = summarize([REAL])
    expected = recount(REAL_FILES)
    assert {k: [s.count, s.dur_ns] for k, s in summary.by_key.items()} == {
        k: [count, dur * 1000] for k, (count, dur) in expected.items()}
    assert summary.events == sum(count for count, _ in expected.values())


def test_bytes_from_ret_of_data_calls_and_image_size():
    summary = summarize([REAL])
    rets = sum(e["args"]["ret"] for _, e in ALL_EVENTS if e["name"] == "read" and e["cat"] == "POSIX")
    sizes = sum(e["args"]["image_size"] for _, e in ALL_EVENTS if e["cat"] == "data")
    assert summary.by_key[("POSIX", "read")].bytes == rets > 0
    assert summary.by_key[("data", "item")].bytes == sizes > 0
    assert summary.by_key[("POSIX", "lseek64")].bytes == 0  # ret of lseek is an offset, fork's a pid


def test_io_metrics():
    io = summarize([REAL]).io()
    calls = [e for _, e in ALL_EVENTS if e.get("cat") in E.TRACE_SYSCALL_CATS and e["ph"] == 1]
    reads = [e for e in calls if e["name"] in E.TRACE_READ_OPS]
    meta = [e for e in calls if e["name"] in E.TRACE_METADATA_OPS]
    assert (io.read_ops, io.read_ns) == (len(reads), 1000 * sum(e["dur"] for e in reads))
    assert (io.metadata_ops, io.metadata_ns) == (len(meta), 1000 * sum(e["dur"] for e in meta))
    assert io.io_time_s > 0
    # 128 reads in 0.2 ms of page-cache hits: "630,000 IOPS" would describe nothing; no rate is given
    assert io.read_ns < MIN_RATE_NS and (io.read_bandwidth, io.iops, io.metadata_ops_per_s) == (None, None, None)


def test_rates_need_enough_operations_and_time():
    enough = IOStats(read_ops=MIN_RATE_OPS, read_bytes=10**9, read_ns=10**9)
    assert enough.read_bandwidth == pytest.approx(1e9) and enough.iops == pytest.approx(MIN_RATE_OPS)
    few = IOStats(read_ops=3, read_bytes=12_288, read_ns=8_000)  # three 4 KB reads of 2.7 us
    assert few.iops is None and few.read_bandwidth is None
    short = IOStats(read_ops=10_000, read_bytes=10**6, read_ns=MIN_RATE_NS - 1)
    assert short.iops is None


def test_processes_roles_parents_hosts_spans():
    summary = summarize([REAL])
    assert sorted(p.role for p in summary.processes.values()) == ["app", "fork", "fork", "fork", "fork"]
    (app,) = [p for p in summary.processes.values() if p.role == "app"]
    workers = summary.workers()
    assert len(workers) == 4 and all(w.ppid == app.pid for w in workers)
    host = next(e for _, e in ALL_EVENTS if e["name"] == "HH")["args"]["name"]
    assert summary.hosts == [host] and {p.host for p in summary.processes.values()} == {host}
    for (path, _), proc in summary.processes.items():
        timed = [e for e in json_events(REAL / path.rsplit("/", 1)[1]) if e["ph"] == 1]
        assert proc.first_ns == 1000 * min(e["ts"] for e in timed)
        assert proc.last_ns == 1000 * max(e["ts"] + e["dur"] for e in timed)
        assert proc.total.count == len(timed)
    assert summary.span_s == pytest.approx((summary.last_ns - summary.first_ns) / 1e9)
    forward = summary.by_key[("compute", "forward")]
    assert forward.mean_s == pytest.approx(forward.total_s / forward.count)
    assert 0 < forward.p50_s <= forward.p99_s


def test_parallel_and_any_merge_order_give_the_same_summary():
    one = summarize([REAL], jobs=1)
    two = summarize([REAL], jobs=2)
    backwards = Summary()
    for path in reversed(REAL_FILES):
        backwards.merge(summarize_file(path))
    for other in (two, backwards):
        assert {k: (s.count, s.dur_ns, s.bytes, s.sketch.total) for k, s in other.by_key.items()} == {
            k: (s.count, s.dur_ns, s.bytes, s.sketch.total) for k, s in one.by_key.items()}
        assert other.processes.keys() == one.processes.keys()


def test_bad_files_are_problems_and_the_rest_is_analysed():
    summary = summarize([REAL, BAD / "empty.pfw.gz", BAD / "truncated.pfw.gz", BAD / "corrupt_gzip.pfw.gz",
                         BAD / "malformed_lines.pfw.gz"], jobs=2)
    kinds = {(p.file.rsplit("/", 1)[1], p.kind) for p in summary.problems}
    assert kinds == {("empty.pfw.gz", P.EMPTY), ("truncated.pfw.gz", P.TRUNCATED),
                     ("corrupt_gzip.pfw.gz", P.CORRUPT), ("malformed_lines.pfw.gz", P.MALFORMED)}
    alone = summarize([REAL]).events
    assert summary.events > alone + summarize_file(BAD / "malformed_lines.pfw.gz").events


def test_old_formats_summarize_like_the_original():
    original = summarize_file(APP_FILE)
    for sample in ("v1.pfw.gz", "dlio.pfw.gz", "plain.pfw", "multimember.pfw.gz"):
        summary = summarize_file(BAD / sample)
        assert {k: (s.count, s.dur_ns, s.bytes) for k, s in summary.by_key.items()} == {
            k: (s.count, s.dur_ns, s.bytes) for k, s in original.by_key.items()}, sample


def test_aggregated_records_count_as_their_events():
    summary = summarize([AGGREGATED])
    records = [e for path in AGGREGATED.glob("*.pfw.gz") for e in json_events(path) if e["ph"] == 3]
    fetch = [e["args"] for e in records if e["name"] == "fetch.iter"]
    stats = summary.by_key[("dataloader", "fetch.iter")]
    assert stats.count == sum(a["dft_cnt"] for a in fetch) == stats.sketch.total
    assert stats.dur_ns == 1000 * sum(a.get("dur_sum", a.get("dur")) for a in fetch)
    assert [p.kind for p in summary.problems] == [P.AGGREGATED] * len(list(AGGREGATED.glob("*.pfw.gz")))


def test_ns_run_converts_to_seconds(ns_run):
    summary = summarize([ns_run])
    raw = recount(sorted(ns_run.glob("*.pfw.gz")))
    assert {info.time_metric for info in summary.files.values()} == {"NS"}
    assert {k: s.dur_ns for k, s in summary.by_key.items()} == {k: dur for k, (_, dur) in raw.items()}
    items = summary.by_key[("data", "item")]
    assert 0.004 <= items.mean_s < 0.1  # each item sleeps 4 ms


def _write_lines(path, lines: list[str]) -> None:
    path.write_text("\n".join(lines) + "\n")


def test_thousands_of_names_and_huge_durations_stay_exact(tmp_path):
    """More keys than the dense histogram allows per batch (sparse counting), and sums past
    2^53 ns (where float bincount would round): still exact."""
    line = '{"name":"%s","cat":"c","pid":1,"tid":1,"ts":%d,"dur":%d,"ph":1}'
    names = [line % (f"n{i}", 1000 + i, i) for i in range(5000)]
    huge = [line % ("big", 10**6, 2**50 + i) for i in range(3)]
    _write_lines(tmp_path / "t.pfw", names + huge)
    summary = summarize_file(tmp_path / "t.pfw")
    assert len(summary.by_key) == 5001
    assert all(s.count == s.sketch.total == 1 for k, s in summary.by_key.items() if k[1] != "big")
    assert summary.by_key[("c", "n4321")].dur_ns == 4321_000
    assert summary.by_key[("c", "big")].dur_ns == 1000 * (3 * 2**50 + 3)


def test_per_process_io_and_span():
    summary = summarize([REAL])
    workers = summary.workers()
    reads = sum(w.io().read_ops for w in workers)
    assert reads == summary.io().read_ops > 0  # the workers did all the reading
    assert all(0 < w.span_s < summary.span_s for w in workers)
    assert summary.io("app").read_ops == 0  # no ai.*.io.* regions in this run
