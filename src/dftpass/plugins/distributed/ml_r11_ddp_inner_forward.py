"""ML-R11: the forward region belongs on the inner module, never on a DDP/FSDP/DeepSpeed wrapper."""

from __future__ import annotations

from dftpass.api import (
    Case, decoratable_wrapped_classes, Expect, Finding, has_region, is_node, model_classes, model_wrapper, Pass,
    PassKind, Severity, wrapper_name, WrapStmt,
)

#: wrapper class (last name) -> what its ``forward`` does besides the module's own forward
WRAPPERS = {
    "DistributedDataParallel": "DDP's own work around the module's forward (moving the inputs to its device, "
                               "broadcasting buffers from rank 0, rebuilding buckets, preparing the gradient "
                               "all-reduce)",
    "FullyShardedDataParallel": "the all-gather of the root unit's sharded parameters before the module's forward",
    "DataParallel": "scattering the inputs and replicating the module to every GPU, then gathering the outputs",
    "DeepSpeedEngine": "the engine's own work around the module's forward (casting the inputs, its timers and "
                       "profilers)",
}
def _forward_place(graph, class_id: str) -> str:
    """``Net.forward (model.py:12)``: the class's forward, where the region goes."""
    fs, cs = graph.classes[class_id]
    fn = fs.function(cs.methods["forward"]) if "forward" in cs.methods else None
    return f"{cs.name}.forward ({fs.relpath}:{fn.line if fn is not None else cs.line})"


def _places(graph, classes: set[str]) -> str:
    """Where the region should go, in words: the inner module classes' ``forward``."""
    classes = {c for c in classes if not any(wrapper_name(b) for b in graph.external_bases(c))}
    names = sorted(_forward_place(graph, c) for c in classes)
    if not names:
        return "the wrapped module's forward"
    return names[0] if len(names) == 1 else "the forward of the wrapped module (one of " + ", ".join(names) + ")"


