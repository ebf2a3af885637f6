"""ML-R6: wrap the loader a batch loop iterates in ``ai.dataloader.fetch.iter``."""

from __future__ import annotations

from dftpass.core.edits import WrapIter, WrapStmt
from dftpass.core.emitter import is_node
from dftpass.core.findings import Finding, Severity
from dftpass.core.passes import Case, Pass, PassKind
from dftpass.plugins.knowledge import calls_at


class BatchLoop(Pass):
    """Wrap the data loader of every batch loop in ``ai.dataloader.fetch.iter(...)``.

    What it does:
        Finds the loops that iterate a data loader (see the ``loops`` analysis: a
        ``DataLoader(...)`` or anything derived from one, through ``enumerate``, ``tqdm``,
        ``zip``, parameters and attributes) and wraps the loader, inside any ``enumerate``,
        so that the loop still unpacks what it did. A loop that takes ``next(it)`` from a
        loader gets ``with ai.dataloader.fetch:`` around that statement instead.

    Why:
        ``fetch.iter`` writes two events per batch: ``fetch.iter``, the time the training
        loop waited for the batch (the data stall), and ``fetch.block``, the time spent
        on it. Without them a trace cannot show whether loading keeps up with compute
        (ML-R24).

    Example:
        ``for step, (x, y) in enumerate(train_loader):`` becomes
        ``for step, (x, y) in enumerate(ai.dataloader.fetch.iter(train_loader)):``

    Fix safety:
        Safe: the wrapper yields the same elements in the same order. A ``break`` out of
        the loop loses the events of its last iteration (reported as a note). Loops over
        anything that is not a loader are left alone; a loop already wrapped is not
        wrapped again.

    Options:
        None (what counts as a loader is configured on the ``loops`` analysis:
        ``rules.options.loops.loader_name_pattern``, ``loader_factories``).
    """

    id = "ML-R6"
    title = "Batch loop"
    kind = PassKind.TRANSFORM
    requires = ("loops",)
    tags = ("pipeline", "dataloader")

    VALID = [
        # a loop over something that is not a loader
        "def f(cfg):\n    for key, value in cfg.items():\n        print(key, value)\n",
        # already wrapped
        "from dftracer.python import ai\n\n\ndef f(train_loader):\n"
        "    for batch in ai.dataloader.fetch.iter(train_loader):\n        pass\n",
    ]
    INVALID = [
        Case(
            "from torch.utils.data import DataLoader\n\n\ndef f(ds):\n"
            "    loader = DataLoader(ds, batch_size=4)\n"
            "    for batch_idx, (data, target) in enumerate(loader):\n        print(data)\n",
            "from dftracer.python import ai\nfrom torch.utils.data import DataLoader\n\n\ndef f(ds):\n"
            "    loader = DataLoader(ds, batch_size=4)\n"
            "    for batch_idx, (data, target) in enumerate(ai.dataloader.fetch.iter(loader)):\n"
            "        print(data)\n",
        ),
        Case(
            "from tqdm import tqdm\n\n\ndef run(val_loader):\n"
            "    for images, labels in tqdm(val_loader, desc='val'):  # progress\n        pass\n",
            "from dftracer.python import ai\nfrom tqdm import tqdm\n\n\ndef run(val_loader):\n"
            "    for images, labels in ai.dataloader.fetch.iter(tqdm(val_loader, desc='val')):  # progress\n"
            "        pass\n",
        ),
        Case(
            "def run(self_dl, other):\n    for a, b in zip(self_dl, other):\n        pass\n",
            "from dftracer.python import ai\n\n\ndef run(self_dl, other):\n"
            "    for a, b in ai.dataloader.fetch.iter(zip(self_dl, other)):\n        pass\n",
        ),
        Case(
            "def run(loader, steps):\n    it = iter(loader)\n    for step in range(steps):\n"
            "        batch = next(it)\n        print(batch)\n",
            "from dftracer.python import ai\n\n\ndef run(loader, steps):\n    it = iter(loader)\n"
            "    for step in range(steps):\n        with ai.dataloader.fetch:\n            batch = next(it)\n"
            "        print(batch)\n",
        ),
    ]

    def run(self, ctx) -> None:
        loops = ctx.analysis("loops")
        graph = ctx.analysis("callgraph")
        for facts in loops.of_kind("batch"):
            fs, fn = graph.functions[facts.function]
            names = ctx.names(fs.relpath)
            loop = facts.loop
            if facts.style == "next":
                for path, _ in loop.next_calls:
                    if any(is_node(fs, w, "dataloader.fetch") for c in calls_at(fn, path) for w in c.withs):
                        continue
                    ctx.add_edit(fs.relpath, WrapStmt(self.id, loop.line, "next() from a data loader",
                                                      path, names.node("dataloader.fetch")))
                continue
            if facts.wrapped_by or loop.kind != "for":
                continue
            ctx.add_edit(fs.relpath, WrapIter(self.id, loop.line, f"batch loop: {facts.reason}", loop.stmt,
                                              names.iter_callee("dataloader.fetch"), depth=facts.wrap_depth))
            if loop.has_break:
                ctx.report(Finding(self.id, "the loop can `break`: the events of its last iteration are lost "
                                   "(dftracer writes them when the next element is requested)",
                                   fs.relpath, loop.line, loop.col, Severity.INFO))
