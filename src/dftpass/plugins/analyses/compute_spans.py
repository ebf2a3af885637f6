"""The ``compute_spans`` analysis: the statements each training step's folded compute region
covers, when the tracing budget folds it (``overhead``: levers 3 and 4).

ML-R4 places the one ``with ai.compute:`` over each span; ML-R7 leaves the backward of a span
alone and, when the span starts at the model call, that call too. Both read the spans from
here, found once per run (``step_spans`` walks every function's calls).
A statement the region already holds, as written, is ``in_compute_span`` (knowledge).
"""

from __future__ import annotations

import attrs

from dftpass.core.callgraph import CallGraph
from dftpass.core.passes import Pass, PassKind
from dftpass.core.summary import CallSite, StmtPath
from dftpass.plugins.knowledge import is_backward, is_model_call, is_optimizer_step


@attrs.frozen
class StepSpan:
    """One training step's statements in one block, for one compute region: the statement
    at ``first`` (the forward's, or the backward's) through ``step`` (the optimizer step)."""

    first: StmtPath
    line: int
    backward: CallSite
    step: CallSite
    #: the model call the span starts with, when the forward is in it
    forward: CallSite | None = None

    def holds(self, stmt: StmtPath) -> bool:
        """Whether the statement at ``stmt`` is in the span (at any depth)."""
        n = len(self.first)
        return stmt[:n - 1] == self.first[:-1] and len(stmt) >= n and stmt[n - 1][0] == self.first[-1][0] \
            and self.first[-1][1] <= stmt[n - 1][1] <= self.step.stmt[-1][1]


def step_spans(graph: CallGraph, function_id: str, with_forward: bool = False) -> list[StepSpan]:
    """The backward statements followed by an optimizer step in the same block
    (``loss.backward()`` ... ``optimizer.step()``) and, ``with_forward``, the statement of
    that block before them that calls the model (``loss = F.mse_loss(model(x), y)``, or the
    ``with torch.autocast(...):`` holding it): the statements one ``ai.compute`` region
    covers when the tracing budget folds a step's compute. A forward before the previous
    span's step belongs to that span (a GAN's two steps in one block)."""
    fs, fn = graph.functions[function_id]
    expr = [c for c in fn.calls if c.stmt_kind == "expr"]
    backwards = [c for c in expr if is_backward(c)]
    steps = [c for c in expr if is_optimizer_step(graph, fs, fn, c)]
    spans: list[StepSpan] = []
    for b in backwards:
        block, (field, at) = b.stmt[:-1], b.stmt[-1]
        later = [s for s in steps if s.stmt[:-1] == block and s.stmt[-1][0] == field and s.stmt[-1][1] > at]
        if not later:
            continue
        step = min(later, key=lambda s: s.stmt[-1][1])
        forward = None
        if with_forward:
            done = max((p.step.stmt[-1][1] for p in spans if p.step.stmt[:-1] == block), default=-1)
            depth = len(b.stmt)
            models = [c for i, c in enumerate(fn.calls) if len(c.stmt) >= depth and c.stmt[:depth - 1] == block
                      and c.stmt[depth - 1][0] == field and done < c.stmt[depth - 1][1] < at
                      and is_model_call(graph, function_id, i)]
            forward = min(models, key=lambda c: c.stmt[depth - 1][1], default=None)
        first = forward.stmt[:len(b.stmt)] if forward else b.stmt
        spans.append(StepSpan(first, (forward or b).line, b, step, forward))
    return spans


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
