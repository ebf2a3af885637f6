"""``dftpass analyze``: the runtime rules, the diagnosis and the proposals of one run.

The run's traces are read once (the ``traces`` analysis); the runtime rules (ML-R15,
ML-R16, ML-R24) run as passes of the same pass manager as the annotation rules, over a
context that holds the run and, for the diagnosis, the project that produced it (the
command's working folder, or ``--project``). The result is written to the run's folder as
``analysis.json`` for ``compare`` and ``report``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import attrs

from dftpass.analysis.diagnosis import Cause, find_causes, trace_causes
from dftpass.analysis.metrics import METRICS, shares
from dftpass.analysis.proposals import Proposal, Verdict, propose
from dftpass.core import emitter as E
from dftpass.core.config import Config
from dftpass.core.context import RunContext
from dftpass.core.findings import Finding
from dftpass.core.manager import PassManager
from dftpass.core.passes import PassKind
from dftpass.core.project import Project
from dftpass.core.writer import atomic_write
from dftpass.runs.layout import RunDir, TraceDir, open_run

ANALYSIS_FILE = "analysis.json"


@attrs.define
class AnalyzeResult:
    run: RunDir | TraceDir
    project: Path | None
    findings: list[Finding]
    traces: Any  # plugins.analyses.traces.RunAnalysis
    causes: list[Cause]
    proposals: list[Proposal]
    checklist: list[Verdict]

    def to_dict(self, top: int = 25) -> dict:
        primary = self.traces.primary
        summary = primary.analysis.summary
        overlap = primary.analysis.overlap
        keys = sorted(((k, v) for k, v in summary.by_key.items() if k[0] != E.TRACE_META_CAT),
                      key=lambda kv: -kv[1].dur_ns)
        procs = summary.processes.values()
        roles: dict[str, int] = {}
        for p in procs:
            roles[p.role or "other"] = roles.get(p.role or "other", 0) + 1
        io = summary.io("syscall")
        return {
            "label": self.run.label,
            "path": str(self.run.path),
            "applies": self.run.record().get("applies", []),
            "project": str(self.project) if self.project else None,
            "repeats": [{"repeat": r.repeat, "wall_s": r.record.get("wall_s"),
                         "exit_code": r.record.get("exit_code"), "metrics": r.metrics} for r in self.traces.repeats],
            "metrics": self.traces.medians(),
            "spread": {m: self.traces.spread(m) for m in METRICS},
            "events": summary.events,
            "span_s": summary.span_s,
            "outside_span": outside_span(primary.record, summary),
            "hosts": summary.hosts,
            "processes": {"count": len(summary.processes), "roles": roles},
            "process_table": _processes(summary),
            "categories": _by_category(summary),
            "top": [{"cat": c, "name": n, "count": s.count, "total_s": s.total_s, "mean_s": s.mean_s,
                     "p50_s": s.p50_s, "p99_s": s.p99_s, "bytes": s.bytes} for (c, n), s in keys[:top]],
            "io": {"read_bytes": io.read_bytes, "write_bytes": io.write_bytes, "read_ops": io.read_ops,
                   "write_ops": io.write_ops, "metadata_ops": io.metadata_ops, "io_time_s": io.io_time_s,
                   "read_bandwidth": io.read_bandwidth, "write_bandwidth": io.write_bandwidth, "iops": io.iops,
                   "metadata_ops_per_s": io.metadata_ops_per_s},
            "overlap": None if overlap is None else {
                "verdict": overlap.verdict, "reason": overlap.reason, "overlap_fraction": overlap.overlap_fraction,
                "stall_share": overlap.stall_share, "loading_share": overlap.loading_share,
                "compute_s": overlap.compute_s, "loading_s": overlap.loading_s, "overlap_s": overlap.overlap_s,
                "bucket_width_s": overlap.bucket_width_s, "fetch_iter_s": overlap.fetch_iter_s,
                "fetch_block_s": overlap.fetch_block_s, "fetch_stall_share": overlap.fetch_stall_share,
                "loading_workers": overlap.loading_workers},
            "findings": [f.to_dict() for f in self.findings],
            "causes": [attrs.asdict(c) if attrs.has(type(c)) else c.__dict__ for c in self.causes],
            "proposals": [p.to_dict() for p in self.proposals],
            "checklist": [v.__dict__ for v in self.checklist],
            "problems": [str(p) for p in summary.problems],
        }


def outside_span(record: dict, summary) -> dict | None:
    """How much of the run's wall time lies outside the traced span, and where: before the
    first event (interpreter start-up, imports, data set-up before initialization) and after
    the last (finalize, shutdown). None without a wall time or events. The split needs the
    run's start and end (``dftpass trace`` records them) and the trace's epoch timestamps, on
    one host's clock; otherwise only the total is given."""
    wall = record.get("wall_s")
    if not wall or summary.first_ns is None:
        return None
    outside = max(0.0, wall - summary.span_s)
    out = {"wall_s": wall, "span_s": summary.span_s, "outside_s": outside, "before_s": None, "after_s": None}
    start, end = _epoch_ns(record.get("start")), _epoch_ns(record.get("end"))
    if start is not None and end is not None and len(summary.hosts) <= 1:
        before, after = (summary.first_ns - start) / 1e9, (end - summary.last_ns) / 1e9
        if before >= -0.01 and after >= -0.01:  # the same clock (ms-rounded times): the split is meaningful
            out["before_s"], out["after_s"] = max(0.0, before), max(0.0, after)
    return out


