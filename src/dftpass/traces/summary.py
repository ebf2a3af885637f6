"""The mergeable aggregate of a set of trace files, and what is derived from it.

A :class:`Summary` holds exact counts, nanosecond sums and bytes per ``(cat, name)`` and per
process, plus a duration sketch for quantiles. Everything in it merges by addition
(:meth:`Summary.merge`), so files can be summarized in parallel processes, or by a Dask
``map``/``reduce``, and combined in any order. Memory is bounded by (keys x processes),
never by the number of events.

Bytes: ``args.ret`` of POSIX/STDIO data calls (read/write family), ``args.image_size`` of
other events. I/O is reported in two layers: ``syscall`` (POSIX/STDIO calls) and ``app``
(``ai.*.io.*`` regions); see :class:`IOStats`.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dftpass.traces import names as N
from dftpass.traces.problems import Problem
from dftpass.traces.sampling import Sampling
from dftpass.traces.sketch import LogHistogram

Key = tuple[str, str]        # (cat, name)
ProcessId = tuple[str, int]  # (file, pid)
#: the phases (and the root region) whose intervals a summary keeps
PHASES = ("train", "evaluate", "test")
#: (and the waits for a loop's first batch, code 4, to tell them apart per phase)
PHASE_CODES = {"train": 0, "evaluate": 1, "test": 2, "root": 3, "first_fetch": 4}
PHASE_OF_CODE = {code: name for name, code in PHASE_CODES.items()}
#: intervals kept per file (a phase per batch would be a misplaced region)
MAX_INTERVALS = 200_000


@dataclass
class Cell:
    """count, total duration (ns) and bytes of some events."""

    count: int = 0
    dur_ns: int = 0
    bytes: int = 0

    def merge(self, other: Cell) -> None:
        self.count += other.count
        self.dur_ns += other.dur_ns
        self.bytes += other.bytes


@dataclass
class Stats(Cell):
    """A :class:`Cell` with a duration sketch, for mean/p50/p99."""

    sketch: LogHistogram = field(default_factory=LogHistogram)

    def merge(self, other: Cell) -> None:
        super().merge(other)
        if isinstance(other, Stats):
            self.sketch.merge(other.sketch)

    @property
    def total_s(self) -> float:
        return self.dur_ns / 1e9

    @property
    def mean_s(self) -> float:
        return self.dur_ns / self.count / 1e9 if self.count else 0.0

    def quantile_s(self, q: float) -> float:
        return self.sketch.quantile(q) / 1e9

    @property
    def p50_s(self) -> float:
        return self.quantile_s(0.5)

    @property
    def p99_s(self) -> float:
        return self.quantile_s(0.99)


@dataclass
class IOStats:
    """I/O of one layer: ops, bytes and time of reads, writes and metadata calls."""

    read_ops: int = 0
    read_bytes: int = 0
    read_ns: int = 0
    write_ops: int = 0
    write_bytes: int = 0
    write_ns: int = 0
    metadata_ops: int = 0
    metadata_ns: int = 0

    @classmethod
    def of(cls, cells: dict[Key, Cell], layer: str) -> IOStats:
        """``layer`` "syscall" (POSIX/STDIO) or "app" (``ai.*.io.*`` regions)."""
        sums = {kind: Cell() for kind in ("read", "write", "metadata")}
        for key, cell in cells.items():
            kind = _io_kind(key, layer)
            if kind:
                sums[kind].merge(cell)
        read, write, meta = sums["read"], sums["write"], sums["metadata"]
        return cls(read.count, read.bytes, read.dur_ns, write.count, write.bytes, write.dur_ns,
                   meta.count, meta.dur_ns)

    @property
    def io_time_s(self) -> float:
        """Time in reads, writes and metadata calls (summed over processes)."""
        return (self.read_ns + self.write_ns + self.metadata_ns) / 1e9

    @property
    def read_bandwidth(self) -> float | None:
        """Bytes per second of read time (None: too few reads to say)."""
        return _rate(self.read_bytes, self.read_ops, self.read_ns)

    @property
    def write_bandwidth(self) -> float | None:
        return _rate(self.write_bytes, self.write_ops, self.write_ns)

    @property
    def iops(self) -> float | None:
        """Read and write ops per second of read+write time (None: too few to say)."""
        ops = self.read_ops + self.write_ops
        return _rate(ops, ops, self.read_ns + self.write_ns)

    @property
    def metadata_ops_per_s(self) -> float | None:
        return _rate(self.metadata_ops, self.metadata_ops, self.metadata_ns)


#: a rate (bandwidth, IOPS) is given only over at least this many operations and this much
#: time in them: three 4 µs reads from the page cache make "375,000 IOPS", a figure that
#: says nothing about the storage and would be compared as if it did
MIN_RATE_OPS = 100
MIN_RATE_NS = 10_000_000


def _rate(amount: float, ops: int, ns: int) -> float | None:
    if ops < MIN_RATE_OPS or ns < MIN_RATE_NS:
        return None
    return amount / (ns / 1e9)


def _io_kind(key: Key, layer: str) -> str | None:
    cat, name = key
    if layer == "syscall":
        if cat not in N.SYSCALL_CATS:
            return None
        return ("read" if name in N.READ_OPS else "write" if name in N.WRITE_OPS
                else "metadata" if name in N.METADATA_OPS else None)
    op = N.APP_IO_OPS.get(key)
    return op if op in ("read", "write") else "metadata" if op else None


@dataclass
class ProcessSummary:
    """One process as seen in one file."""

    file: str
    pid: int
    host: str | None = None
    role: str | None = None   # app / fork / preload, from the file name
    ppid: int | None = None   # from the ``start`` event
    first_ns: int | None = None
    last_ns: int | None = None
    total: Stats = field(default_factory=Stats)
    by_key: dict[Key, Cell] = field(default_factory=dict)

    @property
    def span_s(self) -> float:
        return (self.last_ns - self.first_ns) / 1e9 if self.first_ns is not None else 0.0

    def io(self, layer: str = "syscall") -> IOStats:
        return IOStats.of(self.by_key, layer)


@dataclass
class FileInfo:
    """How one file read: its role, time unit, lines, records per ``ph``, malformed lines, hosts."""

    path: str
    role: str | None = None
    time_metric: str = ""
    lines: int = 0
    phases: dict[int, int] = field(default_factory=dict)
    malformed: int = 0
    hosts: list[str] = field(default_factory=list)


@dataclass
class Summary:
    """The aggregate of any number of files; ``merge`` two to get the aggregate of both."""

    by_key: dict[Key, Stats] = field(default_factory=dict)
    processes: dict[ProcessId, ProcessSummary] = field(default_factory=dict)
    files: dict[str, FileInfo] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    #: the phase and root regions: (host, pid, phase code, start ns, end ns)
    intervals: list[tuple[str | None, int, int, int, int]] = field(default_factory=list)
    #: the loops' waits for the first batch of an epoch: (count, total ns, longest ns)
    first_fetch: tuple[int, int, int] = (0, 0, 0)
    #: the training processes' step sampling, added up (None: every step traced); the
    #: counts and times of their sampled events are already scaled to all steps
    sampling: Sampling | None = None

    def merge(self, other: Summary) -> Summary:
        for key, stats in other.by_key.items():
            self.by_key.setdefault(key, Stats()).merge(stats)
        for pid, proc in other.processes.items():
            mine = self.processes.get(pid)
            if mine is None:
                self.processes[pid] = proc
                continue
            mine.total.merge(proc.total)
            for key, cell in proc.by_key.items():
                mine.by_key.setdefault(key, Cell()).merge(cell)
            mine.first_ns = _min(mine.first_ns, proc.first_ns)
            mine.last_ns = _max(mine.last_ns, proc.last_ns)
            mine.ppid = mine.ppid if mine.ppid is not None else proc.ppid
        self.files.update(other.files)
        self.problems.extend(other.problems)
        self.intervals.extend(other.intervals)
        a, b = self.first_fetch, other.first_fetch
        self.first_fetch = (a[0] + b[0], a[1] + b[1], max(a[2], b[2]))
        if other.sampling is not None:
            self.sampling = other.sampling.merge(self.sampling)
        return self

    @property
    def events(self) -> int:
        return sum(stats.count for stats in self.by_key.values())

    @property
    def first_ns(self) -> int | None:
        return min((p.first_ns for p in self.processes.values() if p.first_ns is not None), default=None)

    @property
    def last_ns(self) -> int | None:
        return max((p.last_ns for p in self.processes.values() if p.last_ns is not None), default=None)

    @property
    def span_s(self) -> float:
        first, last = self.first_ns, self.last_ns
        return (last - first) / 1e9 if first is not None and last is not None else 0.0

    @property
    def hosts(self) -> list[str]:
        return sorted({h for info in self.files.values() for h in info.hosts})

    def io(self, layer: str = "syscall") -> IOStats:
        return IOStats.of(dict(self.by_key), layer)

    def workers(self) -> list[ProcessSummary]:
        """Processes that are children of another traced process (DataLoader workers and the
        like): forked files, or a ``start`` event whose ppid is a traced pid on the same host."""
        traced = {(p.host, p.pid) for p in self.processes.values()}
        return [p for p in self.processes.values()
                if p.role == N.ROLE_FORK or (p.ppid is not None and (p.host, p.ppid) in traced)]


def _min(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else min(a, b)


def _max(a: int | None, b: int | None) -> int | None:
    return b if a is None else a if b is None else max(a, b)
