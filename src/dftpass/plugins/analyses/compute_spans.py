"""The ``compute_spans`` analysis: the statements each training step's folded compute region
covers, when the tracing budget folds it (``overhead``: levers 3 and 4).

ML-R4 places the one ``with ai.compute:`` over each span; ML-R7 leaves the backward of a span
alone and, when the span starts at the model call, that call too. Both read the spans from
here, found once per run (``step_spans`` walks every function's calls).
"""

from __future__ import annotations

import attrs

from dftpass.core.passes import Pass, PassKind
from dftpass.plugins.knowledge import StepSpan, step_spans


@attrs.frozen
class ComputeSpans:
    """function id -> the spans of its training steps, in source order (none: the budget
    folds nothing, or no step time was given)."""

    by_function: dict[str, list[StepSpan]] = attrs.field(factory=dict)
    #: the spans start at the model call: one compute region a step (the model's other calls
    #: are then timed at their call sites)
    with_forward: bool = False

    def of(self, function_id: str) -> list[StepSpan]:
        return self.by_function.get(function_id, [])


class ComputeSpansAnalysis(Pass):
    """The budget's folded compute regions (``ctx.analysis("compute_spans")``)."""

    id = "compute_spans"
    title = "Folded compute regions"
    kind = PassKind.ANALYSIS
    requires = ("callgraph", "overhead")

    def run(self, ctx) -> ComputeSpans:
        budget = ctx.analysis("overhead")
        if not budget.fold_backward_step:
            return ComputeSpans()
        graph = ctx.analysis("callgraph")
        spans = {f: step_spans(graph, f, budget.fold_forward) for f in graph.functions}
        return ComputeSpans({f: found for f, found in spans.items() if found}, budget.fold_forward)
