"""The ``overhead`` analysis: how much tracing may cost a training step, and the granularity
that keeps it within that budget.

Tracing costs time per event, and more inside a training loop than in a loop of events alone:
the first tracer call after the model's compute finds the interpreter's and the tracer's code
and data evicted from the caches (docs/performance.md, "In situ"). Measured side by side in
one process on a 1 ms step, a step that writes one event costs ~53 µs more, each further
event ~18 µs. What dftpass puts on a training step writes, per step: the wait for the batch
and the loop's body (``fetch.iter``: two events), the forward, backward and optimizer-step
regions, the batch's device transfers, and the step's metadata update: ~160 µs, 16% of a
1 ms step, 2.7% of a 6 ms one. The budget (``overhead.budget``, 3% by default) turns that
from an accident into a choice: given the step time (``--step-time``, or
``overhead.step-time``), this analysis predicts the cost of the full placement and coarsens
it, cheapest information first, until the prediction fits:

1. the metadata update every k-th step (the step numbers of the other steps' events are
   then those of the last update: still ordered, coarser);
2. no loop-body event (``fetch.iter(..., include_block=False)``): the wait for each batch
   is kept, the body's time is the gap between two waits;
3. the backward pass and the optimizer step in one region (``with ai.compute:`` around the
   statements from the backward through the step: ML-R7 leaves the backward alone, ML-R4
   places the region), where they are statements of one block; the forward keeps its own;
4. one compute region per step: the region starts at the statement that calls the model
   (``loss = F.mse_loss(model(x), y)``), and the model's forward gets no region of its own
   there (ML-R7 times other calls of the model, evaluation's, at the call site).

What is left (the wait for each batch and one compute region, which the overlap analysis
needs, and the device transfers of the batch: ``transfers``) is the floor: when even that
exceeds the budget, the plan says so with the figures. With no step time the
full placement stays and nothing is predicted: the cost depends on a number dftpass does not
know. The rules read the decision (:class:`Granularity`) from here: ML-R8 guards its update,
ML-R6 leaves out the body event; ML-R4 and ML-R7 fold the step's compute through the
``compute_spans`` analysis, which reads it too.
"""

from __future__ import annotations

import math

import attrs

from dftpass.core.passes import Pass, PassKind

