"""ML-R7: ``@ai.compute.forward`` on the model the loops call; ``ai.compute.backward``; ``@ai.compute`` on a step."""

from __future__ import annotations

from dftpass.api import (
    built_by_factory, Case, Finding, function_region, has_region, in_compute_span, is_backward, is_compute_step,
    decoratable_wrapped_classes, is_library_layer, is_model_call, is_node, is_optimizer_step, is_top_level_model,
    MAX_MODEL_CLASSES, model_classes, Pass, PassKind, Severity, step_calls, trains, WrapStmt,
)


#: with no model call found in any batch loop, the top-level models are decorated only up to this
MAX_FALLBACK_MODELS = 8


class ForwardBackward(Pass):
    """Time the model's forward pass, every backward pass, and a step without that split.

    What it does:
        **Forward.** The models that count are those the batch loops call (``output =
        model(x)``, ``logits, loss = model(x, y)``), followed through assignments, factories,
        attributes, parameters, ``.to(device)``, ``torch.compile`` and DDP/FSDP wrappers (the
        inner module is the one annotated: ML-R11's rule). Such a model class, when it is a
        top-level one, gets ``@ai.compute.forward`` on its ``forward``. A class that builds
        itself (``cls(config)``, ``GPT(config)`` in a classmethod) is not its own submodule,
        and subclasses of ``torch.nn`` classes (``nn.Transformer``) are models. When the model
        comes from a factory the project cannot see into (``create_model(name)``,
        ``AutoModel.from_pretrained``, hydra ``instantiate``), is a library layer (``fc =
        nn.Linear(4, 1)`` in a script), or more than four classes are candidates, the call
        itself is timed: ``with ai.compute.forward:`` around ``output = model(x)`` (or around
        ``loss = F.mse_loss(fc(x), y)``, the loss with it), instead of decorating every
        ``forward`` in a model zoo. With no
        model call in any batch loop that could be given its region, the top-level models are
        decorated (up to eight).

        **Backward.** Each backward statement (``loss.backward()``,
        ``scaler.scale(loss).backward()``, ``accelerator.backward(loss)``,
        ``self.manual_backward(loss)``) is wrapped in ``with ai.compute.backward:``.

        **A step with no forward/backward split.** A batch loop that runs its step through a
        compute call (a benchmark's ``framework.compute(batch)``, ``trainer.train_step(batch)``,
        Keras ``train_on_batch``) and shows no backward pass and no model call: the project
        function it calls gets ``@ai.compute`` (DLIO's pattern), a library call gets
        ``with ai.compute:``.

    Why:
        Forward and backward are most of a training step's compute. The ``ai`` nodes are not
        re-entrant: a submodule's forward inside the model's would keep only the inner event,
        which is why only the model the loop calls is decorated.

    Example:
        ``loss.backward()`` becomes ``with ai.compute.backward:`` / ``loss.backward()``.

    Fix safety:
        Safe: the decorator goes innermost and keeps the signature; ``nn.Module.__call__``
        still runs hooks around it. A forward that is a generator gets a body region.
        A ``with`` around a call site covers that statement only (the loss computed in the
        same statement is counted as forward).

    Options:
        None.
    """

    id = "ML-R7"
    title = "Forward and backward"
    kind = PassKind.TRANSFORM
    requires = ("callgraph", "loops", "compiled", "compute_spans", "batch_provenance")
    # a framework plugin's step rule times its compiled steps first (with what they need:
    # ML-R14 waits for jax's result); a second region of the node there is refused
    after = ("ML-R12", "ML-R13", "ML-R14")
    frameworks = ("ml",)
    tags = ("compute",)

    VALID = [
        # a forward that is not a torch module's
        "import torch\n\n\nclass Pipe:\n    def forward(self, x):\n        return x\n",
        # a layer called inside the optimizer step's statement: a forward region there would
        # hold the step
        "import torch\n\nfc = torch.nn.Linear(4, 1)\nopt = torch.optim.LBFGS(fc.parameters())\n"
        "for x in torch.utils.data.DataLoader([torch.ones(4)]):\n    opt.step(lambda: fc(x).sum())\n",
    ]
    INVALID = [
        Case(
            # issue 39: the loader comes from outside the project and the model from a factory: the
            # step shows the batch loop, and the model call whose result the loss backpropagates is the
            # forward, timed at the call site
            'import timm\nimport torch\nfrom streams import make_stream\n\n\n'
            'def train_one_epoch(model, opt, batches):\n    for x, y in batches:\n'
            '        loss = torch.nn.functional.cross_entropy(model(x), y)\n'
            '        loss.backward()\n        opt.step()\n\n\ndef main():\n'
            "    model = timm.create_model('resnet18')\n"
            '    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n'
            '    for epoch in range(3):\n'
            "        train_one_epoch(model, opt, make_stream('train'))\n",
            'from dftracer.python import ai\nimport timm\nimport torch\n'
            'from streams import make_stream\n\n\ndef train_one_epoch(model, opt, batches):\n'
            '    for x, y in batches:\n        with ai.compute.forward:\n'
            '            loss = torch.nn.functional.cross_entropy(model(x), y)\n'
            '        with ai.compute.backward:\n            loss.backward()\n'
            "        opt.step()\n\n\ndef main():\n    model = timm.create_model('resnet18')\n"
            '    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n'
            '    for epoch in range(3):\n'
            "        train_one_epoch(model, opt, make_stream('train'))\n",
        ),
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
        Case(
            # the model the loop calls, built by a classmethod that constructs its own class
            # (not a submodule of itself), subclassing a torch.nn class
            "import torch\nfrom torch import nn\n\n\nclass GPT(nn.Transformer):\n    @classmethod\n"
            "    def from_config(cls, n):\n        model = GPT()\n        return model\n\n    def forward(self, x):\n"
            "        return x\n\n\nclass Unused(nn.Module):\n    def forward(self, x):\n        return x\n\n\n"
            "def train(loader):\n    model = GPT.from_config(2)\n    for x in torch.utils.data.DataLoader(loader):\n"
            "        model(x).sum().backward()\n",
            "from dftracer.python import ai\nimport torch\nfrom torch import nn\n\n\nclass GPT(nn.Transformer):\n"
            "    @classmethod\n    def from_config(cls, n):\n        model = GPT()\n        return model\n\n"
            "    @ai.compute.forward\n    def forward(self, x):\n        return x\n\n\nclass Unused(nn.Module):\n"
            "    def forward(self, x):\n        return x\n\n\n"
            "def train(loader):\n    model = GPT.from_config(2)\n    for x in torch.utils.data.DataLoader(loader):\n"
            "        with ai.compute.backward:\n            model(x).sum().backward()\n",
        ),
        Case(
            # a model from a factory: the call site is timed, not every forward of the zoo
            "import timm\nimport torch\n\n\ndef train(name, loader, opt):\n    model = timm.create_model(name)\n"
            "    for x, y in torch.utils.data.DataLoader(loader):\n        output = model(x)\n"
            "        opt.step()\n",
            "from dftracer.python import ai\nimport timm\nimport torch\n\n\ndef train(name, loader, opt):\n"
            "    model = timm.create_model(name)\n    for x, y in torch.utils.data.DataLoader(loader):\n"
            "        with ai.compute.forward:\n            output = model(x)\n        opt.step()\n",
        ),
        Case(
            # the project's own model registry (timm's shape), a converter that swaps in other
            # module classes, and a loss module: the call site is timed, no class decorated
            "import torch\nfrom torch import nn\n\n_MODELS = {}\n\n\nclass SyncNorm(nn.Module):\n"
            "    def forward(self, x):\n        return x\n\n\nclass SoftTargetCrossEntropy(nn.Module):\n"
            "    def forward(self, x, y):\n        return (x - y).abs().mean()\n\n\n"
            "def create_model(name):\n    return _MODELS[name]()\n\n\ndef convert_sync_norm(model):\n"
            "    return SyncNorm()\n\n\ndef train(name, data, opt):\n    model = create_model(name)\n"
            "    model = convert_sync_norm(model)\n    loss_fn = SoftTargetCrossEntropy()\n"
            "    for x, y in torch.utils.data.DataLoader(data):\n        output = model(x)\n"
            "        loss = loss_fn(output, y)\n        opt.step()\n",
            "from dftracer.python import ai\nimport torch\nfrom torch import nn\n\n_MODELS = {}\n\n\n"
            "class SyncNorm(nn.Module):\n    def forward(self, x):\n        return x\n\n\n"
            "class SoftTargetCrossEntropy(nn.Module):\n    def forward(self, x, y):\n        return (x - y).abs().mean()\n\n\n"
            "def create_model(name):\n    return _MODELS[name]()\n\n\ndef convert_sync_norm(model):\n"
            "    return SyncNorm()\n\n\ndef train(name, data, opt):\n    model = create_model(name)\n"
            "    model = convert_sync_norm(model)\n    loss_fn = SoftTargetCrossEntropy()\n"
            "    for x, y in torch.utils.data.DataLoader(data):\n        with ai.compute.forward:\n"
            "            output = model(x)\n        loss = loss_fn(output, y)\n        opt.step()\n",
        ),
        Case(
            # a script that trains one torch.nn layer, called inside the loss's expression
            # (pytorch/examples' regression): the statement is the forward, the loss with it
            "import torch\nimport torch.nn.functional as F\n\nfc = torch.nn.Linear(4, 1)\n"
            "for x, y in torch.utils.data.DataLoader([(torch.ones(4), torch.ones(1))]):\n"
            "    output = F.smooth_l1_loss(fc(x), y)\n    output.backward()\n",
            "from dftracer.python import ai\nimport torch\nimport torch.nn.functional as F\n\n"
            "fc = torch.nn.Linear(4, 1)\nfor x, y in torch.utils.data.DataLoader([(torch.ones(4), torch.ones(1))]):\n"
            "    with ai.compute.forward:\n        output = F.smooth_l1_loss(fc(x), y)\n"
            "    with ai.compute.backward:\n        output.backward()\n",
        ),
        Case(
            # a framework's own step (Keras): a library call gets the region around it
            "import tensorflow as tf\n\n\ndef train(model, x, y):\n"
            "    for xb, yb in tf.data.Dataset.from_tensor_slices((x, y)).batch(8):\n"
            "        logs = model.train_on_batch(xb, yb)\n",
            "from dftracer.python import ai\nimport tensorflow as tf\n\n\ndef train(model, x, y):\n"
            "    for xb, yb in tf.data.Dataset.from_tensor_slices((x, y)).batch(8):\n"
            "        with ai.compute:\n            logs = model.train_on_batch(xb, yb)\n",
        ),
        Case(
            # a simulated step (a benchmark): no backward, no model; the compute is the step
            "import time\nimport torch\n\n\nclass Framework:\n    def compute(self, batch, seconds):\n"
            "        time.sleep(seconds)\n\n\ndef train(loader):\n    framework = Framework()\n"
            "    for batch in torch.utils.data.DataLoader(loader):\n        framework.compute(batch, 0.01)\n",
            "from dftracer.python import ai\nimport time\nimport torch\n\n\nclass Framework:\n"
            "    @ai.compute\n    def compute(self, batch, seconds):\n        time.sleep(seconds)\n\n\n"
            "def train(loader):\n    framework = Framework()\n"
            "    for batch in torch.utils.data.DataLoader(loader):\n        framework.compute(batch, 0.01)\n",
        ),
        Case(
            # the model a training step calls is the program's, though another module builds it as a part
            # (a library-shaped project): of a wrapper and what it wraps, the wrapper's forward; an
            # abstract forward (nothing runs there) gets nothing
            'import abc\n\nimport torch\nfrom torch import nn\n\n\nclass Net(nn.Module):\n'
            '    def forward(self, x):\n        return x * 2\n\n\nclass Wrapper(nn.Module):\n'
            '    def __init__(self, net):\n        super().__init__()\n        self.net = net\n\n'
            '    def forward(self, x):\n        return self.net(x).sum()\n\n\nclass Ensemble(nn.Module):\n'
            '    def __init__(self):\n        super().__init__()\n'
            '        self.members = nn.ModuleList([Wrapper(Net()), Wrapper(Net())])\n\n\n'
            'class Block(nn.Module):\n    @abc.abstractmethod\n    def forward(self, x):\n'
            '        """Apply the block."""\n\n\nclass Res(Block):\n    def forward(self, x):\n'
            '        return x + 1\n\n\ndef train(opt, loader):\n    model = Net()\n    model = Wrapper(model)\n'
            '    for x in loader:\n        model(x).backward()\n        opt.step()\n\n\n'
            'def evaluate(loader, kind):\n    block = Res() if kind else Block()\n    for x in loader:\n'
            '        block(x)\n',
            'from dftracer.python import ai\nimport abc\n\nimport torch\nfrom torch import nn\n\n\n'
            'class Net(nn.Module):\n    def forward(self, x):\n        return x * 2\n\n\n'
            'class Wrapper(nn.Module):\n    def __init__(self, net):\n        super().__init__()\n'
            '        self.net = net\n\n    @ai.compute.forward\n    def forward(self, x):\n'
            '        return self.net(x).sum()\n\n\nclass Ensemble(nn.Module):\n    def __init__(self):\n'
            '        super().__init__()\n'
            '        self.members = nn.ModuleList([Wrapper(Net()), Wrapper(Net())])\n\n\n'
            'class Block(nn.Module):\n    @abc.abstractmethod\n    def forward(self, x):\n'
            '        """Apply the block."""\n\n\nclass Res(Block):\n    @ai.compute.forward\n'
            '    def forward(self, x):\n        return x + 1\n\n\ndef train(opt, loader):\n    model = Net()\n'
            '    model = Wrapper(model)\n    for x in loader:\n        with ai.compute.backward:\n'
            '            model(x).backward()\n        opt.step()\n\n\ndef evaluate(loader, kind):\n'
            '    block = Res() if kind else Block()\n    for x in loader:\n        block(x)\n',
        ),
    ]

    def run(self, ctx) -> None:
        graph = ctx.analysis("callgraph")
        loops = ctx.analysis("loops")
        calls = list(step_calls(graph, loops))
        # the model calls batch provenance met on the step's data (inside a loss function a
        # functools.partial runs, through a wrapper's __call__): the step's too
        seen = set(calls)
        for chain in ctx.analysis("batch_provenance").chains:
            for site in chain.of_kind("model"):
                fn = graph.fn(site.function)
                index = next((i for i, c in enumerate(fn.calls) if (c.line, c.col) == (site.line, site.col)), None)
                if index is not None and (site.function, index) not in seen and not fn.calls[index].callee.endswith("()"):
                    seen.add((site.function, index))
                    calls.append((site.function, index))
        self._forward(ctx, graph, calls)
        self._backward(ctx, graph)
        self._compute_steps(ctx, graph, loops, calls)

    # -- forward ------------------------------------------------------------------------------
    def _forward(self, ctx, graph, calls) -> None:
        decorate: dict[str, str] = {}
        handled = False  # a model call that got its region (a class to decorate, a call site)
        # the tracing budget's one compute region per step (ML-R4's) holds the training
        # forward; the model's other calls are timed where they are, not by its class
        spans = ctx.analysis("compute_spans")
        compilers = ctx.analysis("compiled")
        one_region = spans.with_forward
        for function_id, index in calls:
            if not is_model_call(graph, function_id, index):
                continue
            fs, fn = graph.functions[function_id]
            call = fn.calls[index]
            if any(s.forward and s.holds(call.stmt) for s in spans.of(function_id)) or \
                    in_compute_span(fs, fn, call) or any(is_node(fs, w, "compute.forward") for w in call.withs):
                handled = True  # timed already: a second region of the node would nest in it
                continue
            if one_region:
                handled |= self._wrap_call(ctx, graph, function_id, call, "compute.forward",
                                           f"model call {call.callee}() (the tracing budget times the training "
                                           "step as one region: the model's class is not decorated)")
                continue
            candidates = model_classes(graph, function_id, call.callee)
            found = {c for c in candidates if is_top_level_model(graph, c)}
            if candidates and not found and _called_by_step(graph, function_id):
                # the model a training step calls is the program's top-level model, whatever
                # other classes of a library-shaped project build it as a part; of a wrapper and
                # what it wraps (``model = AutoregressiveWrapper(TransformerWrapper(...))``), the
                # wrapper is what the call runs
                found = _outermost(graph, candidates)
            factory = built_by_factory(graph, function_id, call.callee)
            if candidates and not found and not factory:
                continue  # a submodule called by its model
            # a model the program hands to torch.compile: a region in its forward breaks the
            # graph Dynamo compiles (ML-R23's check), so the call site gets it instead
            compiled = sorted(c for c in found if compilers.compiles_forward(graph, c))
            if compiled:
                name = graph.classes[compiled[0]][1].name
                handled |= self._wrap_call(ctx, graph, function_id, call, "compute.forward",
                                           f"model call {call.callee}(): {name} is compiled by torch.compile, "
                                           "whose graph a region in its forward would break")
                continue
            if found and len(found) <= MAX_MODEL_CLASSES and not factory:
                for class_id in found:
                    decorate.setdefault(class_id, f"forward of model {graph.classes[class_id][1].name}, "
                                                  f"called by {fn.name} at line {call.line}")
                handled = True
            elif (inner := decoratable_wrapped_classes(graph, function_id, call.callee)):
                # a data-parallel wrapper around project classes: their forward, not the wrapper's
                # call (which also times DDP's/DataParallel's own work; ML-R11's check agrees)
                for class_id in inner:
                    decorate.setdefault(class_id, f"forward of model {graph.classes[class_id][1].name}, wrapped "
                                                  f"by the {call.callee} that {fn.name} calls at line {call.line}")
                handled = True
            else:
                reason = "its class comes from a factory" if factory else \
                    "a torch.nn layer" if is_library_layer(graph, function_id, call.callee) else \
                    "its class comes from a factory" if not candidates else \
                    f"{len(found)} model classes are candidates"
                handled |= self._wrap_call(ctx, graph, function_id, call, "compute.forward",
                                           f"model call {call.callee}(): {reason}")
        if not handled:
            tops = [c for c in graph.classes if _forward_method(graph, c)
                    and graph.is_module_class(c) and is_top_level_model(graph, c) and not _layer_subclass(graph, c)]
            # a framework's loop calls its own models (a LightningModule): the rest are their parts
            owned = [c for c in tops if graph.has_base(c, graph.hints.loop_models)]
            tops = owned or tops
            if len(tops) > MAX_FALLBACK_MODELS:
                ctx.report(Finding(self.id, f"{len(tops)} model classes and no model call found in a batch loop: "
                                   "no forward is annotated (name the model class with --select/per-path, or "
                                   "wrap the call site by hand)", severity=Severity.INFO))
                tops = []
            for class_id in tops:
                decorate.setdefault(class_id, f"forward of model {graph.classes[class_id][1].name}")
        forwards = {c: _forward_id(graph, c) for c in decorate}
        for class_id, why in sorted(decorate.items()):
            fs, cs = graph.classes[class_id]
            method = _forward_method(graph, class_id)
            fn = fs.function(cs.methods[method]) if method else None
            if fn is None or _abstract(fn):
                continue  # ``@abstractmethod def forward(...): ...``: nothing runs there
            own = forwards[class_id]
            if own and any(other and other != own and other in graph.reachable(own) for other in forwards.values()):
                continue  # ``return super().forward(x)``: the base's region times it; one would nest
            if has_region(fs, fn, "compute.forward"):
                continue
            ctx.add_edit(fs.relpath, function_region(ctx.names(fs.relpath), fn, "compute.forward", self.id, why))

    def _wrap_call(self, ctx, graph, function_id: str, call, node: str, why: str) -> bool:
        """``with NODE:`` around the call's statement; False if it cannot go there (the call is
        part of a larger expression such as ``model(x).backward()``)."""
        fs = graph.file_of(function_id)
        if any(is_node(fs, w, node) for w in call.withs):
            return True
        if call.stmt_kind not in ("expr", "assign") and not _in_simple_statement(graph, function_id, call):
            return False
        ctx.add_edit(fs.relpath, WrapStmt(self.id, call.line, why, call.stmt, ctx.names(fs.relpath).node(node)))
        return True

    # -- backward -----------------------------------------------------------------------------
    def _backward(self, ctx, graph) -> None:
        spans = ctx.analysis("compute_spans")
        for function_id, (fs, fn) in graph.functions.items():
            # the tracing budget folds a backward with the optimizer step after it: ML-R4's region
            folded = {s.backward.stmt for s in spans.of(function_id)}
            for call in fn.calls:
                if call.stmt_kind != "expr" or not is_backward(call) or call.stmt in folded \
                        or in_compute_span(fs, fn, call):
                    continue
                if any(is_node(fs, w, "compute.backward") for w in call.withs):
                    continue
                shown = call.callee.replace("?", "(...)")  # ``(loss / k).backward()``
                ctx.add_edit(fs.relpath, WrapStmt(self.id, call.line, f"backward pass {shown}()",
                                                  call.stmt, ctx.names(fs.relpath).node("compute.backward")))

    # -- a step with no forward/backward split ---------------------------------------------
    def _compute_steps(self, ctx, graph, loops, calls) -> None:
        by_loop: dict[tuple[str, int], list[int]] = {}
        for function_id, index in calls:
            loop = graph.fn(function_id).calls[index].loops
            by_loop.setdefault((function_id, loop[-1] if loop else -1), []).append(index)
        decorate: dict[str, str] = {}
        for (function_id, _), indexes in by_loop.items():
            fs, fn = graph.functions[function_id]
            if any(is_backward(fn.calls[i]) or is_model_call(graph, function_id, i) for i in indexes):
                continue
            # a step that trains shows its forward and backward (timed apart above), unless a
            # compiler runs it: then its Python call is all there is to time
            if any(trains(graph, t) and not ctx.analysis("compiled").hard(t)
                   for i in indexes for t in graph.targets(function_id, i)):
                continue
            for i in indexes:
                call = fn.calls[i]
                if not is_compute_step(call):
                    continue
                targets = [t for t in graph.targets(function_id, i) if not _is_stub(graph.fn(t))]
                targets = [t for t in targets if not any(o in graph.reachable(t) for o in targets)]
                # a step that a compiler runs (jax.jit, tf.function) is timed at its Python call
                compiled = [t for t in targets if ctx.analysis("compiled").hard(t)]
                if not targets or compiled:
                    why = f"compute step {call.callee}()" + (
                        f", compiled by {ctx.analysis('compiled').compiler_of(compiled[0])}" if compiled else "")
                    self._wrap_call(ctx, graph, function_id, call, "compute", why)
                    continue
                for t in targets:
                    decorate.setdefault(t, f"the step of a batch loop in {fn.name} (no forward/backward split)")
        for function_id, why in sorted(decorate.items()):
            fs, fn = graph.functions[function_id]
            if any(has_region(fs, fn, n) for n in ("compute", "compute.forward", "compute.backward")):
                continue
            ctx.add_edit(fs.relpath, function_region(ctx.names(fs.relpath), fn, "compute", self.id, why))


