"""dftracer's files as one Chrome trace-event JSON file, for Perfetto and the Chrome trace viewer.

dftracer writes newline-delimited events whose ``ph`` is a number (1 complete, 2 counter, 3
aggregated, 4 metadata; ``trace-format.md``) and whose times are in the unit its ``CM
time_metric`` line says. The viewers read the trace-event format: a JSON object with
``traceEvents``, ``ph`` a letter, times in microseconds. :func:`write_chrome_trace` turns
every file of a run into that, streaming (a run's traces can be larger than memory):

* complete events -> ``"X"`` (their ``args`` kept: step, epoch, image_size...);
* counters -> ``"C"``;
* aggregated records (selective aggregation) -> left out, counted in the result;
* each process gets a name the viewer shows on its track: its role (``app``: a training
  process, ``fork``/``spawn``: a DataLoader worker) and pid, sorted training first;
* the phases (``pipeline`` events: train, evaluate, test, epochs) are complete events like
  the others: the viewer shows them as the outer bars of each training process's track.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import IO, Iterable

import attrs

from dftpass.traces import problems as P
from dftpass.traces.files import role_of, trace_files
from dftpass.traces.source import line_chunks

#: dftracer's ``ph`` numbers -> trace-event phases
_PH = {1: "X", 2: "C"}
#: how many microseconds one unit of each ``time_metric`` is
_TO_US = {"US": 1.0, "NS": 1e-3, "MS": 1e3}
#: track order in the viewer: training processes first, then workers
_ROLE_ORDER = {"app": 0, "spawn": 1, "fork": 2}


@attrs.define
class Exported:
    events: int = 0
    processes: int = 0
    aggregated_left_out: int = 0
    problems: list = attrs.field(factory=list)


def _lines(path: Path, problems: list) -> Iterable[bytes]:
    rest = b""
    for chunk in line_chunks(path, problems):
        *lines, rest = (rest + chunk).split(b"\n")
        yield from lines
    if rest:
        yield rest


def write_chrome_trace(paths: Iterable[Path], out: IO[str]) -> Exported:
    """Write the events of every trace file under ``paths`` to ``out`` as one trace-event JSON
    object; a line that is not JSON is skipped and counted as a problem of its file."""
    result = Exported()
    out.write('{"displayTimeUnit": "ms", "traceEvents": [\n')
    first = True
    roles: dict[int, str] = {}
    for path in trace_files(paths, result.problems):
        scale = 1.0
        role = role_of(path) or "app"
        bad = 0
        for line in _lines(path, result.problems):
            if not line.strip():
                continue
            try:
                event = json.loads(line)
            except ValueError:
                bad += 1
                continue
            ph = event.get("ph")
            if ph == 4:
                args = event.get("args") or {}
                if event.get("name") == "CM" and args.get("name") == "time_metric":
                    scale = _TO_US.get(str(args.get("value")).upper(), 1.0)
                continue
            if ph == 3:
                result.aggregated_left_out += 1
                continue
            letter = _PH.get(ph)
            if letter is None or "ts" not in event:
                continue
            pid = event.get("pid", 0)
            roles.setdefault(pid, role)
            shown = {"name": event.get("name"), "cat": event.get("cat"), "ph": letter, "pid": pid,
                     "tid": event.get("tid", pid), "ts": event["ts"] * scale, "args": event.get("args") or {}}
            if letter == "X":
                shown["dur"] = (event.get("dur") or 0) * scale
            out.write(("" if first else ",\n") + json.dumps(shown, separators=(",", ":")))
            first = False
            result.events += 1
        if bad:
            result.problems.append(P.Problem(str(path), P.MALFORMED, f"{bad} line(s) that are not JSON left out"))
    for pid, role in sorted(roles.items(), key=lambda kv: (_ROLE_ORDER.get(kv[1], 3), kv[0])):
        label = {"app": "training process", "fork": "DataLoader worker (fork)",
                 "spawn": "DataLoader worker (spawn)"}.get(role, role)
        for meta in ({"name": "process_name", "ph": "M", "pid": pid, "args": {"name": f"{label} {pid}"}},
                     {"name": "process_sort_index", "ph": "M", "pid": pid,
                      "args": {"sort_index": _ROLE_ORDER.get(role, 3)}}):
            out.write(("" if first else ",\n") + json.dumps(meta, separators=(",", ":")))
            first = False
    out.write("\n]}\n")
    result.processes = len(roles)
    return result
