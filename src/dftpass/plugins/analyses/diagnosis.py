"""The ``diagnosis`` analysis: the bottleneck of the traced run, its causes, and the facts
of the program that advice depends on.

Computed once per ``dftpass analyze`` (ML-R24 reports from it; the proposals are sized from
it). It reads the median repeat's traces (``traces``) and, when the run's project is known,
the source through the ``callgraph``, ``loops`` and ``frameworks`` analyses, scoped to the
program the traced command ran (:func:`dftpass.analysis.context.program_facts`).
"""

from __future__ import annotations

from typing import Any

import attrs

from dftpass.core.passes import Pass, PassKind


@attrs.define
class Diagnosis:
    bottleneck: Any  # dftpass.analysis.bottleneck.Bottleneck
    causes: list  # dftpass.analysis.diagnosis.Cause, those that explain the bottleneck first
    facts: Any | None  # dftpass.analysis.context.ProgramFacts (None: no source)
    #: training processes that ran at once on one host (ranks)
    ranks_per_host: int = 1
    #: the phase the user asked to judge (``analyze --phase``), None: the default choice
    asked_phase: str | None = None

    @property
    def top_cause(self):
        return next((c for c in self.causes if c.explains), None)

    def to_dict(self) -> dict:
        top = self.top_cause
        return {"bottleneck": self.bottleneck.to_dict(), "top_cause": top.id if top else None,
                "program": self.facts.to_dict() if self.facts is not None else None,
                "ranks_per_host": self.ranks_per_host, "asked_phase": self.asked_phase}


def ranks_per_host(summary) -> int:
    """The most training (not worker) processes on one host."""
    workers = {(p.host, p.pid) for p in summary.workers()}
    hosts: dict[str | None, set[int]] = {}
    for p in summary.processes.values():
        if (p.host, p.pid) not in workers:
            hosts.setdefault(p.host, set()).add(p.pid)
    return max((len(pids) for pids in hosts.values()), default=1)


def diagnose_run(ctx) -> Diagnosis:
    from dftpass.analysis.bottleneck import judge_bottleneck
    from dftpass.analysis.context import program_facts
    from dftpass.analysis.diagnosis import PERSISTENT, diagnose, trace_causes

    traces = ctx.analysis("traces")
    analysis = traces.primary.analysis
    record = traces.primary.record
    facts = graph = loops = None
    saves: list[tuple[str, int, str]] = []
    if ctx.project.files:
        graph, loops = ctx.analysis("callgraph"), ctx.analysis("loops")
        facts = program_facts(graph, loops, ctx.analysis("frameworks"), ctx.project.root, record.get("command"),
                              record.get("cwd"), ctx.run.record().get("machine") or record.get("machine"))
        for function_id, ops in sorted(ctx.analysis("checkpoints").ops.items()):
            if facts.scope is not None and function_id not in facts.scope:
                continue
            fs, fn = graph.functions[function_id]
            saves += [(fs.relpath, fn.calls[op.index].line, op.api) for op in ops if op.kind == "save"]
    asked = ctx.trace_options.get("phase")
    neck = judge_bottleneck(analysis.overlap, analysis.summary, facts, asked)
    causes = diagnose(neck, analysis.overlap, analysis.summary, facts, graph, loops, ctx.run.label, saves)
    if not any(c.id == PERSISTENT for c in causes):  # workers re-created, though not the bottleneck
        causes += trace_causes(analysis.summary, ctx.run.label)
    return Diagnosis(neck, causes, facts, ranks_per_host(analysis.summary), asked)


class DiagnosisAnalysis(Pass):
    """The traced run's bottleneck, its causes from trace and source, and the program's facts."""

    id = "diagnosis"
    title = "Bottleneck and causes"
    kind = PassKind.ANALYSIS
    requires = ("traces", "callgraph", "loops", "frameworks", "checkpoints")

    def run(self, ctx) -> Diagnosis:
        if ctx.run is None:
            raise RuntimeError("the diagnosis needs a run (dftpass analyze RUN)")
        return diagnose_run(ctx)