def _layer_subclass(graph, class_id: str) -> bool:
    """A subclass of a concrete torch layer (``class GroupNorm32(nn.GroupNorm)``): a part of
    models, never a model of its own (its forward runs inside theirs)."""
    bases = {b.rsplit(".", 1)[-1] for b in graph.external_bases(class_id)}
    return bool(bases) and not bases & {"Module", "LightningModule", "Sequential", "ModuleList", "ModuleDict"}


def _called_by_step(graph, function_id: str) -> bool:
    """The function is not a model's method (its model calls are the program's, not a part's)."""
    owner = graph.class_of_method(function_id)
    return owner is None or not graph.is_module_class(owner)


def _outermost(graph, classes: set[str]) -> set[str]:
    """The classes whose forward no other one's forward runs."""
    forwards = {c: _forward_id(graph, c) for c in classes}
    return {c for c, own in forwards.items()
            if own and not any(o and o != own and own in graph.reachable(o) for o in forwards.values())}


def _forward_id(graph, class_id: str) -> str | None:
    fs, cs = graph.classes[class_id]
    method = _forward_method(graph, class_id)
    return f"{fs.relpath}::{cs.methods[method]}" if method else None


def _abstract(fn) -> bool:
    """A method with nothing to run: ``@abstractmethod``, or a body that is only a docstring,
    ``pass``/``...`` or ``raise NotImplementedError``."""
    if any(d.rsplit(".", 1)[-1] == "abstractmethod" for d in fn.decorators):
        return True
    body = fn.n_stmts - (1 if fn.has_docstring else 0)
    return body <= 1 and not fn.returns and all(c.callee == "NotImplementedError" for c in fn.calls)


