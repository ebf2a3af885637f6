"""ML-R12: Lightning runs the loops; a callback and the module's steps carry the regions."""

from __future__ import annotations

import re

from dftpass.api import (
    Case, FileSummary, function_region, FunctionSummary, has_region, InsertAfter, is_node, Pass, PassKind,
    WrapStmt,
)

#: the two spellings of the package, as the file imports them; the callback derives from the
#: ``Callback`` of the one the program uses (their class hierarchies are apart)
NAMESPACES = ("lightning.pytorch", "pytorch_lightning")
#: trainer calls that run a phase, and the phase's node
PHASE_CALLS = {"fit": "pipeline.train", "validate": "pipeline.evaluate", "test": "pipeline.test"}
TRAINER_NAME = re.compile(r"(?i)(^|_)trainer$")
#: the callback of each package (dftpass.runtime: the hooks are defined there, once)
RUNTIME = "dftpass.runtime"
CALLBACKS = {"lightning.pytorch": "LightningCallback", "pytorch_lightning": "PytorchLightningCallback"}


class LightningLoops(Pass):
    """Time what Lightning's own loops do: epochs, batches, backward, steps, phases, checkpoints.

    What it does:
        Lightning runs the epoch and batch loops inside ``Trainer``, so there is no loop in
        the program to wrap. ML-R12 puts the regions where Lightning lets a program in:

        * ``trainer.fit(...)`` / ``.validate(...)`` / ``.test(...)`` get ``with
          ai.pipeline.train:`` / ``.evaluate`` / ``.test`` around the call;
        * every ``LightningModule``'s ``training_step`` gets ``@ai.compute`` (its forward is
          ML-R7's: the module's, not the network's it is given);
        * after the statement that builds the trainer (``Trainer(...)``, or hydra's
          ``instantiate(cfg.trainer, ...)``),
          ``trainer.callbacks.append(_dft_runtime.LightningCallback())`` (``import
          dftpass.runtime as _dft_runtime``). The callback is defined once, in
          :mod:`dftpass.runtime`, deriving from the ``Callback`` of the package the file uses
          (``PytorchLightningCallback`` for ``pytorch_lightning``); it opens
          ``ai.pipeline.epoch`` per training epoch, ``ai.dataloader.fetch`` for the wait
          between batches, ``ai.compute.backward`` around the backward pass
          (``on_before_backward`` to ``on_after_backward``), ``ai.compute.step`` from
          ``on_before_optimizer_step`` to the end of the batch, ``ai.pipeline.evaluate`` for
          the validation inside ``fit`` (not the sanity check), and sets the epoch and
          ``trainer.global_step`` on the events; at ``setup`` it times each checkpoint write
          of the trainer's ``checkpoint_io`` (``ModelCheckpoint`` and
          ``trainer.save_checkpoint`` alike) as ``ai.checkpoint.io.write``, with the bytes of
          the checkpoint's tensors as ``image_size``.

    Why:
        Without it a Lightning program's trace holds the root, the data set's items and the
        forward passes, and nothing says where an epoch, a step or the validation begins:
        no overlap, no stall, no phase can be measured.

    Example:
        ``trainer.fit(model=model, datamodule=dm)`` becomes ``with ai.pipeline.train:`` /
        ``trainer.fit(model=model, datamodule=dm)``, with
        ``trainer.callbacks.append(_dft_runtime.LightningCallback())`` after
        ``trainer = Trainer(...)``: one line where the trainer is built, and the import.

    Fix safety:
        Safe: the callback only starts and stops regions (each once, whatever order the
        hooks come in) and has no state to save, so checkpoints and results are unchanged;
        appending to ``trainer.callbacks`` after the trainer is built is what Lightning's
        own callback connector reads at each hook. The checkpoint timing replaces the
        ``save_checkpoint`` method of one ``CheckpointIO`` object with a function that calls
        it inside the region. The annotated program imports ``dftpass.runtime`` (no
        dependency beyond dftracer and the framework): dftpass must be installed where it
        runs. ``strip`` removes the import, the append and the regions.

    Options:
        None.
    """

    id = "ML-R12"
    title = "Lightning"
    kind = PassKind.TRANSFORM
    requires = ("callgraph",)
    frameworks = ("lightning",)
    tags = ("pipeline", "compute", "lightning")

    VALID = [
        # not a trainer's fit
        "import lightning as L\n\n\ndef main(model, x, y):\n    model.fit(x, y)\n",
    ]
    INVALID = [
        Case(
            "import lightning as L\nimport torch\n\n\nclass Regressor(L.LightningModule):\n"
            "    def __init__(self):\n        super().__init__()\n        self.net = torch.nn.Linear(4, 1)\n\n"
            "    def training_step(self, batch, batch_idx):\n        x, y = batch\n"
            "        return torch.nn.functional.mse_loss(self.net(x), y)\n\n\n"
            "def main(dm):\n    trainer = L.Trainer(max_epochs=2)\n    model = Regressor()\n"
            "    trainer.fit(model, datamodule=dm)\n    results = trainer.test(model, datamodule=dm)\n"
            "    return results\n",
            "import dftpass.runtime as _dft_runtime\nfrom dftracer.python import ai\n"
            "import lightning as L\nimport torch\n\n\nclass Regressor(L.LightningModule):\n"
            "    def __init__(self):\n        super().__init__()\n        self.net = torch.nn.Linear(4, 1)\n\n"
            "    @ai.compute\n    def training_step(self, batch, batch_idx):\n        x, y = batch\n"
            "        return torch.nn.functional.mse_loss(self.net(x), y)\n\n\n"
            "def main(dm):\n    trainer = L.Trainer(max_epochs=2)\n"
            "    trainer.callbacks.append(_dft_runtime.LightningCallback())\n    model = Regressor()\n"
            "    with ai.pipeline.train:\n        trainer.fit(model, datamodule=dm)\n"
            "    with ai.pipeline.test:\n        results = trainer.test(model, datamodule=dm)\n"
            "    return results\n",
        ),
        Case(
            # the lightning-hydra template (issue 39): ``hydra.utils.instantiate`` builds the
            # module, and its own file has a smoke-test ``__main__`` block that builds it too.
            # The training program's reach is not complete, so the module's step is not taken
            # for code that only the untraced smoke test runs: it gets its region
            "import lightning as L\nimport torch\n\n\nclass LitModule(L.LightningModule):\n"
            "    def __init__(self):\n        super().__init__()\n        self.net = torch.nn.Linear(4, 1)\n\n"
            "    def training_step(self, batch, batch_idx):\n        x, y = batch\n"
            "        return torch.nn.functional.mse_loss(self.net(x), y)\n\n\n"
            "if __name__ == '__main__':\n    _ = LitModule()\n",
            "from dftracer.python import ai\nimport lightning as L\nimport torch\n\n\n"
            "class LitModule(L.LightningModule):\n"
            "    def __init__(self):\n        super().__init__()\n        self.net = torch.nn.Linear(4, 1)\n\n"
            "    @ai.compute\n    def training_step(self, batch, batch_idx):\n        x, y = batch\n"
            "        return torch.nn.functional.mse_loss(self.net(x), y)\n\n\n"
            "if __name__ == '__main__':\n    _ = LitModule()\n",
            path="src/models/lit_module.py",
            files={"src/train.py": "import hydra\nimport lightning as L\n\n\n"
                                   "@hydra.main(config_path='../configs', config_name='train.yaml')\n"
                                   "def main(cfg):\n    model = hydra.utils.instantiate(cfg.model)\n"
                                   "    trainer = L.Trainer(max_epochs=1)\n    trainer.fit(model=model)\n\n\n"
                                   "if __name__ == '__main__':\n    main()\n"},
        ),
    ]

    def run(self, ctx) -> None:
        graph = ctx.analysis("callgraph")
        for function_id, (fs, fn) in sorted(graph.functions.items()):
            namespace = _namespace(fs)
            if namespace is None:
                continue
            cls = graph.class_of_method(function_id)
            if cls is not None and fn.name == "training_step" and graph.has_base(cls, ("LightningModule",)):
                if not any(has_region(fs, fn, n) for n in ("compute", "compute.forward")):
                    ctx.add_edit(fs.relpath, function_region(ctx.names(fs.relpath), fn, "compute", self.id,
                                                             "a LightningModule's training step"))
            self._trainer_calls(ctx, graph, fs, fn, namespace)

    def _trainer_calls(self, ctx, graph, fs: FileSummary, fn: FunctionSummary, namespace: str) -> None:
        names = ctx.names(fs.relpath)
        trainers: dict[str, int] = {}  # trainer name -> line of its first phase call
        for call in fn.calls:
            node = PHASE_CALLS.get(call.method)
            if node is None or not call.receiver or not _is_trainer(graph, fs, fn, call.receiver):
                continue
            trainers.setdefault(call.receiver, call.line)
            if call.stmt_kind not in ("expr", "assign") or any(is_node(fs, w, node) for w in call.withs):
                continue
            ctx.add_edit(fs.relpath, WrapStmt(self.id, call.line, f"{node.split('.')[1]} phase: {call.callee}()",
                                              call.stmt, names.node(node)))
        for trainer in trainers:
            if any(c.callee == f"{trainer}.callbacks.append" and c.args[:1] and
                   (c.args[0] or "").endswith(f".{CALLBACKS[namespace]}()") for c in fn.calls):
                continue  # added already
            built = [a for a in fn.assigns if a.target == trainer]
            if not built:
                continue  # a trainer handed in: its maker adds the callback
            callback = f"{names.module(RUNTIME)}.{CALLBACKS[namespace]}()"
            ctx.add_edit(fs.relpath, InsertAfter(self.id, built[0].line, "Lightning's loops, timed by a callback",
                                                 built[0].stmt, f"{trainer}.callbacks.append({callback})"))


def _namespace(fs: FileSummary) -> str | None:
    """The Lightning package the file uses (``lightning.pytorch`` for ``import lightning``)."""
    for qualified in fs.imports.values():
        if qualified == "pytorch_lightning" or qualified.startswith("pytorch_lightning."):
            return "pytorch_lightning"
        if qualified == "lightning" or qualified.startswith("lightning."):
            return "lightning.pytorch"
    return None


def _is_trainer(graph, fs: FileSummary, fn: FunctionSummary, receiver: str) -> bool:
    """``trainer``, ``self.trainer``, or a name assigned a ``Trainer(...)``."""
    if TRAINER_NAME.search(receiver.rsplit(".", 1)[-1]):
        return True
    return any(a.target == receiver and a.value and graph.qualify(fs, a.value.rstrip("()")).endswith("Trainer")
               for a in fn.assigns)
