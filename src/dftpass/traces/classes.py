"""The two classes of events whose overlap answers "is loading hidden behind compute?".

Class A, compute: every event of cat ``compute`` (``ai.compute``, ``.forward``, ``.backward``,
``.step``).

Class B, data loading, in any process (DataLoader workers included):

- cat ``data`` (``ai.data.item``, ``.preprocess``, ``data.io.*``): the loading work itself;
- cat ``dataloader`` regions (``ai.dataloader.fetch`` around a fetch or collate), but not
  the ``.iter``/``.block`` events of a wrapped loop. A ``.block`` is the loop *body*, which
  holds the compute. A ``.iter`` (``fetch.iter``) is the training loop *waiting* for a
  batch, in the training process, serial with its compute: adding it to B cannot change
  the overlap (in a bucket where it is the largest B, busyA + busyB <= w already), but its
  long first-batch waits would widen the default buckets (2 x p99) and count waiting as
  loading. It is reported on its own, as the fetch stall;
- POSIX/STDIO read calls (``read``, ``pread64``, ``fread``, ...): with
  ``DFTRACER_DATA_DIR`` set to the dataset, these are the dataset reads.

Everything else (pipeline, checkpoint, comm, device, other, writes, metadata calls) is in
neither class.
"""

from __future__ import annotations

from typing import Iterable, Iterator, NamedTuple

from dftpass.traces import names as N
from dftpass.traces.files import trace_files
from dftpass.traces.problems import Problem
from dftpass.traces.reader import TraceReader
from dftpass.traces.schema import COMPLETE
from dftpass.traces.timeunit import TimeMetric

NONE, COMPUTE, LOADING = -1, 0, 1


def classify(cat: str, name: str) -> int:
    """COMPUTE, LOADING or NONE for events of (cat, name)."""
    if cat == N.COMPUTE_CAT:
        return COMPUTE
    if cat == N.DATA_CAT:
        return LOADING
    if cat == N.DATALOADER_CAT and not name.endswith((N.ITER_SUFFIX, N.BLOCK_SUFFIX)):
        return LOADING
    if cat in N.SYSCALL_CATS and name in N.READ_OPS:
        return LOADING
    return NONE


class ClassEvent(NamedTuple):
    """One event of class A or B; ``ts``/``dur`` as written, in the unit of ``metric``
    (exact integers: float seconds since the epoch would lose sub-microsecond digits)."""

    pid: int
    cat: str
    name: str
    ts: int
    dur: int
    cls: int
    host: str | None
    metric: TimeMetric

    @property
    def ts_s(self) -> float:
        return self.metric.to_seconds(self.ts)

    @property
    def dur_s(self) -> float:
        return self.metric.to_seconds(self.dur)


def class_events(paths: Iterable[str], problems: list[Problem] | None = None) -> Iterator[ClassEvent]:
    """Stream the complete events of both classes from trace files (directories searched);
    each file's problems are added to ``problems`` when it is done."""
    for path in trace_files(paths):
        reader = TraceReader(path)
        yield from _of_file(reader)
        if problems is not None:
            problems.extend(reader.problems)


def _of_file(reader: TraceReader) -> Iterator[ClassEvent]:
    for event in reader.events():
        if event.ph != COMPLETE:
            continue
        cls = classify(event.cat, event.name)
        if cls != NONE:
            yield ClassEvent(event.pid, event.cat, event.name, event.ts, event.dur, cls,
                             reader.meta.host_of(event), reader.meta.time_metric)