#: µs a training step pays with tracing on, measured in situ by bench/overhead.py (the
#: training loops interleaved in one process, 2026-12-04, docs/performance.md): "step" once
#: for a step that writes anything (the caches the model's compute left cold), "region" for
#: each event (the wait for the batch, the loop body, a compute region, a device transfer),
#: "update" for ML-R8's guarded update of the step's subtrees
COST_US = {
    "step": 35.0,
    "region": 18.0,
    "update": 16.0,
    # a step the sampling gate leaves untraced, in situ: the gate's tick and clock reads, the
    # gated regions' tests (sampled with nothing traced against tracing off, 0.9 ms steps:
    # +1.1% +- 1, bench/overhead.py and docs/performance.md)
    "untraced_step": 12.0,
}
#: a traced step among untraced ones costs this much more than the model's every region: in
#: situ, every rule measured 200-231 µs a 1 ms step where the model says 159 (the tracer's
#: code is cold after untraced steps too)
SAMPLED_STEP_FACTOR = 1.33
#: the share of steps traced whatever k is: the process's first 2, each pass's first and last,
#: for passes of ~100 steps (a shorter pass forces more)
FORCED_SHARE = 0.02
#: the most steps one traced step stands for
MAX_SAMPLE_EVERY = 1000
#: the events the batch loop's ``fetch.iter`` writes a step (the wait and the body)
FETCH_REGIONS = 2
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
    #: whether that region starts at the forward's statement: one compute region per step
    fold_forward: bool = False
    #: the device-transfer regions a step writes (counted, not coarsened)
    transfers: int = 0
    #: the step time the decision was made for (s); None: not known, nothing decided
    step_time_s: float | None = None
    budget: float = 0.03
    #: µs a step with every region, and with the regions kept
    full_us: float = 0.0
    kept_us: float = 0.0
    #: one region's cost as measured here (``overhead.event-us``); None: :data:`COST_US`
    event_us: float | None = None
    #: the step regions written for one step in this many (1: every step); ``sample_set_by``:
    #: "budget" (chosen here) or "config" (``overhead.sample-every``)
    sample_every: int = 1
    sample_set_by: str = ""
    #: a traced step's in-situ cost as measured on a sampled run (µs); None: the model's
    traced_step_us: float | None = None

    @property
    def coarsened(self) -> list[str]:
        out = []
        if self.update_every > 1:
            out.append(f"the step's metadata update every {self.update_every} steps")
        if not self.loop_body:
            out.append("no loop-body event (fetch.block)")
        if self.fold_forward:
            out.append("one compute region per step, forward through optimizer step (ai.compute)")
        elif self.fold_backward_step:
            out.append("the backward pass and the optimizer step in one region (ai.compute)")
        return out

    def describe(self) -> str:
        """The plan's line about the budget."""
        if self.sample_every > 1 and (self.step_time_s is None or self.sample_set_by == "config"):
            return (f"overhead: step regions written for 1 step in {self.sample_every} (overhead.sample-every; "
                    "the first steps and each pass's first and last always)")
        if self.step_time_s is None:
            return ""
        step_us = self.step_time_s * 1e6
        full, kept = self.full_us / step_us, self.kept_us / step_us
        moved = f", {self.transfers} device transfer{'s' if self.transfers > 1 else ''} included" \
            if self.transfers else ""
        measured = f", at {self.event_us:g} µs a region (overhead.event-us)" if self.event_us else ""
        head = (f"overhead: budget {self.budget:.1%} of a {self.step_time_s * 1e3:g} ms step = "
                f"{self.budget * step_us:.1f} µs; every region {self.full_us:.1f} µs ({full:.1%}{moved}{measured})")
        if self.sample_every > 1:
            measured = (f", a traced step measured at {self.traced_step_us:g} µs (overhead.traced-step-us)"
                        if self.traced_step_us is not None else "")
            return (f"{head}{measured}; sampled: every region on 1 step in {self.sample_every} (the first steps and each "
                    f"pass's first and last always) -> {self.kept_us:.1f} µs a step ({kept:.1%}); the analysis "
                    "scales the totals to all steps")
        if not self.coarsened:
            return head + ": within the budget, nothing coarsened"
        text = f"{head}; coarsened: {', '.join(self.coarsened)} -> {self.kept_us:.1f} µs ({kept:.1%})"
        if kept > self.budget:
            regions = COMPUTE_REGIONS - self.fold_backward_step - self.fold_forward
            moved = f" and the batch's {self.transfers} device transfer(s)" if self.transfers else ""
            text += (f"; still over the budget: the floor is the wait for each batch, the {regions} compute "
                     f"region{'s' if regions > 1 else ''} the overlap analysis needs{moved}")
        return text


