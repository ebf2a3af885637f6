"""Reading and analysing dftracer traces: what to import.

Whole runs (directories or files; every problem of every file is in the summary)::

    from dftpass.traces import analyze, summarize
    result = analyze(["run/traces/raw"], jobs=2)     # Analysis(summary, overlap)
    result.summary.by_key[("compute", "forward")].p99_s
    result.summary.io().read_bandwidth               # bytes/s of POSIX/STDIO reads
    result.overlap.verdict                           # "no overlap" / "below target" / "target met" / "cannot judge"
    print(*result.summary.problems, sep="\\n")

    summarize(paths, jobs=2)                         # the Summary alone (one pass, no spill files)

One file, event by event (any format version; ts/dur in the file's unit)::

    from dftpass.traces import TraceReader
    reader = TraceReader(path)
    for event in reader.events(): ...
    reader.meta.time_metric.to_seconds(event.dur); reader.problems

The two overlap classes as a stream (seconds), and the map/reduce pieces for other engines
(Dask: map ``summarize_file`` and reduce ``Summary.merge``; map ``busy_of_events`` or a
``BusyAccumulator`` per process group, reduce ``ClassBusy.merge``; then ``judge``)::

    from dftpass.traces import class_events, busy_of_events, judge, summarize_file

Method, units, accuracy and measured speed: ``docs/traces.md``.
"""

from dftpass.traces.aggregate import summarize_file
from dftpass.traces.analysis import Analysis, analyze, summarize
from dftpass.traces.busy import BusyAccumulator, ClassBusy, busy_of_events
from dftpass.traces.classes import COMPUTE, LOADING, ClassEvent, class_events, classify
from dftpass.traces.overlap import Overlap, default_width_ns, judge
from dftpass.traces.problems import Problem
from dftpass.traces.reader import TraceMeta, TraceReader
from dftpass.traces.schema import Event
from dftpass.traces.summary import IOStats, ProcessSummary, Stats, Summary
from dftpass.traces.timeunit import TimeMetric

__all__ = [
    "Analysis", "analyze", "summarize", "summarize_file",
    "Summary", "Stats", "IOStats", "ProcessSummary", "Problem",
    "Overlap", "judge", "default_width_ns",
    "TraceReader", "TraceMeta", "Event", "TimeMetric",
    "ClassEvent", "class_events", "classify", "COMPUTE", "LOADING",
    "BusyAccumulator", "ClassBusy", "busy_of_events",
]
