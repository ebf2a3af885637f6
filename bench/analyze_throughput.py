"""How fast dftpass reads traces, next to ``gzip -dc`` and ``dftracer_stats`` on the same files.

    .venv/bin/python bench/analyze_throughput.py [--repeats 3] [--events 5200000] [--files 12]
    .venv/bin/python bench/analyze_throughput.py --decoders     # the decoder choice, alone

Generates once (cached in ``bench/.cache/``) a synthetic run in the real dftracer 2.x line
format: 4 training processes (``-app``: compute forward/backward/step, dataloader
fetch.iter/fetch.block, pipeline epoch) and 2 fork DataLoader workers each (``-fork``:
data item, POSIX open64/lseek64/read with ``ret``/close), metadata lines, start/end events.
``dftracer_gen_fake_trace`` was not used: it writes 1.x-style files (a leading ``[``) with
``APP``/``IO`` cats, none of the ``ai`` cats the analysis looks for.

Then measures, each in its own subprocess so peak RSS (``ru_maxrss`` of the process and its
children) belongs to that measurement alone:

- ``gzip -dc`` over the files, one after another (one core): the floor for any reader;
  and in two processes, to show how far this machine's two cores scale at all;
- ``dftpass`` summary + overlap (``analyze``) with jobs=1 and jobs=2;
- ``dftracer_stats`` on a fresh copy (first run builds its index), then again (indexed);
- ``dftpass`` with its cache (:mod:`dftpass.traces.cache`): a first look that fills it, a
  second look of the unchanged files (the issue's target: <= 0.2 s).

Prints medians of ``--repeats`` runs and the ratios to ``gzip -dc``.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from isal import igzip

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache" / "analyze_throughput"
HH = "6882804a826580cd"
T0 = 1_795_944_796_000_000
APPS, WORKERS_PER_APP = 4, 2


# -- the synthetic trace ------------------------------------------------------------------

_META = ('{"name":"%s","cat":"dftracer","type":1,"pid":%d,"tid":%d,"ph":4,'
         '"args":{"hhash":"' + HH + '","name":"%s","value":"%s"}}')


def _head(pid: int, ppid: int, ts: int) -> list[str]:
    return [
        _META % ("HH", pid, pid, "node-0", HH),
        _META % ("thread_name", pid, pid, pid, "thread_name"),
        _META % ("CM", pid, pid, "time_metric", "US"),
        _META % ("FH", pid, pid, "/data/train/shard.bin", "3522a0c729600b64"),
        '{"id":1,"name":"start","cat":"dftracer","type":1,"pid":%d,"tid":%d,"ts":%d,"dur":0,"ph":1,'
        '"args":{"hhash":"%s","ppid":%d,"version":20003}}' % (pid, pid, ts, HH, ppid),
    ]


def _end(pid: int, ident: int, ts: int) -> str:
    return ('{"id":%d,"name":"end","cat":"dftracer","type":1,"pid":%d,"tid":%d,"ts":%d,"dur":0,"ph":1,'
            '"args":{"hhash":"%s","cfg":{"time_metric":"US"},"num_events":%d}}' % (ident, pid, pid, ts, HH, ident))


def _app_lines(pid: int, steps: int, rng: np.random.Generator):
    py = ('{"id":%d,"name":"%s","cat":"%s","type":6,"pid":%d,"tid":%d,"ts":%d,"dur":%d,"ph":1,'
          '"args":{"hhash":"%s","epoch":%d,"step":%d}}')
    it = ('{"id":%d,"name":"%s","cat":"dataloader","type":6,"pid":%d,"tid":%d,"ts":%d,"dur":%d,"ph":1,'
          '"args":{"hhash":"%s","epoch":%d,"step":%d,"count":%d}}')
    yield from _head(pid, 1, T0)
    wait = rng.integers(20, 900, steps)
    fwd, bwd, opt = rng.integers(900, 1400, steps), rng.integers(1500, 2200, steps), rng.integers(100, 300, steps)
    ts, ident = T0 + 1000, 1
    for s in range(steps):
        epoch = s // 10_000
        begin, body = ts, ts + int(wait[s])
        t = body
        for name, dur in (("forward", fwd[s]), ("backward", bwd[s]), ("step", opt[s])):
            ident += 1
            yield py % (ident, name, "compute", pid, pid, t, dur, HH, epoch, s)
            t += int(dur) + 2
        yield it % (ident + 1, "fetch.iter", pid, pid, begin, body - begin, HH, epoch, s, s % 10_000 + 1)
        yield it % (ident + 2, "fetch.block", pid, pid, body, t - body, HH, epoch, s, s % 10_000 + 1)
        ident += 2
        ts = t + 3
    yield _end(pid, ident + 1, ts)


def _worker_lines(pid: int, ppid: int, items: int, rng: np.random.Generator):
    posix = ('{"id":%d,"name":"%s","cat":"POSIX","type":3,"pid":%d,"tid":%d,"ts":%d,"dur":%d,"ph":1,'
             '"args":{"hhash":"%s","ret":%d,"count":%d,"fhash":"3522a0c729600b64"}}')
    item = ('{"id":%d,"name":"item","cat":"data","type":6,"pid":%d,"tid":%d,"ts":%d,"dur":%d,"ph":1,'
            '"args":{"hhash":"%s","epoch":%d,"step":%d,"image_idx":%d,"image_size":262144}}')
    yield from _head(pid, ppid, T0)
    read, work = rng.integers(40, 400, items), rng.integers(3000, 6000, items)
    ts, ident = T0 + 500, 1
    for k in range(items):
        begin = ts
        for name, dur, ret, count in (("open64", 6, 3, 0), ("lseek64", 1, 0, 0), ("read", int(read[k]), 262144, 262145),
                                      ("read", 1, 0, 1), ("close", 2, 0, 0)):
            ident += 1
            yield posix % (ident, name, pid, pid, ts, dur, HH, ret, count)
            ts += dur + 1
        ts = begin + int(work[k])
        ident += 1
        yield item % (ident, pid, pid, begin, ts - begin, HH, k // 20_000, k // 2, k)
        ts += 20
    yield _end(pid, ident + 1, ts)


def _write(path: Path, lines) -> None:
    with igzip.open(path, "wb", compresslevel=1) as fh:
        buf: list[str] = []
        for line in lines:
            buf.append(line)
            if len(buf) >= 20_000:
                fh.write(("\n".join(buf) + "\n").encode())
                buf = []
        if buf:
            fh.write(("\n".join(buf) + "\n").encode())


def ensure_traces(events: int, files: int) -> list[Path]:
    """The cached trace set for (events, files), generated if missing."""
    workers = files - APPS
    assert workers >= APPS and workers % APPS == 0, "files = 4 apps + a multiple of 4 workers"
    out = CACHE / f"{events}-{files}"
    marker = out / "done.json"
    if marker.exists():
        return sorted(out.glob("*.pfw.gz"))
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    per_file = events // files
    rng = np.random.default_rng(42)
    started = time.perf_counter()
    for a in range(APPS):
        pid = 40_000 + 10 * a
        _write(out / f"trace-{a:016x}-app.pfw.gz", _app_lines(pid, per_file // 5, rng))
        for w in range(workers // APPS):
            _write(out / f"trace-{a:08x}{w + 1:08x}-fork.pfw.gz", _worker_lines(pid + w + 1, pid, per_file // 6, rng))
    marker.write_text(json.dumps({"events": events, "files": files,
                                  "seconds": round(time.perf_counter() - started, 1)}))
    return sorted(out.glob("*.pfw.gz"))


# -- one measurement, in its own process ----------------------------------------------------

def _peak_rss_mb() -> float:
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    children = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return max(own, children) / 1024


def measure(kind: str, files: list[str], jobs: int, work_dir: str | None) -> dict:
    if kind == "gzip":
        started = time.perf_counter()
        with open(os.devnull, "wb") as null:
            subprocess.run(["gzip", "-dc", *files], stdout=null, check=True)
        wall = time.perf_counter() - started
        return {"wall": wall, "rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}
    if kind == "gzip2":
        started = time.perf_counter()
        with open(os.devnull, "wb") as null:
            procs = [subprocess.Popen(["gzip", "-dc", *files[i::2]], stdout=null) for i in (0, 1)]
            assert all(p.wait() == 0 for p in procs)
        wall = time.perf_counter() - started
        return {"wall": wall, "rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}
    if kind == "dftpass":
        from dftpass.traces import analyze

        started = time.perf_counter()
        result = analyze(files, jobs=jobs)
        wall = time.perf_counter() - started
        records = sum(sum(info.phases.values()) for info in result.summary.files.values())
        return {"wall": wall, "rss_mb": _peak_rss_mb(), "events": records,
                "overlap": result.overlap.overlap_fraction, "verdict": result.overlap.verdict}
    if kind in ("cache-first", "cache-second"):
        from dftpass.traces import analyze
        from dftpass.traces.cache import TraceCache

        assert work_dir
        cache = TraceCache(Path(work_dir) / "dftpass-cache")
        started = time.perf_counter()
        result = analyze(files, jobs=jobs, cache=cache)
        wall = time.perf_counter() - started
        return {"wall": wall, "rss_mb": _peak_rss_mb(), "hits": cache.hits, "misses": cache.misses,
                "overlap": result.overlap.overlap_fraction}
    tool = shutil.which("dftracer_stats") or str(Path(sys.executable).parent / "dftracer_stats")
    assert work_dir
    if kind == "stats-first":
        for f in files:
            shutil.copy(f, work_dir)
    started = time.perf_counter()
    subprocess.run([tool, "--directory", work_dir], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=True)
    wall = time.perf_counter() - started
    return {"wall": wall, "rss_mb": resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024}


def _run_measure(kind: str, files: list[Path], jobs: int = 1, work_dir: str | None = None) -> dict:
    cmd = [sys.executable, __file__, "--measure", kind, "--jobs", str(jobs), *map(str, files)]
    if work_dir:
        cmd += ["--work-dir", work_dir]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


# -- what decoding costs, alone (the choice of decoder) ----------------------------------------

def decoders(files: list[Path]) -> None:
    """Per-event cost of decompression, and of turning a piece of text into the arrays the
    summary counts with, per JSON decoder (one core, the first two files)."""
    import gc
    import zlib
    from collections import deque

    import msgspec
    from isal import isal_zlib

    from dftpass.traces.schema import FULL, LEAN
    from dftpass.traces.source import line_chunks

    raw = [f.read_bytes() for f in files[:2]]
    pieces = [piece for f in files[:2] for piece in line_chunks(f, [])]
    n = sum(piece.count(b"\n") for piece in pieces)
    print(f"{n:,} events, {sum(map(len, pieces)) / 1e6:.0f} MB of JSON in {len(pieces)} pieces; "
          "ns per event, median of 3")

    def timed(label: str, per_piece) -> None:
        walls = []
        for _ in range(3):
            gc.collect()
            started = time.perf_counter()
            deque(map(per_piece, pieces), maxlen=0)
            walls.append(time.perf_counter() - started)
        print(f"  {label:62} {statistics.median(walls) / n * 1e9:6.0f}")

    def joined(piece: bytes) -> bytes:
        return b"".join((b"[", piece.replace(b"\n", b","), b"{}]"))

    def dict_arrays(events: list) -> list:
        k = len(events)
        return [np.fromiter((e["ph"] for e in events), np.int64, k),
                [(e.get("cat"), e.get("name")) for e in events],
                *(np.fromiter((e.get(f, 0) for e in events), np.int64, k) for f in ("pid", "ts", "dur")),
                np.fromiter((e.get("args", {}).get("ret", -1) for e in events), np.int64, k),
                np.fromiter((e.get("args", {}).get("image_size", -1) for e in events), np.float64, k)]

    def struct_arrays(events: list) -> list:
        k = len(events)
        return [np.fromiter((e.ph for e in events), np.int64, k), [(e.cat, e.name) for e in events],
                *(np.fromiter((getattr(e, f) for e in events), np.int64, k) for f in ("pid", "ts", "dur")),
                np.fromiter((e.args.ret for e in events), np.int64, k),
                np.fromiter((e.args.image_size for e in events), np.float64, k)]

    for label, decompress in (("zlib", lambda: zlib.decompressobj(31)),
                              ("isal (igzip)", lambda: isal_zlib.decompressobj(31))):
        walls = []
        for _ in range(3):
            started = time.perf_counter()
            for r in raw:
                decompress().decompress(r)
            walls.append(time.perf_counter() - started)
        print(f"  {label + ' decompress':62} {statistics.median(walls) / n * 1e9:6.0f}")
    try:
        import orjson
        timed("orjson.loads per line -> dicts", lambda p: list(map(orjson.loads, p.splitlines())))
        timed("orjson.loads, piece as one array -> dicts", lambda p: orjson.loads(joined(p))[:-1])
        timed("  + the summary's arrays", lambda p: dict_arrays(orjson.loads(joined(p))[:-1]))
    except ImportError:
        print("  orjson not installed: skipped")
    timed("msgspec untyped, piece as one array -> dicts", lambda p: msgspec.json.decode(joined(p)))
    timed("msgspec typed per line -> lean Event", lambda p: list(map(LEAN.one.decode, p.splitlines())))
    timed("msgspec typed, piece as one array -> full Event (+tid, id, hashes)", lambda p: FULL.batch.decode(joined(p)))
    timed("msgspec typed, piece as one array -> lean Event (dftpass)", lambda p: LEAN.batch.decode(joined(p)))
    timed("  + the summary's arrays", lambda p: struct_arrays(LEAN.batch.decode(joined(p))))


# -- the table ------------------------------------------------------------------------------

ROWS = [
    ("gzip -dc > /dev/null (1 core)", "gzip", 1),
    ("gzip -dc, 2 processes (2 cores)", "gzip2", 1),
    ("dftpass summary+overlap, jobs=1", "dftpass", 1),
    ("dftpass summary+overlap, jobs=2", "dftpass", 2),
    ("dftracer_stats, first run (indexing)", "stats-first", 1),
    ("dftracer_stats, indexed run", "stats-indexed", 1),
    ("dftpass, first look (fills its cache)", "cache-first", 1),
    ("dftpass, second look (cached)", "cache-second", 1),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--events", type=int, default=5_200_000)
    parser.add_argument("--files", type=int, default=12)
    parser.add_argument("--decoders", action="store_true", help="only measure decompression and JSON decoders")
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    parser.add_argument("--jobs", type=int, default=1, help=argparse.SUPPRESS)
    parser.add_argument("--work-dir", help=argparse.SUPPRESS)
    parser.add_argument("paths", nargs="*", help=argparse.SUPPRESS)
    opts = parser.parse_args()
    if opts.measure:
        print(json.dumps(measure(opts.measure, opts.paths, opts.jobs, opts.work_dir)))
        return

    files = ensure_traces(opts.events, opts.files)
    if opts.decoders:
        decoders(files)
        return
    size_mb = sum(f.stat().st_size for f in files) / 1e6
    results: dict[str, list[dict]] = {label: [] for label, _, _ in ROWS}
    for _ in range(opts.repeats):
        with tempfile.TemporaryDirectory(prefix="bench-stats-") as work:
            for label, kind, jobs in ROWS:
                needs_dir = kind.startswith(("stats", "cache"))
                results[label].append(_run_measure(kind, files, jobs, work if needs_dir else None))
    events = results[ROWS[2][0]][0]["events"]
    gzip_wall = statistics.median(r["wall"] for r in results[ROWS[0][0]])
    print(f"{events:,} events in {len(files)} .pfw.gz files ({size_mb:.0f} MB), {opts.repeats} repeats, "
          f"{os.cpu_count()} cores; medians")
    print(f"{'method':40} {'wall s':>8} {'Mevents/s':>10} {'peak RSS MB':>12} {'x gzip':>7}")
    for label, _, _ in ROWS:
        wall = statistics.median(r["wall"] for r in results[label])
        rss = statistics.median(r["rss_mb"] for r in results[label])
        print(f"{label:40} {wall:8.2f} {events / wall / 1e6:10.2f} {rss:12.0f} {wall / gzip_wall:7.2f}")
    gz1, gz2, one, two, first = (statistics.median(r["wall"] for r in results[ROWS[i][0]]) for i in range(5))
    last = results[ROWS[2][0]][-1]
    cached = results[ROWS[7][0]][-1]
    assert cached["hits"] == len(files) and not cached["misses"], cached  # the second look read nothing again
    assert cached["overlap"] == last["overlap"], (cached, last)  # and found the same
    print(f"second look: {cached['hits']} of {len(files)} files from the cache, the same overlap")
    print(f"jobs=2 speed-up {one / two:.2f}x (gzip on 2 cores: {gz1 / gz2:.2f}x); dftpass jobs=1 is "
          f"{first / one:.2f}x faster than dftracer_stats' first run; "
          f"overlap {last['overlap']:.3f} ({last['verdict']})")


if __name__ == "__main__":
    main()
