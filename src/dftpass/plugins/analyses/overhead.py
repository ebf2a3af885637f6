"""The ``overhead`` analysis: how much tracing may cost a training step, and the granularity
that keeps it within that budget.

Tracing costs a fixed few microseconds per event with tracing on (docs/performance.md,
"Overhead of the regions"). What dftpass puts on a training step writes, per step: the wait
for the batch and the loop's body (``fetch.iter``: two events), the forward, backward and
optimizer-step regions, and the step's metadata update. On a 6 ms step that is ~1%; on a
1 ms step ~6%. The budget (``overhead.budget``, 3% by default) turns that from an accident
into a choice: given the step time (``--step-time``, or ``overhead.step-time``), this
analysis predicts the cost of the full placement and coarsens it, cheapest information
first, until the prediction fits:

1. the metadata update every k-th step (the step numbers of the other steps' events are
   then those of the last update: still ordered, coarser);
2. no loop-body event (``fetch.iter(..., include_block=False)``): the wait for each batch
   is kept, the body's time is the gap between two waits;
3. the backward pass and the optimizer step in one region (``ai.compute`` from the backward
   statement through the step: ML-R7 leaves the backward alone, ML-R4 spans both), where
   they are statements of one block; the forward keeps its own.

What is left (the wait, the forward and the folded region, which the overlap analysis needs
as compute) is the floor:
when even that exceeds the budget, the plan says so with the figures. With no step time the
full placement stays and nothing is predicted: the cost depends on a number dftpass does not
know. The rules read the decision (:class:`Granularity`) from here: ML-R8 guards its update,
ML-R6 leaves out the body event, ML-R7 and ML-R4 fold backward and step.
"""

from __future__ import annotations

import math

import attrs

from dftpass.core.passes import Pass, PassKind

#: µs per use with tracing on, measured by bench/overhead.py (2026-12-02, docs/performance.md)
COST_US = {
    "fetch.iter": 18.83,  # the wait and the body: two events a step
    "fetch.body": 8.0,  # the body's event alone (one region's cost)
    "compute": 8.0,  # one of forward, backward, the optimizer step
    "update": 15.88,  # the step's guarded subtree update (ML-R8)
}
#: the compute regions a training step writes (forward, backward, the optimizer step)
COMPUTE_REGIONS = 3
#: the longest interval between two metadata updates, in steps
MAX_UPDATE_EVERY = 64


@attrs.frozen
class Granularity:
    """What the rules place per step, and why."""

    #: the metadata update once every this many steps (1: every step)
    update_every: int = 1
    #: whether the batch loop writes its body's event (``fetch.block``)
    loop_body: bool = True
    #: whether the backward pass and the optimizer step share one region
    fold_backward_step: bool = False
    #: the step time the decision was made for (s); None: not known, nothing decided
    step_time_s: float | None = None
    budget: float = 0.03
    #: µs a step with every region, and with the regions kept
    full_us: float = 0.0
    kept_us: float = 0.0

    @property
    def coarsened(self) -> list[str]:
        out = []
        if self.update_every > 1:
            out.append(f"the step's metadata update every {self.update_every} steps")
        if not self.loop_body:
            out.append("no loop-body event (fetch.block)")
        if self.fold_backward_step:
            out.append("the backward pass and the optimizer step in one region (ai.compute)")
        return out

    def describe(self) -> str:
        """The plan's line about the budget."""
        if self.step_time_s is None:
            return ""
        step_us = self.step_time_s * 1e6
        full, kept = self.full_us / step_us, self.kept_us / step_us
        head = (f"overhead: budget {self.budget:.1%} of a {self.step_time_s * 1e3:g} ms step = "
                f"{self.budget * step_us:.1f} µs; every region {self.full_us:.1f} µs ({full:.1%})")
        if not self.coarsened:
            return head + ": within the budget, nothing coarsened"
        text = f"{head}; coarsened: {', '.join(self.coarsened)} -> {self.kept_us:.1f} µs ({kept:.1%})"
        if kept > self.budget:
            regions = COMPUTE_REGIONS - (1 if self.fold_backward_step else 0)
            text += (f"; still over the budget: the floor is the wait for each batch and the "
                     f"{regions} compute regions the overlap analysis needs")
        return text


def decide(step_time_s: float | None, budget: float) -> Granularity:
    """The coarsest granularity the budget needs, no coarser (see the module docstring)."""
    compute = COMPUTE_REGIONS * COST_US["compute"]
    full = COST_US["fetch.iter"] + compute + COST_US["update"]
    if step_time_s is None:
        return Granularity(budget=budget, full_us=full, kept_us=full)
    allowed = budget * step_time_s * 1e6
    fetch = COST_US["fetch.iter"]
    loop_body = True
    # 1. the update every k-th step, the least k that fits what the regions leave
    every = _update_every(allowed - fetch - compute)
    # 2. then the loop body's event, and k again for what that frees
    if fetch + compute + COST_US["update"] / every > allowed:
        loop_body = False
        fetch -= COST_US["fetch.body"]
        every = _update_every(allowed - fetch - compute)
    # 3. then the backward pass and the optimizer step in one region
    fold = fetch + compute + COST_US["update"] / every > allowed
    if fold:
        compute -= COST_US["compute"]
        every = _update_every(allowed - fetch - compute)
    kept = fetch + compute + COST_US["update"] / every
    return Granularity(every, loop_body, fold, step_time_s, budget, full, kept)


def _update_every(left_us: float) -> int:
    """How seldom the update must run to cost at most ``left_us`` a step."""
    if left_us >= COST_US["update"]:
        return 1
    if left_us <= 0:
        return MAX_UPDATE_EVERY
    return min(MAX_UPDATE_EVERY, math.ceil(COST_US["update"] / left_us))


class OverheadAnalysis(Pass):
    """The granularity the tracing budget allows (``overhead.budget``, ``--step-time``)."""

    id = "overhead"
    title = "Tracing budget"
    kind = PassKind.ANALYSIS

    def run(self, ctx) -> Granularity:
        return decide(ctx.config.get("overhead.step-time"), ctx.config.get("overhead.budget"))
