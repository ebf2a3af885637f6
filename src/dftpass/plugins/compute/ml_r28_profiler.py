"""ML-R28: the PyTorch profiler around the training batch loop, reporting to dftracer."""

from __future__ import annotations

import attrs

from dftpass.api import Case, InsertBefore, Pass, PassKind, trains, WrapStmt

#: the name of the profiler object in the ``with`` (its ``step()`` is called per batch)
PROFILER_NAME = "_dft_prof"


@attrs.define
class ProfilerOptions:
    #: torch.profiler.schedule: steps skipped, warmed up, recorded, and how many times
    wait: int = 1
    warmup: int = 1
    active: int = 3
    repeat: int = 1


class PyTorchProfiler(Pass):
    """Run the PyTorch profiler over a few steps of each training batch loop, into the trace.

    What it does:
        Wraps every training batch loop (one that runs a backward pass or an optimizer step)
        in ``with torch.profiler.profile(schedule=torch.profiler.schedule(wait=1, warmup=1,
        active=3, repeat=1), on_trace_ready=<dftracer's trace_handler>) as _dft_prof:`` and
        calls ``_dft_prof.step()`` once per batch, at the top of the loop body. dftracer's
        handler writes the profiler's operator events into the trace (cat ``PP``), beside
        dftpass's regions. Only dftracer's handler is used; a loop already inside a
        ``torch.profiler.profile`` is left alone.

    Why:
        The ``ai`` regions say how long forward, backward and the step take; the profiler
        says which operators that time goes to, for the few steps it records.

    Example:
        ``for x, y in loader: ...`` becomes ``with torch.profiler.profile(...) as _dft_prof:``
        / ``for x, y in loader:`` / ``_dft_prof.step()`` / ``...``.

    Fix safety:
        Off by default: it changes how long the recorded steps take (the profiler's own
        cost), not what they compute. Each run of the loop (each epoch) profiles its own
        ``wait + warmup + active`` steps. ``strip`` removes the ``with`` and the ``step()``.

    Options:
        wait, warmup, active, repeat: the ``torch.profiler.schedule`` (default 1, 1, 3, 1).
    """

    id = "ML-R28"
    title = "PyTorch profiler"
    kind = PassKind.TRANSFORM
    requires = ("callgraph", "loops")
    frameworks = ("pytorch",)
    default_enabled = False
    tags = ("compute", "profiler")
    Options = ProfilerOptions

    VALID = [
        # an evaluation loop: no gradients, no profiler
        "import torch\n\n\n@torch.no_grad()\ndef evaluate(model, loader):\n    for x, y in loader:\n"
        "        model(x)\n",
    ]
    INVALID = [
        Case(
            "import torch\n\n\ndef train(model, loader, optimizer):\n    for x, y in loader:\n"
            "        loss = torch.nn.functional.mse_loss(model(x), y)\n        loss.backward()\n"
            "        optimizer.step()\n",
            "from dftracer.python import torch as _dft_profiling\nimport torch\n\n\n"
            "def train(model, loader, optimizer):\n"
            "    with torch.profiler.profile(schedule=torch.profiler.schedule(wait=1, warmup=1, active=3, repeat=1), "
            "on_trace_ready=_dft_profiling.trace_handler) as _dft_prof:\n        for x, y in loader:\n"
            "            _dft_prof.step()\n            loss = torch.nn.functional.mse_loss(model(x), y)\n"
            "            loss.backward()\n            optimizer.step()\n",
        ),
    ]

    def run(self, ctx) -> None:
        graph, loops = ctx.analysis("callgraph"), ctx.analysis("loops")
        o = self.options
        for facts in loops.of_kind("batch"):
            if facts.yields_batches or facts.loop.kind != "for":
                continue
            fs, fn = graph.functions[facts.function]
            if not trains(graph, facts.function, lambda c: facts.loop.index in c.loops):
                continue
            if any("profiler.profile" in w for c in fn.calls if c.stmt == facts.loop.stmt for w in c.withs) or \
                    any(c.callee.endswith(f"{PROFILER_NAME}.step") for c in fn.calls if facts.loop.index in c.loops):
                continue  # profiled already
            names = ctx.names(fs.relpath)
            torch = names.module("torch")
            item = (f"{torch}.profiler.profile(schedule={torch}.profiler.schedule(wait={o.wait}, warmup={o.warmup}, "
                    f"active={o.active}, repeat={o.repeat}), on_trace_ready={names.profiler_handler()}) "
                    f"as {PROFILER_NAME}")
            why = f"the PyTorch profiler over the batch loop at line {facts.loop.line}"
            ctx.add_edit(fs.relpath, WrapStmt(self.id, facts.loop.line, why, facts.loop.stmt, item))
            ctx.add_edit(fs.relpath, InsertBefore(self.id, facts.loop.line, why, facts.loop.body_first,
                                                  f"{PROFILER_NAME}.step()", take_comments=False))