def decide(step_time_s: float | None, budget: float, transfers: int = 0,
           event_us: float | None = None, sample_every: int | None = None,
           traced_step_us: float | None = None) -> Granularity:
    """The coarsest granularity the budget needs, no coarser (see the module docstring);
    ``transfers``: the device-transfer regions each step writes; ``event_us``: one region's
    cost measured here (``overhead.event-us``), which scales every cost; ``sample_every``:
    the user's k (``overhead.sample-every``), None to let the budget choose; ``traced_step_us``:
    what tracing a step costs in situ, measured on a sampled run (``overhead.traced-step-us``).

    When even the floor exceeds the budget, sampling replaces the coarsening: every region,
    on one step in k, the least k whose traced steps' cost, spread over k steps, fits what
    the untraced steps leave (docs/decisions.md, "Sampled steps")."""
    if sample_every is not None and sample_every > 1:
        full = decide(step_time_s, budget, transfers, event_us, sample_every=1).full_us
        return Granularity(budget=budget, full_us=full, transfers=transfers, event_us=event_us,
                           step_time_s=step_time_s, sample_every=sample_every, sample_set_by="config",
                           kept_us=sampled_cost(full, sample_every, traced_step_us))
    scale = event_us / COST_US["region"] if event_us else 1.0
    cost = {name: us * scale for name, us in COST_US.items()}
    fetch, compute = FETCH_REGIONS, COMPUTE_REGIONS

    def regions() -> float:
        # the transfers are counted, not coarsened
        return cost["step"] + (fetch + compute + transfers) * cost["region"]

    full = regions() + cost["update"]
    if step_time_s is None:
        return Granularity(budget=budget, full_us=full, kept_us=full, transfers=transfers, event_us=event_us)
    allowed = budget * step_time_s * 1e6

    def fits(every: int) -> bool:
        return regions() + cost["update"] / every <= allowed

    # 1. the update every k-th step, the least k that fits what the regions leave
    every = _update_every(allowed - regions(), cost["update"])
    levers = []
    # 2. the loop body's event, 3. backward and step in one region, 4. the forward in it too;
    # after each, k again for what it freed
    for lever in ("body", "fold", "forward"):
        if fits(every):
            break
        levers.append(lever)
        if lever == "body":
            fetch -= 1
        else:
            compute -= 1
        every = _update_every(allowed - regions(), cost["update"])
    kept = regions() + cost["update"] / every
    if kept > allowed and sample_every is None:
        k = _sample_every(full, allowed, traced_step_us)
        return Granularity(transfers=transfers, step_time_s=step_time_s, budget=budget, full_us=full,
                           kept_us=sampled_cost(full, k, traced_step_us), event_us=event_us, sample_every=k,
                           sample_set_by="budget", traced_step_us=traced_step_us)
    return Granularity(every, "body" not in levers, "fold" in levers, "forward" in levers, transfers,
                       step_time_s, budget, full, kept, event_us)


def sampled_cost(full_us: float, k: int, traced_step_us: float | None = None) -> float:
    """µs a step with 1 step in k traced: the traced share (:data:`FORCED_SHARE` and 1 in k of
    the rest) at a traced step's in-situ cost (measured, ``traced_step_us``, or the model's
    every region x :data:`SAMPLED_STEP_FACTOR`), the others at the untraced step's."""
    traced = FORCED_SHARE + (1 - FORCED_SHARE) / k
    untraced = COST_US["untraced_step"]
    cost = traced_step_us if traced_step_us is not None else full_us * SAMPLED_STEP_FACTOR
    return traced * cost + (1 - traced) * untraced


def _sample_every(full_us: float, allowed_us: float, traced_step_us: float | None = None) -> int:
    """The least k whose :func:`sampled_cost` fits ``allowed_us`` (:data:`MAX_SAMPLE_EVERY` when none does)."""
    for k in range(2, MAX_SAMPLE_EVERY + 1):
        if sampled_cost(full_us, k, traced_step_us) <= allowed_us:
            return k
    return MAX_SAMPLE_EVERY


def _update_every(left_us: float, update_us: float) -> int:
    """How seldom the update must run to cost at most ``left_us`` a step."""
    if left_us >= update_us:
        return 1
    if left_us <= 0:
        return MAX_UPDATE_EVERY
    return min(MAX_UPDATE_EVERY, math.ceil(update_us / left_us))


class OverheadAnalysis(Pass):
    """The granularity the tracing budget allows (``overhead.budget``, ``--step-time``)."""

    id = "overhead"
    title = "Tracing budget"
    kind = PassKind.ANALYSIS

    requires = ("callgraph", "transfers")

    def run(self, ctx) -> Granularity:
        step_time = ctx.config.get("overhead.step-time")
        transfers = 0
        if step_time is not None:
            graph = ctx.analysis("callgraph")
            transfers = ctx.analysis("transfers").per_step(graph, lambda path: ctx.rule_enabled_for("ML-R17", path))
        return decide(step_time, ctx.config.get("overhead.budget"), transfers, ctx.config.get("overhead.event-us"),
                      ctx.config.get("overhead.sample-every"), ctx.config.get("overhead.traced-step-us"))