class DdpInnerForward(Pass):
    """Report forward regions placed on a DDP, FSDP, DataParallel or DeepSpeed wrapper.

    What it does:
        ML-R7 puts ``@ai.compute.forward`` on the model the batch loops call, and follows the
        model through ``DistributedDataParallel(model)``, ``FSDP(model)``, ``DataParallel``
        and ``torch.compile`` to the project class inside: the inner module's ``forward`` is
        the one annotated. This rule checks the places where that does not happen, and says
        which class should carry the region instead:

        * a ``with ai.compute.forward:`` region around the call of a wrapped model
          (``output = ddp_model(images)``, ``loss = model_engine(x)``), written by hand or
          queued by ML-R7 in this run: ML-R7 times the call site when the model comes from a
          factory it does not look into (``build_model()``, ``create_model()``: a project's
          registry may build any class) or from ``deepspeed.initialize(...)``; with a wrapper
          around it, that call site is the wrapper's;
        * ``@ai.compute.forward`` (or a body region) on the ``forward`` of a project class
          that subclasses one of the wrappers.

        The class named in the message is the project module inside the wrapper: what
        ``DDP(...)``/``FSDP(...)`` is given, what the project's factory function returns, or
        the ``model=`` of ``deepspeed.initialize``. ML-R7 asks the same question
        (``decoratable_wrapped_classes``) and decorates that class itself, so a warning is
        about a region written by hand. When the module inside is a library's, or one of
        more classes than ML-R7 decorates (a registry's), the call site is the one place to
        time it: a note says what the event also holds, and fails no gate.

    Why:
        A wrapper's ``forward`` is more than the model's: DDP moves the inputs to its device,
        broadcasts buffers from rank 0 and prepares the bucketed gradient all-reduce, FSDP
        all-gathers the root unit's parameters, DataParallel scatters and replicates,
        DeepSpeed casts the inputs and runs its timers. Timed on the wrapper, that work is
        counted as ``compute.forward``. On the inner module's ``forward`` the event is the
        model's own forward (FSDP units nested inside the model, and DeepSpeed ZeRO-3's
        parameter gathers, run in hooks inside it and stay in the event). A region on both
        would nest the same node, which dftracer does not support.

    Example:
        ``model = DDP(build_model(), device_ids=[rank])`` then ``with ai.compute.forward:`` /
        ``output = model(images)`` is reported: "put @ai.compute.forward on ResNet.forward".

    Fix safety:
        A check: it changes nothing.

    Options:
        None.
    """

    id = "ML-R11"
    title = "DDP inner forward"
    kind = PassKind.CHECK
    requires = ("callgraph", "compiled")
    after = ("ML-R7",)
    #: not "distributed": ``from torch.nn.parallel import DistributedDataParallel as DDP`` alone does
    #: not make a project distributed to the detector, and the wrappers are recognised here anyway
    frameworks = ("pytorch",)
    tags = ("distributed", "compute")

    VALID = [
        # ML-R7's own result on a DDP-wrapped model from a project factory: the inner class is annotated
        "import torch\nfrom dftracer.python import ai\nfrom torch import nn\n"
        "from torch.nn.parallel import DistributedDataParallel as DDP\n\n\nclass Net(nn.Module):\n"
        "    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(4, 2)\n\n"
        "    @ai.compute.forward\n    def forward(self, x):\n        return self.fc(x)\n\n\ndef make_net():\n"
        "    return Net()\n\n\ndef main(rank, loader):\n    model = DDP(make_net().to(rank), device_ids=[rank])\n"
        "    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    for x, y in loader:\n        out = model(x)\n"
        "        loss = (out - y).pow(2).mean()\n        with ai.compute.backward:\n            loss.backward()\n"
        "        opt.step()\n",
        # a call-site region on a model from a library factory, Horovod (no wrapper module): nothing to say
        "import horovod.torch as hvd\nimport timm\nimport torch\nfrom dftracer.python import ai\n\n\n"
        "def train(name, loader, lr):\n    model = timm.create_model(name)\n"
        "    optimizer = hvd.DistributedOptimizer(torch.optim.SGD(model.parameters(), lr=lr * hvd.size()),\n"
        "                                         named_parameters=model.named_parameters())\n"
        "    for x, y in loader:\n        with ai.compute.forward:\n            output = model(x)\n"
        "        torch.nn.functional.cross_entropy(output, y).backward()\n        optimizer.step()\n",
    ]
    INVALID = [
        # imagenet-style DDP: the model comes from the project's build_model() (ML-R7 times such a call
        # site); the region on the DDP call also times DDP's own work
        Case(
            "import torch\nimport torch.distributed as dist\nfrom dftracer.python import ai\nfrom torch import nn\n"
            "from torch.nn.parallel import DistributedDataParallel as DDP\n\n\nclass ResNet(nn.Module):\n"
            "    def __init__(self, classes=10):\n        super().__init__()\n"
            "        self.fc = nn.Linear(512, classes)\n\n    def forward(self, x):\n        return self.fc(x)\n\n"
            "\ndef build_model(args):\n    return ResNet(args.classes)\n\n\n"
            "def train(train_loader, model, criterion, optimizer):\n    for images, target in train_loader:\n"
            "        with ai.compute.forward:\n            output = model(images)\n"
            "        loss = criterion(output, target)\n        optimizer.zero_grad()\n"
            "        with ai.compute.backward:\n            loss.backward()\n        optimizer.step()\n\n\n"
            "def main_worker(gpu, args):\n"
            "    dist.init_process_group('nccl', rank=gpu, world_size=args.world_size)\n"
            "    model = build_model(args).cuda(gpu)\n    model = DDP(model, device_ids=[gpu])\n"
            "    optimizer = torch.optim.SGD(model.parameters(), 0.1)\n"
            "    train(torch.utils.data.DataLoader(args.dataset), model, nn.CrossEntropyLoss(), optimizer)\n",
            findings=(
                Expect("warning", "a DistributedDataParallel call: it also times DDP's own work", line=24),
                Expect("warning", "put @ai.compute.forward on ResNet.forward (train.py:13) instead", line=24),
            ),
        ),
        # DeepSpeed's CIFAR example: the engine from deepspeed.initialize(model=net)
        Case(
            "import deepspeed\nimport torch\nfrom dftracer.python import ai\nfrom torch import nn\n\n\n"
            "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.fc = nn.Linear(32, 10)\n\n    def forward(self, x):\n        return self.fc(x)\n\n\n"
            "def main(args, trainset):\n    net = Net()\n"
            "    model_engine, optimizer, trainloader, _ = deepspeed.initialize(\n"
            "        args=args, model=net, model_parameters=net.parameters(), training_data=trainset)\n"
            "    for inputs, labels in trainloader:\n        inputs = inputs.to(model_engine.local_rank)\n"
            "        with ai.compute.forward:\n            outputs = model_engine(inputs)\n"
            "        loss = nn.functional.cross_entropy(outputs, labels.to(model_engine.local_rank))\n"
            "        model_engine.backward(loss)\n        model_engine.step()\n",
            findings=(
                Expect("warning", "put @ai.compute.forward on Net.forward (train.py:12) instead", line=23),
            ),
        ),
        # a forward region on an FSDP subclass
        Case(
            "from dftracer.python import ai\nfrom torch import nn\n"
            "from torch.distributed.fsdp import FullyShardedDataParallel as FSDP\n\n\n"
            "class Transformer(nn.Module):\n    def __init__(self):\n        super().__init__()\n"
            "        self.proj = nn.Linear(64, 64)\n\n    def forward(self, tokens):\n"
            "        return self.proj(tokens)\n\n\nclass LoggingFSDP(FSDP):\n    @ai.compute.forward\n"
            "    def forward(self, *args, **kwargs):\n        return super().forward(*args, **kwargs)\n\n\n"
            "def fit(loader, optimizer, local_rank):\n"
            "    model = LoggingFSDP(Transformer(), device_id=local_rank)\n    for tokens in loader:\n"
            "        loss = model(tokens).sum()\n        loss.backward()\n        optimizer.step()\n",
            findings=(
                Expect("warning", "LoggingFSDP.forward, a FullyShardedDataParallel subclass", line=17),
                Expect("warning", "on Transformer.forward (train.py:11) instead", line=17),
            ),
        ),
    ]

    def run(self, ctx) -> None:
        graph = ctx.analysis("callgraph")
        compilers = ctx.analysis("compiled")
        for function_id, (fs, fn) in graph.functions.items():
            queued = {e.stmt: e for e in (ctx.edit_sets.get(fs.relpath).edits if fs.relpath in ctx.edit_sets else ())
                      if isinstance(e, WrapStmt) and e.with_item.split(".", 1)[-1] == "compute.forward"}
            for call in fn.calls:
                in_source = any(is_node(fs, w, "compute.forward") for w in call.withs)
                edit = queued.get(call.stmt)
                if not in_source and edit is None:
                    continue
                found = model_wrapper(graph, function_id, call.callee)
                if found is None:
                    continue
                wrapper = found[0]
                # the classes ML-R7 decorates for such a call (one answer): none when the module
                # inside is a library's, or one of too many a registry may build
                inner = decoratable_wrapped_classes(graph, function_id, call.callee)
                if any(compilers.compiles_forward(graph, c) for c in inner):
                    continue  # a compiled model's forward is no place for a region (ML-R23): the call is
                who = f"{edit.rule}'s region" if edit is not None and not in_source else "a forward region"
                if not inner:
                    ctx.report(Finding(self.id, f"{who} around {call.callee}(), a {wrapper} call, also times "
                                       f"{WRAPPERS[wrapper]}: the module it wraps is no single class of the "
                                       "project, so the call site is where its forward can be timed",
                                       fs.relpath, call.line, call.col, Severity.INFO))
                    continue
                ctx.report(Finding(self.id, f"{who} around {call.callee}(), a {wrapper} call: it also times "
                                   f"{WRAPPERS[wrapper]}; put @ai.compute.forward on {_places(graph, inner)} instead",
                                   fs.relpath, call.line, call.col, Severity.WARNING))
        for class_id, (fs, cs) in graph.classes.items():
            wrapper = next((w for b in graph.external_bases(class_id) if (w := wrapper_name(b))), None)
            if wrapper is None or "forward" not in cs.methods:
                continue
            fn = fs.function(cs.methods["forward"])
            if fn is not None and has_region(fs, fn, "compute.forward"):
                where = _places(graph, self._wrapped_by_subclass(graph, class_id))
                ctx.report(Finding(self.id, f"forward region on {cs.name}.forward, a {wrapper} subclass: it also "
                                   f"times {WRAPPERS[wrapper]}; put @ai.compute.forward on {where} instead",
                                   fs.relpath, fn.line, fn.col, Severity.WARNING))

    @staticmethod
    def _wrapped_by_subclass(graph, class_id: str) -> set[str]:
        """The project modules given to the wrapper subclass where it is built (``LoggingFSDP(Net())``)."""
        out: set[str] = set()
        for builder in graph.instantiated_in.get(class_id, ()):
            for call in graph.fn(builder).calls:
                if call.args and "?" not in call.callee and \
                        f"inst:{class_id}" in graph.values.of(builder, call.callee + "()"):
                    out |= model_classes(graph, builder, call.args[0])
        return out
