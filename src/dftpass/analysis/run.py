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

from dftpass.analysis.accounting import account
from dftpass.analysis.diagnosis import Cause
from dftpass.analysis.metrics import METRICS, shares
from dftpass.analysis.proposals import Proposal, RunFacts, Verdict, propose
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
    diagnosis: Any = None  # plugins.analyses.diagnosis.Diagnosis

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
            "baseline": bool(self.run.record().get("baseline")),
            "project": str(self.project) if self.project else None,
            "repeats": [{"repeat": r.repeat, "wall_s": r.record.get("wall_s"),
                         "exit_code": r.record.get("exit_code"), "resources": r.record.get("resources"),
                         "metrics": r.metrics, "work": r.work,
                         "outputs": r.record.get("outputs")} for r in self.traces.repeats],
            "shown_repeat": self.traces.primary.repeat,
            "metrics": self.traces.medians(),
            "spread": {m: self.traces.spread(m) for m in METRICS},
            "events": summary.events,
            "sampling": summary.sampling.to_dict() if summary.sampling is not None else None,
            "span_s": summary.span_s,
            "time_accounting": account(primary.record, summary),
            "hosts": summary.hosts,
            "processes": {"count": len(summary.processes), "roles": roles},
            "process_table": _processes(summary),
            "categories": _by_category(summary, overlap),
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
                "loading_workers": overlap.loading_workers, "primary_phase": overlap.primary_phase,
                "phases": {name: p.to_dict() for name, p in (overlap.phases or {}).items()}},
            "findings": [f.to_dict() for f in self.findings],
            "diagnosis": self.diagnosis.to_dict() if self.diagnosis is not None else None,
            "causes": [{**c.__dict__, "location": c.location()} for c in self.causes],
            "proposals": [p.to_dict() for p in self.proposals],
            "checklist": [v.__dict__ for v in self.checklist],
            "problems": [str(p) for p in summary.problems],
        }


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


def _by_category(summary, overlap=None) -> list[dict]:
    """Per category: events, bytes, the sum of its events' durations (``sum_s``: nested
    events counted again) and its time (``total_s``): the union of each process's events of
    the category, added over processes, when the run has a timeline."""
    from dftpass.traces.classes import category_of, CATEGORY_NAMES

    cats: dict[str, list] = {}
    for (cat, _), s in summary.by_key.items():
        if cat == E.TRACE_META_CAT:  # dftracer's own start/end records
            continue
        row = cats.setdefault(cat, [0, 0, 0])
        row[0] += s.count
        row[1] += s.dur_ns
        row[2] += s.bytes
    exclusive = (overlap.categories or {}) if overlap is not None else {}
    out = []
    for c, (n, d, b) in cats.items():
        own = exclusive.get(CATEGORY_NAMES[category_of(c)]) if exclusive else None
        # POSIX/STDIO and the other categories share a series: their union is not per cat
        alone = category_of(c) < len(CATEGORY_NAMES) - 2
        out.append({"cat": c, "count": n, "total_s": own if own is not None and alone else d / 1e9,
                    "sum_s": d / 1e9, "bytes": b, "nested_once": bool(own is not None and alone)})
    return sorted(out, key=lambda r: -r["total_s"])


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
                 engine: str = "local", jobs: int | None = None, scheduler: str | None = None,
                 width_s: float | None = None, cache: bool = True, phase: str | None = None,
                 progress=None) -> AnalyzeResult:
    jobs = jobs or config.get("run.jobs") or 1
    run = open_run(path)
    root = source_project(run, project)
    if root is not None and root.is_dir():
        proj = Project.discover(root, config.get("files.include"), config.exclude_globs())
        proj.load(config.get("files.max-bytes"), jobs=jobs)
    else:
        proj = Project(root=Path(path).resolve(), files={})
    ctx = RunContext(config, proj, manager, "analyze", run=run,
                     trace_options={"engine": engine, "jobs": jobs, "scheduler": scheduler, "width_s": width_s,
                                    "cache": cache, "phase": phase, "progress": progress})
    pipeline = manager.order(manager.selected_rules(kinds=(PassKind.RUNTIME,)))
    manager.run(ctx, pipeline)
    traces = ctx.analysis("traces")
    diagnosis = ctx.analysis("diagnosis")
    metrics = traces.primary.metrics
    facts = RunFacts(wall_s=metrics.get("wall_s") or metrics.get("traced_span_s"), shares=shares(metrics),
                     causes=diagnosis.causes, program=diagnosis.facts, gpu=run_used_gpu(run.record(), diagnosis.facts),
                     ranks_per_host=diagnosis.ranks_per_host)
    applied = {a: None for a in run.record().get("applies", [])}
    proposals, checklist = propose(facts, applied)
    return AnalyzeResult(run, root, ctx.findings, traces, diagnosis.causes, proposals, checklist, diagnosis)


def run_used_gpu(record: dict, facts) -> bool | None:
    """Whether the run had a GPU and the program uses one; None when the machine was not
    recorded (runs made before ``run.json`` kept it). With the source, the program's facts
    decide (:attr:`~dftpass.analysis.context.ProgramFacts.gpu`, from the same run.json)."""
    if facts is not None:
        return facts.gpu
    machine = record.get("machine")
    return bool(machine.get("gpu")) if machine else None


def save(result: AnalyzeResult) -> Path | None:
    """Write ``analysis.json`` into a run folder (not into a bare trace folder)."""
    if not isinstance(result.run, RunDir):
        return None
    target = result.run.path / ANALYSIS_FILE
    atomic_write(target, json.dumps(result.to_dict(), indent=2, default=str).encode("utf-8"), result.run.path)
    return target


def saved_analysis(path: Path) -> dict | None:
    """The saved ``analysis.json`` of a run when it is newer than the run (None: analyse it)."""
    run = open_run(path)
    if isinstance(run, RunDir):
        saved = run.path / ANALYSIS_FILE
        try:
            if saved.is_file() and saved.stat().st_mtime >= run.run_file.stat().st_mtime:
                data = json.loads(saved.read_text(encoding="utf-8"))
                # one saved with `analyze --phase` judged another phase than compare expects
                return None if (data.get("diagnosis") or {}).get("asked_phase") else data
        except (OSError, ValueError):
            return None  # unreadable or half-written by hand: analysed again
    return None


def load_or_analyze(path: Path, setup, **options) -> dict:
    """The saved ``analysis.json`` of a run when it is newer than the run, else a fresh
    analysis. ``setup()`` gives (config, pass manager), called only when one is needed:
    loading the plugins costs more than reading a saved analysis."""
    saved = saved_analysis(path)
    if saved is not None:
        return saved
    config, manager = setup()
    result = analyze_path(path, config, manager, **options)
    save(result)
    return json.loads(json.dumps(result.to_dict(), default=str))
