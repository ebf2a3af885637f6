"""ML-R12: Lightning runs the loops; a callback and the module's steps carry the regions."""

from __future__ import annotations

import re

from dftpass.core.edits import InsertAfter, InsertBefore, WrapStmt
from dftpass.core.emitter import FileNames, image_size, is_node
from dftpass.core.passes import Case, Pass, PassKind
from dftpass.core.placement import function_region, has_region, top_level_line
from dftpass.core.summary import FileSummary, FunctionSummary

#: the two spellings of the package, as the file imports them; the callback derives from the
#: ``Callback`` of the one the program uses (their class hierarchies are apart)
NAMESPACES = ("lightning.pytorch", "pytorch_lightning")
#: trainer calls that run a phase, and the phase's node
PHASE_CALLS = {"fit": "pipeline.train", "validate": "pipeline.evaluate", "test": "pipeline.test"}
TRAINER_NAME = re.compile(r"(?i)(^|_)trainer$")
#: the updates a step writes from the callback (Lightning moves the batch to the device itself)
STEP_SUBTREES = ["compute", "dataloader"]


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
          ``instantiate(cfg.trainer, ...)``), ``trainer.callbacks.append(_DftLightningCallback())``;
          the callback, a class dftpass adds to the file (deriving from the ``Callback`` of
          the package the file uses), opens ``ai.pipeline.epoch`` per training epoch,
          ``ai.dataloader.fetch`` for the wait between batches, ``ai.compute.backward``
          around the backward pass (``on_before_backward`` to ``on_after_backward``),
          ``ai.compute.step`` from ``on_before_optimizer_step`` to the end of the batch,
          ``ai.pipeline.evaluate`` for the validation inside ``fit`` (not the sanity check),
          and sets the epoch and ``trainer.global_step`` on the events; at ``setup`` it
          times each checkpoint write of the trainer's ``checkpoint_io`` (``ModelCheckpoint``
          and ``trainer.save_checkpoint`` alike) as ``ai.checkpoint.io.write``, with the
          bytes of the checkpoint's tensors as ``image_size``.

    Why:
        Without it a Lightning program's trace holds the root, the data set's items and the
        forward passes, and nothing says where an epoch, a step or the validation begins:
        no overlap, no stall, no phase can be measured.

    Example:
        ``trainer.fit(model=model, datamodule=dm)`` becomes ``with ai.pipeline.train:`` /
        ``trainer.fit(model=model, datamodule=dm)``, with
        ``trainer.callbacks.append(_DftLightningCallback())`` after ``trainer = Trainer(...)``.

    Fix safety:
        Safe: the callback only starts and stops regions (each once, whatever order the
        hooks come in) and has no state to save, so checkpoints and results are unchanged;
        appending to ``trainer.callbacks`` after the trainer is built is what Lightning's
        own callback connector reads at each hook. The checkpoint timing replaces the
        ``save_checkpoint`` method of one ``CheckpointIO`` object with a function that calls
        it inside the region. ``strip`` removes the class, the append and the regions.

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
            "import lightning.pytorch as _dft_lightning\nfrom dftracer.python import ai\n"
            "import lightning as L\nimport torch\n\n\nclass Regressor(L.LightningModule):\n"
            "    def __init__(self):\n        super().__init__()\n        self.net = torch.nn.Linear(4, 1)\n\n"
            "    @ai.compute\n    def training_step(self, batch, batch_idx):\n        x, y = batch\n"
            "        return torch.nn.functional.mse_loss(self.net(x), y)\n\n\n"
            "class _DftLightningCallback(_dft_lightning.Callback):\n"
            '    """dftpass: dftracer regions for the loops Lightning runs (epochs, the wait for each batch,\n'
            '    backward passes, optimizer steps, validation inside fit, checkpoint writes)."""\n\n'
            "    def __init__(self):\n        super().__init__()\n        self._open = {}\n\n"
            "    def _region(self, node, on):\n        if on and id(node) not in self._open:\n"
            "            self._open[id(node)] = node\n            node.start()\n"
            "        elif not on and id(node) in self._open:\n            self._open.pop(id(node)).stop()\n\n"
            "    def setup(self, trainer, pl_module, stage):\n        io = trainer.strategy.checkpoint_io\n"
            '        save = io.save_checkpoint\n        if getattr(save, "_dft", False):\n            return\n'
            "\n        def save_checkpoint(checkpoint, *args, **kwargs):\n"
            "            with ai.checkpoint.io.write:\n"
            "                result = save(checkpoint, *args, **kwargs)\n"
            "                ai.checkpoint.io.write.update(image_size=sum(t.element_size() * t.nelement() for t in torch.utils._pytree.tree_flatten(checkpoint)[0] if torch.is_tensor(t)))\n"
            "            return result\n\n        save_checkpoint._dft = True\n"
            "        io.save_checkpoint = save_checkpoint\n\n"
            "    def on_train_epoch_start(self, trainer, pl_module):\n"
            "        self._region(ai.pipeline.epoch, True)\n        ai.update(epoch=trainer.current_epoch)\n"
            "        self._region(ai.dataloader.fetch, True)\n\n"
            "    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):\n"
            "        self._region(ai.dataloader.fetch, False)\n"
            "        ai.compute.update(step=trainer.global_step, epoch=trainer.current_epoch); ai.dataloader.update(step=trainer.global_step, epoch=trainer.current_epoch)\n"
            "\n    def on_before_backward(self, trainer, pl_module, loss):\n"
            "        self._region(ai.compute.backward, True)\n\n"
            "    def on_after_backward(self, trainer, pl_module):\n"
            "        self._region(ai.compute.backward, False)\n\n"
            "    def on_before_optimizer_step(self, trainer, pl_module, optimizer):\n"
            "        self._region(ai.compute.step, True)\n\n"
            "    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):\n"
            "        self._region(ai.compute.step, False)\n        self._region(ai.dataloader.fetch, True)\n\n"
            "    def on_validation_start(self, trainer, pl_module):\n"
            "        self._region(ai.dataloader.fetch, False)\n"
            '        if getattr(trainer.state.fn, "value", trainer.state.fn) == "fit" and not trainer.sanity_checking:\n'
            "            self._region(ai.pipeline.evaluate, True)\n\n"
            "    def on_validation_end(self, trainer, pl_module):\n"
            "        if id(ai.pipeline.evaluate) in self._open:\n"
            "            self._region(ai.pipeline.evaluate, False)\n"
            "            self._region(ai.dataloader.fetch, id(ai.pipeline.epoch) in self._open)\n\n"
            "    def on_train_epoch_end(self, trainer, pl_module):\n"
            "        self._region(ai.dataloader.fetch, False)\n        self._region(ai.pipeline.epoch, False)\n"
            "\ndef main(dm):\n    trainer = L.Trainer(max_epochs=2)\n"
            "    trainer.callbacks.append(_DftLightningCallback())\n    model = Regressor()\n"
            "    with ai.pipeline.train:\n        trainer.fit(model, datamodule=dm)\n"
            "    with ai.pipeline.test:\n        results = trainer.test(model, datamodule=dm)\n"
            "    return results\n",
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
        callback = names.own("lightning_callback")
        added: list = []  # the statements the callback is appended after
        for trainer in trainers:
            if any(c.callee == f"{trainer}.callbacks.append" and c.args[:1] == (f"{callback}()",) for c in fn.calls):
                continue  # added already
            built = [a for a in fn.assigns if a.target == trainer]
            if not built:
                continue  # a trainer handed in: its maker adds the callback
            ctx.add_edit(fs.relpath, InsertAfter(self.id, built[0].line, "Lightning's loops, timed by a callback",
                                                 built[0].stmt, f"{trainer}.callbacks.append({callback}())"))
            added.append(built[0].stmt)
        if added and not any(c.name == callback for c in fs.classes):
            top = min(added)[:1]  # the top-level statement the trainer is built in
            ctx.add_edit(fs.relpath, InsertBefore(self.id, top_level_line(fs, top), "the callback of ML-R12", top,
                                                  callback_class(names, namespace), take_comments=False,
                                                  separate=True))


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


