"""ML-R29: dftracer's Dynamo backend for ``torch.compile``: an event per compiled operator."""

from __future__ import annotations

import attrs

from dftpass.api import (
    AddArgument, Case, Finding, InsertAfter, is_model_call, model_classes, Pass, PassKind, Severity, step_calls,
    trains,
)

COMPILE = "torch.compile"


@attrs.define
class DynamoOptions:
    #: compile the model the training loop calls when the program does not (``model =
    #: torch.compile(model, backend=...)`` after the model is built, before any DDP wrapping)
    add_compile: bool = False


class DynamoBackend(Pass):
    """Give ``torch.compile`` dftracer's backend, so each operator of the compiled graph is an event.

    What it does:
        Every ``torch.compile(model, ...)`` without a ``backend=`` gets
        ``backend=create_backend(name="<model>")`` (``from dftracer.python import
        create_backend``): dftracer's backend traces the graph through AOT autograd and records an
        event per FX operator (cat ``dynamo``), forward and backward. With ``add_compile``,
        a program that compiles nothing gets ``model = torch.compile(model, backend=...)``
        right after the statement that builds the model its training loop calls (so before
        a ``DistributedDataParallel`` wrapping that follows). A ``torch.compile`` given a
        backend of its own is left alone (a note says so). Files of a project that uses the
        backend get no import prelude (it stubs dftracer's Dynamo module).

    Why:
        The ``ai`` regions time forward and backward as wholes; the backend says which
        operators inside the compiled graph take the time.

    Example:
        ``model = torch.compile(model)`` becomes ``model = torch.compile(model,
        backend=create_backend(name="Net"))``.

    Fix safety:
        Off by default and unsafe: it replaces the program's compiler (inductor by default)
        with dftracer's instrumented graph, which runs the operators eagerly: the step's time
        changes, and results can differ from an inductor-compiled run in the last bits. With
        tracing off the backend compiles the graph without the timers. ``add_compile`` adds a
        compilation the program did not have. ``strip`` removes what it added.

    Options:
        add_compile: compile the training loop's model when the program does not (default false).
    """

    id = "ML-R29"
    title = "Dynamo backend"
    kind = PassKind.TRANSFORM
    requires = ("callgraph", "loops")
    frameworks = ("pytorch",)
    default_enabled = False
    tags = ("compute", "dynamo")
    Options = DynamoOptions

    VALID = [
        # no torch.compile, and add_compile is off
        "import torch\n\n\ndef train(model, loader, opt):\n    for x in loader:\n        model(x).sum().backward()\n"
        "        opt.step()\n",
        # a backend of the program's own
        Case("import torch\n\n\ndef build(net):\n    return torch.compile(net, backend='eager')\n",
             findings=()),
    ]
    INVALID = [
        Case(
            "import torch\n\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return x\n\n\n"
            "def main():\n    model = torch.compile(Net(), mode='max-autotune')\n",
            "from dftracer.python import create_backend as _dft_create_backend\nimport torch\n\n\nclass Net(torch.nn.Module):\n"
            "    def forward(self, x):\n        return x\n\n\n"
            "def main():\n    model = torch.compile(Net(), mode='max-autotune', "
            "backend=_dft_create_backend(name=\"Net\"))\n",
        ),
        Case(
            # add_compile: after the model is built, before DDP wraps it
            "import torch\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n\n\n"
            "class Net(torch.nn.Module):\n    def forward(self, x):\n        return x\n\n\n"
            "def main(loader, opt):\n    model = Net().to('cpu')\n    model = DDP(model)\n    for x in loader:\n"
            "        model(x).sum().backward()\n        opt.step()\n",
            "from dftracer.python import create_backend as _dft_create_backend\nimport torch\n"
            "from torch.nn.parallel import DistributedDataParallel as DDP\n\n\n"
            "class Net(torch.nn.Module):\n    def forward(self, x):\n        return x\n\n\n"
            "def main(loader, opt):\n    model = Net().to('cpu')\n"
            "    model = torch.compile(model, backend=_dft_create_backend(name=\"Net\"))\n"
            "    model = DDP(model)\n    for x in loader:\n        model(x).sum().backward()\n        opt.step()\n",
            options={"add_compile": True},
        ),
    ]

    def run(self, ctx) -> None:
        graph = ctx.analysis("callgraph")
        compiles = False
        for function_id, (fs, fn) in sorted(graph.functions.items()):
            for call in fn.calls:
                if graph.qualify(fs, call.callee) != COMPILE:
                    continue
                compiles = True
                if "backend" in dict(call.keywords) or len(call.args) > 2:
                    if ctx.mode != "validate" and "create_backend" not in (dict(call.keywords).get("backend") or ""):
                        ctx.report(Finding(self.id, f"{call.callee}() has a backend of its own: left as it is",
                                           fs.relpath, call.line, severity=Severity.INFO))
                    continue
                name = _model_name(graph, function_id, call.args[0] if call.args else None)
                ctx.add_edit(fs.relpath, AddArgument(self.id, call.line, "dftracer's Dynamo backend", call.stmt,
                                                     call.callee, "backend",
                                                     ctx.names(fs.relpath).dynamo_backend(name), new=True,
                                                     listed=False))
        if self.options.add_compile and not compiles:
            self._add_compile(ctx, graph)

    def _add_compile(self, ctx, graph) -> None:
        """``model = torch.compile(model, backend=...)`` after the statement that builds the
        model the first training loop calls."""
        loops = ctx.analysis("loops")
        for function_id, index in step_calls(graph, loops):
            if not is_model_call(graph, function_id, index) or not trains(graph, function_id):
                continue
            found = _where_built(graph, function_id, graph.fn(function_id).calls[index].callee)
            if found is None:
                fs, fn = graph.functions[function_id]
                ctx.report(Finding(self.id, f"{fn.calls[index].callee} is not built in {fn.name} or its caller: "
                                   "compile it where it is built (add torch.compile there)", fs.relpath,
                                   fn.calls[index].line, severity=Severity.INFO))
                return
            builder, model, built = found
            fs = graph.file_of(builder)
            names = ctx.names(fs.relpath)
            name = _model_name(graph, builder, model)
            code = f"{model} = {names.module('torch')}.compile({model}, backend={names.dynamo_backend(name)})"
            ctx.add_edit(fs.relpath, InsertAfter(self.id, built.line, f"compile {model} with dftracer's backend",
                                                 built.stmt, code))
            return


