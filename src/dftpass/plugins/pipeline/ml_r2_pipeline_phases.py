"""ML-R2: ``@ai.pipeline.train`` / ``.evaluate`` / ``.test`` on the functions that run those loops."""

from __future__ import annotations

from dftpass.core.passes import Case, Pass, PassKind
from dftpass.core.placement import function_region, has_region
from dftpass.plugins.knowledge import evaluates, trains

PHASES = ("pipeline.train", "pipeline.evaluate", "pipeline.test")


class PipelinePhases(Pass):
    """Mark the functions that run the training, evaluation and test loops.

    What it does:
        A function that runs a batch loop (``loops`` analysis) is a *train* phase when the
        loop does a backward pass or an optimizer step (itself or through the functions it
        calls), and an *evaluate* phase when it runs without gradients (``@torch.no_grad``,
        ``with torch.inference_mode():``, ``model.eval()``). An evaluation function whose
        name says ``test`` is a *test* phase. The function gets ``@ai.pipeline.train`` /
        ``.evaluate`` / ``.test``. When two candidates of one phase call each other, only
        the outer one is marked.

    Why:
        Phase events split the timeline into training and evaluation, so time can be
        attributed per phase. Deciding from what the body does (not from the name) finds
        ``train_one_epoch``, ``fit``, ``run_epoch`` and ``validation_loop`` alike, and
        leaves alone a ``train_test_split`` helper.

    Example:
        ``def train_one_epoch(model, loader, optimizer): for x, y in loader: ...; loss.backward()``
        gets ``@ai.pipeline.train``.

    Fix safety:
        Safe: the decorator goes innermost (under ``@torch.no_grad()`` and friends) and keeps
        the signature (``functools.wraps``). Async functions and generators get a
        ``with`` region in the body instead; a region is never nested in itself.

    Options:
        None.
    """

    id = "ML-R2"
    title = "Pipeline phases"
    kind = PassKind.TRANSFORM
    requires = ("loops",)
    frameworks = ("ml",)
    tags = ("pipeline",)

    VALID = [
        # a loop over a loader that neither trains nor evaluates
        "import torch\n\n\ndef stats(loader):\n    total = 0\n    for x in loader:\n        total += x.sum()\n"
        "    return total\n",
    ]
    INVALID = [
        Case(
            "import torch\n\n\ndef fit(model, loader, opt):\n    for x, y in loader:\n"
            "        loss = model(x, y)\n        loss.backward()\n        opt.step()\n\n\n"
            "@torch.no_grad()\ndef check(model, val_loader):\n    for x, y in val_loader:\n        model(x, y)\n\n\n"
            "def test_model(model, test_loader):\n    model.eval()\n    for x, y in test_loader:\n        model(x, y)\n",
            "from dftracer.python import ai\nimport torch\n\n\n@ai.pipeline.train\ndef fit(model, loader, opt):\n"
            "    for x, y in loader:\n        loss = model(x, y)\n        loss.backward()\n        opt.step()\n\n\n"
            "@torch.no_grad()\n@ai.pipeline.evaluate\ndef check(model, val_loader):\n    for x, y in val_loader:\n"
            "        model(x, y)\n\n\n@ai.pipeline.test\ndef test_model(model, test_loader):\n    model.eval()\n"
            "    for x, y in test_loader:\n        model(x, y)\n",
        ),
        Case(
            # the backward pass sits in a helper the loop calls
            "import torch\n\n\ndef step(model, batch, opt):\n    model(batch).backward()\n    opt.step()\n\n\n"
            "def run_epoch(model, train_dl, opt):\n    for batch in train_dl:\n        step(model, batch, opt)\n",
            "from dftracer.python import ai\nimport torch\n\n\ndef step(model, batch, opt):\n"
            "    model(batch).backward()\n    opt.step()\n\n\n@ai.pipeline.train\n"
            "def run_epoch(model, train_dl, opt):\n    for batch in train_dl:\n        step(model, batch, opt)\n",
        ),
    ]

    def run(self, ctx) -> None:
        loops = ctx.analysis("loops")
        graph = ctx.analysis("callgraph")
        candidates: dict[str, str] = {}
        for function_id in graph.functions:
            fs, fn = graph.functions[function_id]
            batch = [f.loop.index for f in loops.loops_of(function_id) if f.kind == "batch"]
            if fn.is_module or not batch:
                continue
            in_batch_loop = lambda call: any(i in call.loops for i in batch)  # noqa: E731
            if trains(graph, function_id, in_batch_loop):
                phase = "pipeline.train"
            elif evaluates(fn):
                phase = "pipeline.test" if "test" in fn.name.lower() else "pipeline.evaluate"
            else:
                continue
            candidates[function_id] = phase
        for function_id, phase in sorted(candidates.items()):
            fs, fn = graph.functions[function_id]
            if any(has_region(fs, fn, p) for p in PHASES):
                continue
            # the same node nested in itself keeps only the inner event: mark the outer one only
            outer = [c for c, p in candidates.items() if p == phase and c != function_id
                     and function_id in graph.reachable(c)]
            if outer:
                continue
            names = ctx.names(fs.relpath)
            why = f"{phase.split('.')[1]} phase: runs a batch loop that " + (
                "trains" if phase == "pipeline.train" else "runs without gradients")
            ctx.add_edit(fs.relpath, function_region(names, fn, phase, self.id, why))