def callback_class(names: FileNames, namespace: str) -> str:
    """The source of the callback class (spelled through the file's names)."""
    cls, base, torch = names.own("lightning_callback"), names.module(namespace), names.module("torch")
    epoch, fetch, evaluate = (names.node(n) for n in ("pipeline.epoch", "dataloader.fetch", "pipeline.evaluate"))
    backward, step, write = (names.node(n) for n in ("compute.backward", "compute.step", "checkpoint.io.write"))
    step_update = names.subtree_update(STEP_SUBTREES, step="trainer.global_step", epoch="trainer.current_epoch")
    size = image_size("checkpoint", "state", torch)
    return (
        f"class {cls}({base}.Callback):\n"
        f'    """dftpass: dftracer regions for the loops Lightning runs (epochs, the wait for each batch,\n'
        f'    backward passes, optimizer steps, validation inside fit, checkpoint writes)."""\n\n'
        f"    def __init__(self):\n"
        f"        super().__init__()\n"
        f"        self._open = {{}}\n\n"
        f"    def _region(self, node, on):\n"
        f"        if on and id(node) not in self._open:\n"
        f"            self._open[id(node)] = node\n"
        f"            node.start()\n"
        f"        elif not on and id(node) in self._open:\n"
        f"            self._open.pop(id(node)).stop()\n\n"
        f"    def setup(self, trainer, pl_module, stage):\n"
        f"        io = trainer.strategy.checkpoint_io\n"
        f"        save = io.save_checkpoint\n"
        f'        if getattr(save, "_dft", False):\n'
        f"            return\n\n"
        f"        def save_checkpoint(checkpoint, *args, **kwargs):\n"
        f"            with {write}:\n"
        f"                result = save(checkpoint, *args, **kwargs)\n"
        f"                {names.node_update('checkpoint.io.write', image_size=size)}\n"
        f"            return result\n\n"
        f"        save_checkpoint._dft = True\n"
        f"        io.save_checkpoint = save_checkpoint\n\n"
        f"    def on_train_epoch_start(self, trainer, pl_module):\n"
        f"        self._region({epoch}, True)\n"
        f"        {names.update(epoch='trainer.current_epoch')}\n"
        f"        self._region({fetch}, True)\n\n"
        f"    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx):\n"
        f"        self._region({fetch}, False)\n"
        f"        {step_update}\n\n"
        f"    def on_before_backward(self, trainer, pl_module, loss):\n"
        f"        self._region({backward}, True)\n\n"
        f"    def on_after_backward(self, trainer, pl_module):\n"
        f"        self._region({backward}, False)\n\n"
        f"    def on_before_optimizer_step(self, trainer, pl_module, optimizer):\n"
        f"        self._region({step}, True)\n\n"
        f"    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx):\n"
        f"        self._region({step}, False)\n"
        f"        self._region({fetch}, True)\n\n"
        f"    def on_validation_start(self, trainer, pl_module):\n"
        f"        self._region({fetch}, False)\n"
        f'        if getattr(trainer.state.fn, "value", trainer.state.fn) == "fit" and not trainer.sanity_checking:\n'
        f"            self._region({evaluate}, True)\n\n"
        f"    def on_validation_end(self, trainer, pl_module):\n"
        f"        if id({evaluate}) in self._open:\n"
        f"            self._region({evaluate}, False)\n"
        f"            self._region({fetch}, id({epoch}) in self._open)\n\n"
        f"    def on_train_epoch_end(self, trainer, pl_module):\n"
        f"        self._region({fetch}, False)\n"
        f"        self._region({epoch}, False)\n"
    )
