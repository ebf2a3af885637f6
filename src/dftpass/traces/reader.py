"""Streaming reader of one trace file: batches of :class:`~dftpass.traces.schema.Event`.

Accepts every format users still have (see ``trace-format.md``): dftracer 2.x (one JSON
object per line, integer ``ph``), 1.x (a leading ``[``, ``ph`` letters, trailing commas)
and the dlio-profiler era (numbers as strings). Memory stays bounded: the file is read in
pieces of a few MB (:mod:`~dftpass.traces.source`) and each piece becomes one batch.

A 2.x piece is decoded in a single call (its lines joined into a JSON array); a piece that
call refuses, and every piece of a 1.x/dlio file, is decoded line by line so that one bad
line costs only itself. Metadata lines (``ph`` 4: host, file and string hashes, custom
metadata incl. ``time_metric``) are resolved into :class:`TraceMeta` as they pass by and
stay in the batch (consumers skip them by ``ph``).

Usage::

    reader = TraceReader(path)
    for event in reader.events():          # or: for batch in reader.batches()
        seconds = reader.meta.time_metric.to_seconds(event.dur)
    print(*reader.problems, sep="\\n")
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator, NamedTuple

import msgspec
import numpy as np

from dftpass.traces import names as N
from dftpass.traces import problems as P
from dftpass.traces.schema import FULL, METADATA, Schema, normalize
from dftpass.traces.source import line_chunks
from dftpass.traces.timeunit import DEFAULT_METRIC, TimeMetric

#: how many malformed line numbers a problem message names
SHOWN_LINES = 5


@dataclass
class TraceMeta:
    """What a file's metadata lines say: hash -> name tables, custom metadata, time unit."""

    time_metric: TimeMetric = DEFAULT_METRIC
    hosts: dict[str, str] = field(default_factory=dict)    # host hash -> host name
    files: dict[str, str] = field(default_factory=dict)    # file hash -> path
    strings: dict[str, str] = field(default_factory=dict)  # string hash -> string
    custom: dict[str, Any] = field(default_factory=dict)   # CM name -> value

    def absorb(self, event: Any) -> None:
        """Take in one metadata event (``ph`` 4); other events are ignored."""
        if event.ph != METADATA:
            return
        name, value = event.args.name, event.args.value
        if event.name == N.META_HOST:
            self.hosts[str(value)] = str(name)
        elif event.name == N.META_FILE:
            self.files[str(value)] = str(name)
        elif event.name == N.META_STRING:
            self.strings[str(value)] = str(name)
        elif event.name == N.META_CUSTOM:
            self.custom[str(name)] = value
            if name == N.TIME_METRIC_KEY:
                self.time_metric = TimeMetric.parse(value) or self.time_metric

    @property
    def host(self) -> str | None:
        """The file's host: the first host line (dftracer writes one per process file)."""
        return next(iter(self.hosts.values()), None)

    def host_of(self, event: Any) -> str | None:
        """The host name of an event: the plain dlio-era ``hostname``, its resolved ``hhash``
        (full events only), or the file's host."""
        if event.args.hostname is not None:
            return str(event.args.hostname)
        hhash = getattr(event.args, "hhash", None)
        return self.hosts.get(str(hhash), str(hhash)) if hhash is not None else self.host


class Batch(NamedTuple):
    """The events of one piece of a file, with their ``ph`` as an array (consumers that work
    on arrays need it anyway; the reader needs it to find the metadata lines)."""

    events: list[Any]
    phases: np.ndarray


class TraceReader:
    """Reads one trace file; ``meta``, ``problems`` and the counters fill as it goes.

    ``schema`` picks the event type: :data:`~dftpass.traces.schema.FULL` (every field,
    :class:`~dftpass.traces.schema.Event`) or ``LEAN`` (what the summary needs, ~2x faster)."""

    def __init__(self, path: str | Path, schema: Schema = FULL) -> None:
        self.path = str(path)
        self.schema = schema
        self.meta = TraceMeta()
        self.problems: list[P.Problem] = []
        self.lines = 0
        self.events_read = 0
        self.malformed = 0
        self._bad_lines: list[int] = []

    def events(self) -> Iterator[Any]:
        for batch in self.batches():
            yield from batch.events

    def batches(self) -> Iterator[Batch]:
        legacy: bool | None = None
        for chunk in line_chunks(self.path, self.problems):
            if legacy is None:
                start = chunk.lstrip()
                if not start:
                    self.lines += chunk.count(b"\n")
                    continue
                legacy = start[:1] == b"["
            events = None if legacy else self._decode_joined(chunk)
            if events is None:
                first_line = self.lines + 1
                self.lines += chunk.count(b"\n") + (not chunk.endswith(b"\n"))
                events = self._decode_lines(chunk, first_line, legacy=bool(legacy))
            else:
                self.lines += len(events)  # one event per line, or the joined decode fails
            phases = np.fromiter((e.ph for e in events), np.int64, len(events))
            self._absorb([events[i] for i in np.flatnonzero(phases == METADATA)])
            self.events_read += len(events)
            yield Batch(events, phases)
        if self.malformed:
            shown = ", ".join(map(str, self._bad_lines))
            more = ", ..." if self.malformed > len(self._bad_lines) else ""
            self.problems.append(P.Problem(self.path, P.MALFORMED,
                                           f"lines that are not JSON events were skipped (line {shown}{more})",
                                           self.malformed))

    def _absorb(self, metadata: list[Any]) -> None:
        before = self.meta.time_metric
        for event in metadata:
            self.meta.absorb(event)
        if self.meta.time_metric != before and self.events_read:
            self.problems.append(P.Problem(
                self.path, P.LATE_METRIC,
                f"time_metric {self.meta.time_metric.name} appeared after {self.events_read} events "
                f"that were read as {before.name}"))

    def _decode_joined(self, chunk: bytes) -> list[Any] | None:
        """All lines of a 2.x piece in one decode call; None if any line (or a blank one) spoils
        it. The array gets a closing ``{}`` after the last comma, dropped after decoding:
        cheaper than copying the piece to strip its last newline."""
        comma = b"" if chunk.endswith(b"\n") else b","
        try:
            events = self.schema.batch.decode(b"".join((b"[", chunk.replace(b"\n", b","), comma, b"{}]")))
        except msgspec.DecodeError:
            return None
        events.pop()
        return events

    def _decode_lines(self, chunk: bytes, first_line: int, legacy: bool) -> list[Any]:
        out: list[Any] = []
        for number, line in enumerate(chunk.split(b"\n"), first_line):
            text = line.strip()
            if legacy:
                text = text.removeprefix(b"[").removesuffix(b"]").strip().removesuffix(b",")
            if not text:
                continue
            try:
                event = self.schema.one.decode(text)
            except msgspec.DecodeError:
                event = normalize(text, self.schema.type)
            if event is None:
                self.malformed += 1
                if len(self._bad_lines) < SHOWN_LINES:
                    self._bad_lines.append(number)
                continue
            if event.args.hostname is not None:
                name = str(event.args.hostname)
                self.meta.hosts.setdefault(name, name)
            out.append(event)
        return out

