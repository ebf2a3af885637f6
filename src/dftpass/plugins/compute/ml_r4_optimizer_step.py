"""ML-R4: ``ai.compute.step.start()`` / ``.stop()`` around the optimizer step."""

from __future__ import annotations

from dftpass.api import (
    calls_at, Case, in_compute_span, InsertAfter, InsertBefore, is_backward, is_node, is_optimizer_step, Pass,
    PassKind, sibling, WrapStmt,
)

#: in-place tensor methods a hand-written optimizer applies to each parameter
IN_PLACE_UPDATES = ("add_", "sub_", "addcdiv_", "addcmul_", "copy_")


class OptimizerStep(Pass):
    """Time the optimizer step with ``ai.compute.step.start()`` and ``.stop()``.

    What it does:
        Every statement that is an optimizer step (``optimizer.step()``,
        ``self.opt.step(closure)``, ``scaler.step(optimizer)``) gets
        ``ai.compute.step.start()`` before it and ``ai.compute.step.stop()`` after it. An
        optimizer is recognised by what the name is assigned from (``torch.optim.*``, a known
        optimizer class, ``GradScaler``) or, failing that, by its name; schedulers
        (``scheduler.step()``) are not optimizers. A hand-written update is a step too: a
        loop over ``model.parameters()`` that changes each parameter in place (``p.data.add_(-lr
        * p.grad)``) in a function that runs a backward pass gets the same two lines around
        the loop. When the tracing budget asks for it (``--step-time`` on short steps,
        docs/performance.md), a backward statement and the step after it in the same block
        share one region instead: ``with ai.compute:`` around the statements from the
        backward through the step (ML-R7 then leaves the backward alone); on the shortest
        steps the region starts at the statement that calls the model, and the forward has
        no region of its own there: one compute region per step.

    Why:
        The step is where the weights are updated; with forward and backward it completes
        the compute picture of one iteration. Start/stop keeps the user's statement as it
        is; a decorator cannot be used (``step`` belongs to a library class).

    Example:
        ``optimizer.step()`` becomes three lines: ``ai.compute.step.start()``,
        ``optimizer.step()``, ``ai.compute.step.stop()``.

    Fix safety:
        Safe. If the step raises, ``stop()`` is not reached and the step's event is lost;
        the exception propagates unchanged. A step already between start and stop is left alone.
        The budget's region over several statements is a ``with``: it closes on ``continue``,
        ``return`` and exceptions, where a ``start()`` that misses its ``stop()`` would lose
        that step's event (docs/decisions.md).

    Options:
        None.
    """

    id = "ML-R4"
    title = "Optimizer step"
    kind = PassKind.TRANSFORM
    requires = ("callgraph", "compute_spans")
    frameworks = ("pytorch",)
    tags = ("compute",)

    VALID = [
        "import torch\n\n\ndef f(scheduler):\n    scheduler.step()\n",
        # initializing the parameters in place is no update: no backward pass runs there
        "import torch\n\n\ndef init(model):\n    for p in model.parameters():\n        p.data.copy_(torch.zeros_like(p))\n",
    ]
    INVALID = [
        Case(
            "import torch\n\n\ndef f(model, optimizer):\n    # update the weights\n    optimizer.step()\n",
            "from dftracer.python import ai\nimport torch\n\n\ndef f(model, optimizer):\n    # update the weights\n"
            "    ai.compute.step.start()\n    optimizer.step()\n    ai.compute.step.stop()\n",
        ),
        Case(
            "import torch\n\n\nclass T:\n    def __init__(self, model):\n"
            "        self.sgd = torch.optim.SGD(model.parameters(), lr=0.1)\n\n    def step(self):\n"
            "        self.sgd.step(); self.sgd.zero_grad()\n",
            "from dftracer.python import ai\nimport torch\n\n\nclass T:\n    def __init__(self, model):\n"
            "        self.sgd = torch.optim.SGD(model.parameters(), lr=0.1)\n\n    def step(self):\n"
            "        ai.compute.step.start(); self.sgd.step(); ai.compute.step.stop(); self.sgd.zero_grad()\n",
        ),
        Case(
            # a hand-written SGD update (pytorch/examples' regression)
            "import torch\n\n\ndef fit(fc, x, y):\n    for _ in range(3):\n        loss = ((fc(x) - y) ** 2).mean()\n"
            "        loss.backward()\n        for param in fc.parameters():\n            param.data.add_(-0.1 * param.grad)\n",
            "from dftracer.python import ai\nimport torch\n\n\ndef fit(fc, x, y):\n    for _ in range(3):\n"
            "        loss = ((fc(x) - y) ** 2).mean()\n        loss.backward()\n        ai.compute.step.start()\n"
            "        for param in fc.parameters():\n            param.data.add_(-0.1 * param.grad)\n"
            "        ai.compute.step.stop()\n",
        ),
    ]

    def run(self, ctx) -> None:
        graph = ctx.analysis("callgraph")
        folded = ctx.analysis("compute_spans")
        self._manual_updates(ctx, graph)
        for function_id, (fs, fn) in graph.functions.items():
            spans = {s.step.stmt: s for s in folded.of(function_id)}
            for call in fn.calls:
                if call.stmt_kind != "expr" or not is_optimizer_step(graph, fs, fn, call):
                    continue
                before = calls_at(fn, sibling(call.stmt, -1))
                if any(is_node(fs, c.callee, "compute.step", "start") for c in before) or \
                        any(is_node(fs, w, "compute.step") for w in call.withs) or in_compute_span(fs, fn, call):
                    continue
                names = ctx.names(fs.relpath)
                if call.stmt in spans:  # the tracing budget: one region over the step's statements
                    span = spans[call.stmt]
                    what = f"forward {span.forward.callee}(), backward pass" if span.forward else "backward pass"
                    why = f"{what} and optimizer step {call.callee}() in one region (tracing budget)"
                    ctx.add_edit(fs.relpath, WrapStmt(self.id, span.line, why, span.first, names.node("compute"),
                                                      through=call.stmt))
                    continue
                why = f"optimizer step {call.callee}()"
                ctx.add_edit(fs.relpath, InsertBefore(self.id, call.line, why, call.stmt,
                                                      names.start("compute.step")))
                ctx.add_edit(fs.relpath, InsertAfter(self.id, call.line, why, call.stmt,
                                                     names.stop("compute.step")))

    def _manual_updates(self, ctx, graph) -> None:
        """A hand-written update is the step: ``for p in model.parameters():`` whose body
        changes ``p`` in place (``p.data.add_(-lr * p.grad)``), in a function that runs a
        backward pass (an initialization loop over the parameters does not)."""
        for fs, fn in graph.functions.values():
            if not any(is_backward(c) for c in fn.calls):
                continue
            for loop in fn.loops:
                t = loop.single_target
                if loop.kind != "for" or not t or not (loop.core or "").endswith("parameters()"):
                    continue
                updates = {f"{t}.{m}" for m in IN_PLACE_UPDATES} | {f"{t}.data.{m}" for m in IN_PLACE_UPDATES}
                if not any(loop.index in c.loops and c.callee in updates for c in fn.calls):
                    continue
                if any(is_node(fs, c.callee, "compute.step", "start") for c in calls_at(fn, sibling(loop.stmt, -1))) \
                        or any(is_node(fs, w, "compute.step") for c in fn.calls if loop.index in c.loops for w in c.withs):
                    continue
                names = ctx.names(fs.relpath)
                why = f"hand-written parameter update over {loop.core}"
                ctx.add_edit(fs.relpath, InsertBefore(self.id, loop.line, why, loop.stmt, names.start("compute.step")))
                ctx.add_edit(fs.relpath, InsertAfter(self.id, loop.line, why, loop.stmt, names.stop("compute.step")))