def _in_simple_statement(graph, function_id: str, call) -> bool:
    """The call is part of an expression or assignment statement that runs no backward pass and
    no optimizer step (``output = F.smooth_l1_loss(fc(x), y)``, pytorch/examples'
    ``regression``), or ``loss = model(x, y) / accumulation``: the statement can be timed as
    the forward, its loss with it; ``model(x).sum().backward()`` and
    ``opt.step(lambda: model(x))`` cannot."""
    fs, fn = graph.functions[function_id]
    same = [c for c in fn.calls if c.stmt == call.stmt]
    assignment = any(a.stmt == call.stmt for a in fn.assigns)
    return (assignment or any(c.stmt_kind in ("expr", "assign") for c in same)) and \
        not any(is_backward(c) or is_optimizer_step(graph, fs, fn, c) for c in same)


def _is_stub(fn) -> bool:
    """An abstract placeholder: ``pass``, ``...`` or ``raise NotImplementedError``."""
    return fn.n_stmts - fn.has_docstring <= 1 and all(c.callee == "NotImplementedError" for c in fn.calls)


def _forward_method(graph, class_id: str) -> str | None:
    """The name of the class's own method that calling the model runs (``forward``, or what a
    framework plugin names in ``module_call_methods``)."""
    methods = graph.classes[class_id][1].methods
    return next((m for m in graph.hints.module_call_methods if m in methods), None)
