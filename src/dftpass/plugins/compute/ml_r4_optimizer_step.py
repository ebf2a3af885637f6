"""ML-R4: ``ai.compute.step.start()`` / ``.stop()`` around the optimizer step."""

from __future__ import annotations

from dftpass.core.edits import InsertAfter, InsertBefore
from dftpass.core.emitter import is_node
from dftpass.core.passes import Case, Pass, PassKind
from dftpass.plugins.knowledge import calls_at, is_optimizer_step, sibling


class OptimizerStep(Pass):
    """Time the optimizer step with ``ai.compute.step.start()`` and ``.stop()``.

    What it does:
        Every statement that is an optimizer step (``optimizer.step()``,
        ``self.opt.step(closure)``, ``scaler.step(optimizer)``) gets
        ``ai.compute.step.start()`` before it and ``ai.compute.step.stop()`` after it. An
        optimizer is recognised by what the name is assigned from (``torch.optim.*``, a known
        optimizer class, ``GradScaler``) or, failing that, by its name; schedulers
        (``scheduler.step()``) are not optimizers.

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

    Options:
        None.
    """

    id = "ML-R4"
    title = "Optimizer step"
    kind = PassKind.TRANSFORM
    requires = ("callgraph",)
    frameworks = ("pytorch",)
    tags = ("compute",)

    VALID = [
        "import torch\n\n\ndef f(scheduler):\n    scheduler.step()\n",
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
    ]

    def run(self, ctx) -> None:
        graph = ctx.analysis("callgraph")
        for fs, fn in graph.functions.values():
            for call in fn.calls:
                if call.stmt_kind != "expr" or not is_optimizer_step(graph, fs, fn, call):
                    continue
                before = calls_at(fn, sibling(call.stmt, -1))
                if any(is_node(fs, c.callee, "compute.step", "start") for c in before) or \
                        any(is_node(fs, w, "compute.step") for w in call.withs):
                    continue
                names = ctx.names(fs.relpath)
                why = f"optimizer step {call.callee}()"
                ctx.add_edit(fs.relpath, InsertBefore(self.id, call.line, why, call.stmt,
                                                      names.start("compute.step")))
                ctx.add_edit(fs.relpath, InsertAfter(self.id, call.line, why, call.stmt,
                                                     names.stop("compute.step")))
