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

Beside the two classes, the timeline carries *series* the analysis measures the same way
(per bucket, the union of a process's intervals): the loop's wait for a batch
(``fetch.iter``, :data:`FETCH_WAIT`) and its body (``fetch.block``, :data:`FETCH_BODY`), and
one series per category (:func:`category_of`), so that a category's time counts nested
events once (an ``epoch`` around a ``train`` around an ``evaluate`` is not three times).
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
#: the batch loop's wait for the next batch, and its body
FETCH_WAIT, FETCH_BODY = 2, 3
#: a fetch region (``fetch.start()``/``.stop()`` around ``next(it)``): the wait for a batch when
#: a training process records it, loading when a worker does; told apart in pass 2, where the
#: process's role is known (:func:`dftpass.traces.busy.add_series`)
FETCH_REGION = -2
#: series of the categories: CATEGORY_SERIES + the index of the cat in CATEGORY_NAMES
CATEGORY_SERIES = 4
#: data loading split by where it runs: in the processes that train, in worker processes
LOADING_IN_MAIN, LOADING_IN_WORKERS = 40, 41
#: the batches the training loops received (a count per bucket, not busy time)
BATCHES = 42
#: dftracer's own categories, then POSIX/STDIO calls, then everything else (generic regions'
#: module names, dynamo, PP, ...)
SYSCALL_CATEGORY = "POSIX/STDIO"
OTHER_CATEGORY = "other cats"
CATEGORY_NAMES = (*N.CATEGORIES, SYSCALL_CATEGORY, OTHER_CATEGORY)
_CATEGORY_INDEX = {cat: i for i, cat in enumerate(N.CATEGORIES)}
#: the series of dftracer's own records (start, end): in no category
NO_CATEGORY = -1


def category_of(cat: str) -> int:
    """The index of ``cat``'s category series in :data:`CATEGORY_NAMES`."""
    if cat in _CATEGORY_INDEX:
        return _CATEGORY_INDEX[cat]
    if cat in N.SYSCALL_CATS:
        return len(N.CATEGORIES)
    if cat == N.META_CAT:
        return NO_CATEGORY
    return len(N.CATEGORIES) + 1


def fetch_series(cat: str, name: str) -> int:
    """FETCH_WAIT for the loop's wait (``fetch.iter``), FETCH_BODY for its body, FETCH_REGION
    for a fetch region, else NONE."""
    if cat == N.DATALOADER_CAT:
        if name == N.FETCH_ITER:
            return FETCH_WAIT
        if name == N.FETCH_BLOCK:
            return FETCH_BODY
        if name == N.FETCH:
            return FETCH_REGION
    return NONE


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
    fetch: int = NONE
    category: int = NONE

    @property
    def ts_s(self) -> float:
        return self.metric.to_seconds(self.ts)

    @property
    def dur_s(self) -> float:
        return self.metric.to_seconds(self.dur)


def class_events(paths: Iterable[str], problems: list[Problem] | None = None) -> Iterator[ClassEvent]:
    """Stream the complete events of the timeline from trace files (directories searched):
    each with its overlap class (NONE for neither), fetch series and category; each file's
    problems are added to ``problems`` when it is done."""
    for path in trace_files(paths):
        reader = TraceReader(path)
        yield from _of_file(reader)
        if problems is not None:
            problems.extend(reader.problems)


def _of_file(reader: TraceReader) -> Iterator[ClassEvent]:
    for event in reader.events():
        if event.ph != COMPLETE:
            continue
        cat = category_of(event.cat)
        if cat != NO_CATEGORY:
            yield ClassEvent(event.pid, event.cat, event.name, event.ts, event.dur, classify(event.cat, event.name),
                             reader.meta.host_of(event), reader.meta.time_metric, fetch_series(event.cat, event.name),
                             cat)