def _where_built(graph, function_id: str, model: str):
    """(function, name, assignment) of the statement that builds ``model``: in the function,
    or, for a parameter, in a caller that passes it (the first)."""
    fn = graph.fn(function_id)

    def built_in(fid: str, name: str):
        found = [a for a in graph.fn(fid).assigns if a.target == name and a.value and not any(
            w in a.value for w in ("DDP", "DistributedDataParallel", "compile"))]
        return (fid, name, found[0]) if found else None

    here = built_in(function_id, model)
    if here or model not in fn.positional:
        return here
    position = fn.positional.index(model) - (1 if fn.cls and fn.positional[:1] == ("self",) else 0)
    for caller, call in graph.call_sites_of(function_id):
        passed = call.args[position] if 0 <= position < len(call.args) else dict(call.keywords).get(model)
        if passed and "." not in passed and "(" not in passed:
            found = built_in(caller, passed)
            if found:
                return found
    return None


def _model_name(graph, function_id: str, text: str | None) -> str:
    """The model's class name, for the backend's events (``model`` when it cannot be told)."""
    if not text:
        return "model"
    if text.endswith("()"):  # ``torch.compile(Net())``: the class built in place
        built = graph.resolve_name(graph.file_of(function_id), text[:-2])
        if built in graph.classes:
            return graph.classes[built][1].name
    found = sorted(model_classes(graph, function_id, text))
    return graph.classes[found[0]][1].name if found else "model"