def _epoch_ns(stamp: str | None) -> int | None:
    import datetime as dt

    try:
        return round(dt.datetime.fromisoformat(stamp).timestamp() * 1e9) if stamp else None
    except ValueError:
        return None


def _processes(summary) -> list[dict]:
    """Per process: events, time in events, span, bytes and I/O rates (the training process first)."""
    rows = []
    for proc in summary.processes.values():
        cells = {k: c for k, c in proc.by_key.items() if k[0] != E.TRACE_META_CAT}
        io = proc.io("syscall")
        rows.append({"file": Path(proc.file).name, "pid": proc.pid, "role": proc.role, "host": proc.host,
                     "events": sum(c.count for c in cells.values()),
                     "busy_s": sum(c.dur_ns for c in cells.values()) / 1e9, "span_s": proc.span_s,
                     "bytes": sum(c.bytes for c in cells.values()), "read_bandwidth": io.read_bandwidth,
                     "iops": io.iops, "metadata_ops": io.metadata_ops})
    return sorted(rows, key=lambda r: (r["role"] != "app", -r["busy_s"]))


def _by_category(summary) -> list[dict]:
    cats: dict[str, list] = {}
    for (cat, _), s in summary.by_key.items():
        if cat == E.TRACE_META_CAT:  # dftracer's own start/end records
            continue
        row = cats.setdefault(cat, [0, 0, 0])
        row[0] += s.count
        row[1] += s.dur_ns
        row[2] += s.bytes
    return [{"cat": c, "count": n, "total_s": d / 1e9, "bytes": b}
            for c, (n, d, b) in sorted(cats.items(), key=lambda kv: -kv[1][1])]


def source_project(run: RunDir | TraceDir, override: Path | None) -> Path | None:
    """The project whose source explains the run: --project, else the command's working folder
    (or the folder of the script it ran) when it holds Python files."""
    if override is not None:
        return override.resolve()
    reps = run.record().get("repeats", [])
    if not reps or not reps[0].get("cwd"):
        return None
    cwd = Path(reps[0]["cwd"])
    candidates = [cwd] + [cwd / a for a in reps[0].get("command", []) if a.endswith(".py")]
    for c in candidates:
        folder = c if c.is_dir() else c.parent
        if folder.is_dir() and any(folder.glob("*.py")):
            return folder.resolve()
    return None


def analyze_path(path: Path, config: Config, manager: PassManager, *, project: Path | None = None,
                 engine: str = "local", jobs: int = 1, scheduler: str | None = None,
                 width_s: float | None = None) -> AnalyzeResult:
    run = open_run(path)
    root = source_project(run, project)
    if root is not None and root.is_dir():
        proj = Project.discover(root, config.get("files.include"), config.exclude_globs())
        proj.load(config.get("files.max-bytes"), jobs=jobs)
    else:
        proj = Project(root=Path(path).resolve(), files={})
    ctx = RunContext(config, proj, manager, "analyze", run=run,
                     trace_options={"engine": engine, "jobs": jobs, "scheduler": scheduler, "width_s": width_s})
    pipeline = manager.order(manager.selected_rules(kinds=(PassKind.RUNTIME,)))
    manager.run(ctx, pipeline)
    traces = ctx.analysis("traces")
    overlap = traces.primary.analysis.overlap
    causes: list[Cause] = trace_causes(traces.primary.analysis.summary, run.label)
    gpu = False
    if proj.files:
        loops = ctx.analysis("loops")
        causes += find_causes(ctx.analysis("callgraph"), loops, loops.options.loader_factories,
                              workers_traced=bool(overlap.loading_workers) if overlap else None)
        det = ctx.analysis("frameworks")
        gpu = det.cuda or det.hip_in_code
    by_cause: dict[str, list[str]] = {}
    for c in causes:
        by_cause.setdefault(c.id, []).append(f"{c.location()} {c.message}")
    applied = {a: None for a in run.record().get("applies", [])}
    proposals, checklist = propose(shares(traces.medians()), by_cause, gpu, applied)
    return AnalyzeResult(run, root, ctx.findings, traces, causes, proposals, checklist)


def save(result: AnalyzeResult) -> Path | None:
    """Write ``analysis.json`` into a run folder (not into a bare trace folder)."""
    if not isinstance(result.run, RunDir):
        return None
    target = result.run.path / ANALYSIS_FILE
    atomic_write(target, json.dumps(result.to_dict(), indent=2, default=str).encode("utf-8"), result.run.path)
    return target


def load_or_analyze(path: Path, config: Config, manager: PassManager, **options) -> dict:
    """The saved ``analysis.json`` of a run when it is newer than the run, else a fresh analysis."""
    run = open_run(path)
    if isinstance(run, RunDir):
        saved = run.path / ANALYSIS_FILE
        if saved.is_file() and saved.stat().st_mtime >= run.run_file.stat().st_mtime:
            return json.loads(saved.read_text(encoding="utf-8"))
    result = analyze_path(path, config, manager, **options)
    save(result)
    return json.loads(json.dumps(result.to_dict(), default=str))
