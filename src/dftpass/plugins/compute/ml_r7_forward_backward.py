"""ML-R7: ``@ai.compute.forward`` on the model's ``forward``; ``with ai.compute.backward:`` around backward."""

from __future__ import annotations

from dftpass.core.edits import WrapStmt
from dftpass.core.emitter import is_node
from dftpass.core.passes import Case, Pass, PassKind
from dftpass.core.placement import function_region, has_region
from dftpass.plugins.knowledge import is_backward


class ForwardBackward(Pass):
    """Time the model's forward pass and every backward pass.

    What it does:
        ``@ai.compute.forward`` goes on ``forward`` of each top-level model: a
        ``torch.nn.Module`` subclass (directly or through project classes) that no other
        module class builds as a submodule. Each backward statement (``loss.backward()``,
        ``scaler.scale(loss).backward()``, ``accelerator.backward(loss)``,
        ``self.manual_backward(loss)``) is wrapped in ``with ai.compute.backward:``.

    Why:
        Forward and backward are most of a training step's compute. Only top-level models
        are decorated because the ``ai`` nodes are not re-entrant: a submodule's forward
        inside the model's forward would keep only the inner event. With DDP/FSDP the
        inner module's class is what gets decorated, never the wrapper (ML-R11).

    Example:
        ``loss.backward()`` becomes ``with ai.compute.backward:`` / ``loss.backward()``.

    Fix safety:
        Safe: the decorator goes innermost and keeps the signature; ``nn.Module.__call__``
        still runs hooks around it. A forward that is a generator gets a body region.

    Options:
        None.
    """

    id = "ML-R7"
    title = "Forward and backward"
    kind = PassKind.TRANSFORM
    requires = ("callgraph",)
    frameworks = ("pytorch",)
    tags = ("compute",)

    VALID = [
        # a forward that is not a torch module's
        "import torch\n\n\nclass Pipe:\n    def forward(self, x):\n        return x\n",
    ]
    INVALID = [
        Case(
            "from torch import nn\n\n\nclass Block(nn.Module):\n    def forward(self, x):\n        return x\n\n\n"
            "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.block = Block()\n\n    def forward(self, x):\n        return self.block(x)\n",
            "from dftracer.python import ai\nfrom torch import nn\n\n\nclass Block(nn.Module):\n"
            "    def forward(self, x):\n        return x\n\n\nclass Net(nn.Module):\n    def __init__(self):\n"
            "        super().__init__()\n        self.block = Block()\n\n    @ai.compute.forward\n"
            "    def forward(self, x):\n        return self.block(x)\n",
        ),
        Case(
            "import torch\n\n\ndef step(loss, scaler):\n    scaler.scale(loss).backward()  # scaled\n",
            "from dftracer.python import ai\nimport torch\n\n\ndef step(loss, scaler):\n"
            "    with ai.compute.backward:\n        scaler.scale(loss).backward()  # scaled\n",
        ),
    ]

    def run(self, ctx) -> None:
        graph = ctx.analysis("callgraph")
        for class_id, (fs, cs) in graph.classes.items():
            if "forward" not in cs.methods or not graph.is_module_class(class_id):
                continue
            builders = graph.instantiated_in.get(class_id, set())
            if any((c := graph.class_of_method(b)) and graph.is_module_class(c) for b in builders):
                continue  # a submodule: its forward runs inside the model's
            fn = fs.function(cs.methods["forward"])
            if fn is None or has_region(fs, fn, "compute.forward"):
                continue
            ctx.add_edit(fs.relpath, function_region(ctx.names(fs.relpath), fn, "compute.forward", self.id,
                                                     f"forward of model {cs.name}"))
        for fs, fn in graph.functions.values():
            for call in fn.calls:
                if call.stmt_kind != "expr" or not is_backward(call):
                    continue
                if any(is_node(fs, w, "compute.backward") for w in call.withs):
                    continue
                ctx.add_edit(fs.relpath, WrapStmt(self.id, call.line, f"backward pass {call.callee}()",
                                                  call.stmt, ctx.names(fs.relpath).node("compute.backward")))
