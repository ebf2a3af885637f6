"""ML-R3: wrap the epoch loop in ``ai.pipeline.epoch.iter(..., include_iter=False)``."""

from __future__ import annotations

from dftpass.core.edits import WrapIter
from dftpass.core.passes import Case, Pass, PassKind


class EpochLoop(Pass):
    """Wrap the iterable of the epoch loop in ``ai.pipeline.epoch.iter(..., include_iter=False)``.

    What it does:
        The epoch loop is the innermost ``for`` loop that contains a batch loop, in the
        same function or through the functions it calls (the ``loops`` analysis). Its
        iterable is wrapped whole; the loop variable is untouched.

    Why:
        One ``epoch.block`` event per epoch gives the epoch's duration and separates
        epochs on the timeline. ``include_iter=False`` drops the ``epoch.iter`` event,
        which would only measure ``range()`` handing out the next number (DLIO does the same).

    Example:
        ``for epoch in range(1, args.epochs + 1):`` becomes
        ``for epoch in ai.pipeline.epoch.iter(range(1, args.epochs + 1), include_iter=False):``

    Fix safety:
        Safe: same elements, same order. Only the innermost loop around batch loops is
        wrapped (a sweep over learning rates around it is not), and a loop already wrapped
        is left alone. ``while`` epoch loops are not wrapped (there is no iterable).

    Options:
        None.
    """

    id = "ML-R3"
    title = "Epoch loop"
    kind = PassKind.TRANSFORM
    requires = ("loops",)
    tags = ("pipeline",)

    VALID = [
        # a loop over epochs with no batch loop inside is not an epoch loop
        "def f(n):\n    for epoch in range(n):\n        print(epoch)\n",
    ]
    INVALID = [
        Case(
            "def train(model, loader):\n    for x in loader:\n        model(x)\n\n\n"
            "def main(model, loader, epochs):\n    for epoch in range(epochs):\n        train(model, loader)\n",
            "from dftracer.python import ai\n\n\ndef train(model, loader):\n    for x in loader:\n        model(x)\n\n\n"
            "def main(model, loader, epochs):\n"
            "    for epoch in ai.pipeline.epoch.iter(range(epochs), include_iter=False):\n"
            "        train(model, loader)\n",
        ),
        Case(
            "def sweep(model, loader):\n    for lr in (0.1, 0.01):\n        for epoch in range(3):\n"
            "            for x in loader:\n                model(x)\n",
            "from dftracer.python import ai\n\n\ndef sweep(model, loader):\n    for lr in (0.1, 0.01):\n"
            "        for epoch in ai.pipeline.epoch.iter(range(3), include_iter=False):\n"
            "            for x in loader:\n                model(x)\n",
        ),
    ]

    def run(self, ctx) -> None:
        loops = ctx.analysis("loops")
        graph = ctx.analysis("callgraph")
        for facts in loops.of_kind("epoch"):
            if facts.wrapped_by:
                continue
            fs = graph.file_of(facts.function)
            names = ctx.names(fs.relpath)
            ctx.add_edit(fs.relpath, WrapIter(self.id, facts.loop.line, "epoch loop: " + facts.reason,
                                              facts.loop.stmt, names.iter_callee("pipeline.epoch"),
                                              extra=", include_iter=False"))
