"""Reading a trace stays bounded when a file holds what no tracer writes.

    .venv/bin/python bench/trace_limits.py [--line-mib 1024] [--max-s 10] [--max-rss-mb 300]

Builds once (cached in ``bench/.cache/``) a ``.pfw.gz`` of about 1 MB whose decompressed
text is three events, one line of ``--line-mib`` MiB (default 1 GiB, no newline in it), and
three more events. Then runs ``dftpass analyze --json`` on it in a subprocess and prints
its wall time and peak RSS (``ru_maxrss`` of that process), and whether the long line was
reported and the six events kept. Exit 1 when a ``--max-*`` bound is exceeded.

Before the bound on line length (issue 7): 119.6 s and 4,170 MB on this machine; after:
about 1 s and under 100 MB.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import time
from pathlib import Path

from isal import igzip

HERE = Path(__file__).resolve().parent
CACHE = HERE / ".cache" / "trace_limits"
EVENT = ('{"id":%d,"name":"read","cat":"POSIX","type":1,"pid":1,"tid":1,"ts":%d,"dur":5,"ph":1,'
         '"args":{"hhash":"a","ret":10}}\n')


def build(line_mib: int) -> Path:
    folder = CACHE / f"line-{line_mib}mib"
    path = folder / "t-0000000000000001-app.pfw.gz"
    if path.is_file():
        return folder
    folder.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    with igzip.open(tmp, "wb") as out:
        out.write("".join(EVENT % (i, 1000 + 10 * i) for i in range(3)).encode())
        chunk = b"a" * (1 << 20)
        for _ in range(line_mib):
            out.write(chunk)
        out.write(b"\n" + "".join(EVENT % (i, 1000 + 10 * i) for i in range(3, 6)).encode())
    os.replace(tmp, path)
    return folder


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--line-mib", type=int, default=1024)
    parser.add_argument("--max-s", type=float, help="fail above this wall time")
    parser.add_argument("--max-rss-mb", type=float, help="fail above this peak RSS")
    args = parser.parse_args()
    folder = build(args.line_mib)
    size = sum(p.stat().st_size for p in folder.iterdir())
    command = [sys.executable, "-m", "dftpass", "analyze", str(folder), "--json"]
    start = time.perf_counter()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    out, err = proc.communicate()
    wall = time.perf_counter() - start
    # the only child this process ran: its peak is the children's peak
    rss_mb = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    result = json.loads(out)
    long_line = any("long-line" in p for p in result["problems"])
    print(f"file: {size / 1e6:.2f} MB compressed, one line of {args.line_mib} MiB, 6 events")
    print(f"dftpass analyze: {wall:.2f} s, peak RSS {rss_mb:.0f} MB, {result['events']} events kept, "
          f"long line reported: {'yes' if long_line else 'NO'}")
    failed = (result["events"] != 6 or not long_line
              or (args.max_s is not None and wall > args.max_s)
              or (args.max_rss_mb is not None and rss_mb > args.max_rss_mb))
    if failed:
        print("FAILED: " + (err.decode(errors="replace")[-2000:] if proc.returncode not in (0, 1) else
                            "a bound was exceeded or the events/problem are wrong"))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
