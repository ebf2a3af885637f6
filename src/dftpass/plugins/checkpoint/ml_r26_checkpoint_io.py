"""ML-R26: ``ai.checkpoint.io.write`` / ``.read`` around the save / load inside a checkpoint, with its size."""

from __future__ import annotations

from dftpass.api import (
    Case, CheckpointPlan, Expect, Finding, is_node, is_optimizer, model_classes, MODEL_NAME, Pass,
    PassKind, Severity, torch_name, unwrappable, WrapStmt,
)


IO_NODES = {"save": "checkpoint.io.write", "load": "checkpoint.io.read"}


class CheckpointIO(Pass):
    """Time the write (read) itself inside a checkpoint, with ``image_size`` = bytes of state.

    What it does:
        Inside each checkpoint region (those ML-R18 makes, found by the same recogniser, and
        those already in the code), the statement that writes or reads the state with
        ``torch.save`` / ``torch.load`` or safetensors ``save_file`` / ``load_file`` gets
        ``with ai.checkpoint.io.write:`` (``.read``), and inside it, after the operation,
        ``ai.checkpoint.io.write.update(image_size=...)``: the bytes of the tensors in the object
        written or read, measured in memory (for torch, every tensor in the nested dicts and
        lists of the state: ``element_size() * nelement()``; for safetensors, the ``nbytes`` of
        the dict's values). Never the file's size and never the path.

        ``torch.save(model.state_dict(), f)`` is measured without calling ``state_dict()`` a
        second time (its hooks, an FSDP gather): the bytes of the model's parameters and
        buffers, or of an optimizer's state tensors, inline where the owner is known to be a
        model or an optimizer and through ``dftpass.runtime.nbytes(owner)`` where it is not. A
        whole model (``torch.save(model, f)``) is measured the same way. When the object
        cannot be named (``torch.save({"model": ...}, f)``) the region gets no size (never a
        ``-1``), and a note suggests binding the state to a name. A
        load whose result is not bound to a name (``model.load_state_dict(torch.load(f))``)
        gets no region: the statement also copies the state into the model.

    Why:
        A checkpoint is a copy of the state (``state_dict()``, device to host) and a write;
        the I/O phase and its size separate the two and give the bandwidth (bytes / duration)
        that ``dftpass analyze`` compares with the file system's.

    Example:
        ``torch.save(state, tmp)`` becomes ``with ai.checkpoint.io.write:`` / ``torch.save(state,
        tmp)`` / ``ai.checkpoint.io.write.update(image_size=sum(t.element_size() * t.nelement()
        for t in torch.utils._pytree.tree_flatten(state)[0] if torch.is_tensor(t)))``.

    Fix safety:
        Safe. The size expression reads only what is already in memory, raises for no object
        (non-tensor leaves count 0) and runs once per checkpoint, tracing on or off (1-2 µs per
        tensor: ~15 ms for a state of 8,000 tensors; ``update`` itself ~1 µs). The statement
        stays as it is inside the ``with``; if it raises, the event is still written, with the
        size the node's previous event had (``update`` did not run).

    Options:
        None.
    """

    id = "ML-R26"
    title = "Checkpoint I/O phases"
    kind = PassKind.TRANSFORM
    requires = ("callgraph", "checkpoints")
    after = ("ML-R18",)
    tags = ("checkpoint", "io")

    VALID = [
        # predictions an evaluation function saves: not a checkpoint
        "import torch\n\n\n@torch.no_grad()\ndef predict(model, loader):\n    model.eval()\n"
        "    preds = torch.cat([model(x).argmax(1) for x, _ in loader])\n"
        "    torch.save(preds, 'preds.pt')\n    return preds\n",
        # already timed
        "import torch\nfrom dftracer.python import ai\n\n\n@ai.checkpoint.capture\ndef save(state, path):\n"
        "    with ai.checkpoint.io.write:\n        torch.save(state, path)\n"
        "        ai.checkpoint.io.write.update(image_size=1)\n",
        # TensorFlow's manager writes its files itself: ML-R18's region only
        "import tensorflow as tf\n\n\ndef save(model, optimizer, directory):\n"
        "    ckpt = tf.train.Checkpoint(model=model, optimizer=optimizer)\n"
        "    manager = tf.train.CheckpointManager(ckpt, directory, max_to_keep=3)\n    return manager.save()\n",
        # what is read goes straight into the model: no name to measure (a note says so)
        Case("import torch\n\n\ndef resume(model, path):\n"
             "    model.load_state_dict(torch.load(path, map_location='cpu'))\n",
             findings=(Expect("info", "not bound to a name"),)),
    ]
    INVALID = [
        Case(
            # the bundled app's checkpoint module (ML-R18 decorates both functions)
            '"""Save and restore the training state."""\nimport os\n\nimport torch\n\n\n'
            'def save_checkpoint(path, model, optimizer, epoch):\n'
            '    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch}\n'
            '    tmp = path + ".tmp"\n    torch.save(state, tmp)\n    os.replace(tmp, path)\n\n\n'
            'def load_checkpoint(path, model, optimizer):\n    state = torch.load(path, weights_only=True)\n'
            '    model.load_state_dict(state["model"])\n    optimizer.load_state_dict(state["optimizer"])\n'
            '    return state["epoch"]\n',
            '"""Save and restore the training state."""\nfrom dftracer.python import ai\nimport os\n\n'
            'import torch\n\n\ndef save_checkpoint(path, model, optimizer, epoch):\n'
            '    state = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch}\n'
            '    tmp = path + ".tmp"\n    with ai.checkpoint.io.write:\n        torch.save(state, tmp)\n'
            '        ai.checkpoint.io.write.update(image_size=sum(t.element_size() * t.nelement() for t in torch.utils._pytree.tree_flatten(state)[0] if torch.is_tensor(t)))\n'
            '    os.replace(tmp, path)\n\n\ndef load_checkpoint(path, model, optimizer):\n'
            '    with ai.checkpoint.io.read:\n        state = torch.load(path, weights_only=True)\n'
            '        ai.checkpoint.io.read.update(image_size=sum(t.element_size() * t.nelement() for t in torch.utils._pytree.tree_flatten(state)[0] if torch.is_tensor(t)))\n'
            '    model.load_state_dict(state["model"])\n    optimizer.load_state_dict(state["optimizer"])\n'
            '    return state["epoch"]\n',
        ),
        Case(
            # nanoGPT: a script's start-up load and its save inside the training loop
            "import os\n\nimport torch\n\nfrom model import GPT, GPTConfig\n\nout_dir = 'out'\n"
            "init_from = 'resume'\nif init_from == 'resume':\n"
            "    ckpt_path = os.path.join(out_dir, 'ckpt.pt')\n"
            "    checkpoint = torch.load(ckpt_path, map_location='cpu')\n"
            "    model = GPT(GPTConfig(**checkpoint['model_args']))\n"
            "    model.load_state_dict(checkpoint['model'])\n    iter_num = checkpoint['iter_num']\nelse:\n"
            '    model = GPT(GPTConfig())\n    iter_num = 0\n'
            'optimizer = torch.optim.AdamW(model.parameters())\nwhile iter_num < 5000:\n'
            '    loss = model.step_loss()\n    loss.backward()\n    optimizer.step()\n'
            '    if iter_num % 250 == 0 and iter_num > 0:\n'
            "        checkpoint = {'model': model.state_dict(), 'optimizer': optimizer.state_dict(), 'iter_num': iter_num}\n"
            "        torch.save(checkpoint, os.path.join(out_dir, 'ckpt.pt'))\n    iter_num += 1\n",
            'from dftracer.python import ai\nimport os\n\nimport torch\n\nfrom model import GPT, GPTConfig\n\n'
            "out_dir = 'out'\ninit_from = 'resume'\nif init_from == 'resume':\n"
            "    ckpt_path = os.path.join(out_dir, 'ckpt.pt')\n    with ai.checkpoint.io.read:\n"
            "        checkpoint = torch.load(ckpt_path, map_location='cpu')\n"
            '        ai.checkpoint.io.read.update(image_size=sum(t.element_size() * t.nelement() for t in torch.utils._pytree.tree_flatten(checkpoint)[0] if torch.is_tensor(t)))\n'
            "    model = GPT(GPTConfig(**checkpoint['model_args']))\n"
            "    model.load_state_dict(checkpoint['model'])\n    iter_num = checkpoint['iter_num']\nelse:\n"
            '    model = GPT(GPTConfig())\n    iter_num = 0\n'
            'optimizer = torch.optim.AdamW(model.parameters())\nwhile iter_num < 5000:\n'
            '    loss = model.step_loss()\n    loss.backward()\n    optimizer.step()\n'
            '    if iter_num % 250 == 0 and iter_num > 0:\n'
            "        checkpoint = {'model': model.state_dict(), 'optimizer': optimizer.state_dict(), 'iter_num': iter_num}\n"
            '        with ai.checkpoint.io.write:\n'
            "            torch.save(checkpoint, os.path.join(out_dir, 'ckpt.pt'))\n"
            '            ai.checkpoint.io.write.update(image_size=sum(t.element_size() * t.nelement() for t in torch.utils._pytree.tree_flatten(checkpoint)[0] if torch.is_tensor(t)))\n'
            '    iter_num += 1\n',
        ),
        Case(
            # DLIO: the write inside `with open(...)`
            'import os\nfrom abc import ABC, abstractmethod\n\nimport torch\n\n\n'
            'class BaseCheckpointing(ABC):\n    def __init__(self, ext):\n        self.ext = ext\n'
            '        self.model_state = {"layer": torch.zeros(1024, dtype=torch.int8)}\n\n'
            '    def get_name(self, suffix):\n'
            '        return os.path.join("checkpoints", f"{suffix}.{self.ext}")\n\n    @abstractmethod\n'
            '    def save_state(self, suffix, state):\n        pass\n\n    @abstractmethod\n'
            '    def load_state(self, suffix, state):\n        pass\n\n    def checkpoint(self, epoch, step):\n'
            '        self.save_state(suffix=f"model-{epoch}-{step}", state=self.model_state)\n\n'
            '    def restart(self, epoch, step):\n'
            '        self.load_state(suffix=f"model-{epoch}-{step}", state=self.model_state)\n\n\n'
            'class PyTorchCheckpointing(BaseCheckpointing):\n    def __init__(self):\n'
            '        super().__init__("pt")\n\n    def save_state(self, suffix, state):\n'
            '        name = self.get_name(suffix)\n        with open(name, "wb") as f:\n'
            '            torch.save(state, f)\n\n    def load_state(self, suffix, state):\n'
            '        name = self.get_name(suffix)\n        state = torch.load(name)\n'
            '        assert len(state.keys()) > 0\n',
            'from dftracer.python import ai\nimport os\nfrom abc import ABC, abstractmethod\n\nimport torch\n\n'
            '\nclass BaseCheckpointing(ABC):\n    def __init__(self, ext):\n        self.ext = ext\n'
            '        self.model_state = {"layer": torch.zeros(1024, dtype=torch.int8)}\n\n'
            '    def get_name(self, suffix):\n'
            '        return os.path.join("checkpoints", f"{suffix}.{self.ext}")\n\n    @abstractmethod\n'
            '    def save_state(self, suffix, state):\n        pass\n\n    @abstractmethod\n'
            '    def load_state(self, suffix, state):\n        pass\n\n    def checkpoint(self, epoch, step):\n'
            '        self.save_state(suffix=f"model-{epoch}-{step}", state=self.model_state)\n\n'
            '    def restart(self, epoch, step):\n'
            '        self.load_state(suffix=f"model-{epoch}-{step}", state=self.model_state)\n\n\n'
            'class PyTorchCheckpointing(BaseCheckpointing):\n    def __init__(self):\n'
            '        super().__init__("pt")\n\n    def save_state(self, suffix, state):\n'
            '        name = self.get_name(suffix)\n        with open(name, "wb") as f:\n'
            '            with ai.checkpoint.io.write:\n                torch.save(state, f)\n'
            '                ai.checkpoint.io.write.update(image_size=sum(t.element_size() * t.nelement() for t in torch.utils._pytree.tree_flatten(state)[0] if torch.is_tensor(t)))\n'
            '\n    def load_state(self, suffix, state):\n        name = self.get_name(suffix)\n'
            '        with ai.checkpoint.io.read:\n            state = torch.load(name)\n'
            '            ai.checkpoint.io.read.update(image_size=sum(t.element_size() * t.nelement() for t in torch.utils._pytree.tree_flatten(state)[0] if torch.is_tensor(t)))\n'
            '        assert len(state.keys()) > 0\n',
        ),
        Case(
            # safetensors: a flat dict of tensors
            'from safetensors.torch import load_file, save_file\n\n\ndef export(model, path):\n'
            '    tensors = {k: v.contiguous() for k, v in model.state_dict().items()}\n'
            '    save_file(tensors, path)\n\n\ndef restore(model, path):\n    tensors = load_file(path)\n'
            '    model.load_state_dict(tensors)\n',
            'from dftracer.python import ai\nfrom safetensors.torch import load_file, save_file\n\n\n'
            'def export(model, path):\n'
            '    tensors = {k: v.contiguous() for k, v in model.state_dict().items()}\n'
            '    with ai.checkpoint.io.write:\n        save_file(tensors, path)\n'
            '        ai.checkpoint.io.write.update(image_size=sum(getattr(t, "nbytes", 0) for t in tensors.values()))\n'
            '\n\ndef restore(model, path):\n    with ai.checkpoint.io.read:\n'
            '        tensors = load_file(path)\n'
            '        ai.checkpoint.io.read.update(image_size=sum(getattr(t, "nbytes", 0) for t in tensors.values()))\n'
            '    model.load_state_dict(tensors)\n',
        ),
        Case(
            # state_dict() handed to torch.save: measured from the model and the optimizer, not a second state_dict()
            'import torch\n\n\ndef save_weights(model, optimizer, path):\n'
            '    torch.save(model.state_dict(), path + ".model")\n'
            '    torch.save(optimizer.state_dict(), path + ".optim")\n',
            'from dftracer.python import ai\nimport torch\n\n\ndef save_weights(model, optimizer, path):\n'
            '    with ai.checkpoint.io.write:\n        torch.save(model.state_dict(), path + ".model")\n'
            '        ai.checkpoint.io.write.update(image_size=sum(t.element_size() * t.nelement() for t in [*model.parameters(), *model.buffers()]))\n'
            '    with ai.checkpoint.io.write:\n        torch.save(optimizer.state_dict(), path + ".optim")\n'
            '        ai.checkpoint.io.write.update(image_size=sum(t.element_size() * t.nelement() for t in torch.utils._pytree.tree_flatten(list(optimizer.state.values()))[0] if torch.is_tensor(t)))\n',
        ),
        Case(
            # the reads and writes of helpers folded into their callers' checkpoint regions: a returned
            # load is named inside its region and returned after it
            'import io\n\nimport torch\n\n\ndef load_state(path):\n    with open(path, "rb") as f:\n'
            '        data = f.read()\n    return torch.load(io.BytesIO(data))\n\n\nclass Trainer:\n'
            '    def __init__(self, model, opt, resume):\n        self.model, self.opt = model, opt\n'
            '        if resume:\n            self.model.load_state_dict(load_state(resume))\n'
            '            self.opt.load_state_dict(load_state(resume + ".opt"))\n\n    def save(self, path):\n'
            '        def save_one(obj, name):\n            torch.save(obj.state_dict(), path + name)\n\n'
            '        save_one(self.model, ".model")\n        if torch.distributed.get_rank() == 0:\n'
            '            save_one(self.opt, ".opt")\n',
            'import dftpass.runtime as _dft_runtime\nfrom dftracer.python import ai\nimport io\n\n'
            'import torch\n\n\ndef load_state(path):\n    with open(path, "rb") as f:\n'
            '        data = f.read()\n    with ai.checkpoint.io.read:\n'
            '        _dft_read = torch.load(io.BytesIO(data))\n'
            '        ai.checkpoint.io.read.update(image_size=sum(t.element_size() * t.nelement() for t in torch.utils._pytree.tree_flatten(_dft_read)[0] if torch.is_tensor(t)))\n'
            '    return _dft_read\n\n\nclass Trainer:\n    def __init__(self, model, opt, resume):\n'
            '        self.model, self.opt = model, opt\n        if resume:\n'
            '            self.model.load_state_dict(load_state(resume))\n'
            '            self.opt.load_state_dict(load_state(resume + ".opt"))\n\n    def save(self, path):\n'
            '        def save_one(obj, name):\n            with ai.checkpoint.io.write:\n'
            '                torch.save(obj.state_dict(), path + name)\n'
            '                ai.checkpoint.io.write.update(image_size=_dft_runtime.nbytes(obj))\n\n'
            '        save_one(self.model, ".model")\n        if torch.distributed.get_rank() == 0:\n'
            '            save_one(self.opt, ".opt")\n',
        ),
        Case(
            # the hook's save_pretrained is the checkpoint's write; what it saves is not known to be a
            # torch module (Accelerate hands the hook its models), so no size is written rather than -1
            'import torch\nfrom accelerate import Accelerator\n\n\ndef main(model, loader, opt):\n'
            '    accelerator = Accelerator()\n\n    def save_hook(models, weights, output_dir):\n'
            '        for m in models:\n            m.save_pretrained(output_dir)\n            weights.pop()\n\n'
            '    accelerator.register_save_state_pre_hook(save_hook)\n'
            '    for step, batch in enumerate(loader):\n        model(batch).backward()\n        opt.step()\n'
            '        if step % 100 == 0:\n            accelerator.save_state(f"ckpt-{step}")\n',
            'from dftracer.python import ai\nimport torch\nfrom accelerate import Accelerator\n\n\n'
            'def main(model, loader, opt):\n    accelerator = Accelerator()\n\n'
            '    def save_hook(models, weights, output_dir):\n        for m in models:\n'
            '            with ai.checkpoint.io.write:\n                m.save_pretrained(output_dir)\n'
            '            weights.pop()\n\n    accelerator.register_save_state_pre_hook(save_hook)\n'
            '    for step, batch in enumerate(loader):\n        model(batch).backward()\n        opt.step()\n'
            '        if step % 100 == 0:\n            accelerator.save_state(f"ckpt-{step}")\n',
        ),
    ]

    def run(self, ctx) -> None:
        graph = ctx.analysis("callgraph")
        plan: CheckpointPlan = ctx.analysis("checkpoints")
        for (function_id, index), node in sorted(plan.covered.items()):
            op = next(o for o in plan.ops[function_id] if o.index == index)
            if op.measure is None:
                continue
            fs, fn = graph.functions[function_id]
            call = fn.calls[index]
            io = IO_NODES[op.kind]
            if any(is_node(fs, w, io) for w in call.withs):
                continue
            why_not = unwrappable(fs, fn, call)
            # ``return th.load(...)`` (a load helper): named inside the region, returned after it
            returned = op.kind == "load" and call.stmt_kind == "return" and call.callee + "()" in fn.returns
            if returned:
                op = op._replace(obj=LOADED_NAME)
            if why_not is None and op.kind == "load" and op.obj is None:
                why_not = "what it reads is not bound to a name (the statement also uses it)"
            if why_not is None and call.stmt_kind not in ("expr", "assign") and not returned:
                why_not = "it is part of a larger statement"
            if why_not:
                ctx.report(Finding(self.id, f"{op.api}() gets no {io} region: {why_not}", fs.relpath, call.line,
                                   severity=Severity.INFO))
                continue
            names = ctx.names(fs.relpath)
            size, unmeasured = self._size(graph, names, function_id, call, op)
            if unmeasured:
                ctx.report(Finding(self.id, f"image_size of {op.api}() is not measured ({unmeasured}): bind the "
                                   "state to a name first (`state = {...}; torch.save(state, f)`)", fs.relpath,
                                   call.line, severity=Severity.INFO))
            why = f"{'writes' if op.kind == 'save' else 'reads'} the checkpoint ({op.api}) inside {node}"
            tail = (names.node_update(io, image_size=size),) if size is not None else ()
            ctx.add_edit(fs.relpath, WrapStmt(self.id, call.line, why, call.stmt, names.node(io),
                                              tail=tail, bind=LOADED_NAME if returned and tail else ""))

    @staticmethod
    def _size(graph, names, function_id: str, call, op) -> tuple[str | None, str | None]:
        """The ``image_size`` expression (None: no size is written), and why it is absent
        (None when it measures). Inline where the type is known; ``dftpass.runtime.nbytes``
        where it is not (a ``state_dict()`` owner that is no known model or optimizer)."""
        fs = graph.file_of(function_id)
        obj = op.obj or ""
        if op.measure == "tensors":
            if _plain(obj):
                return names.image_size(obj, "tensors"), None
            return None, "the object written is an expression"
        torch = torch_name(fs, call.callee)
        if torch is None:
            return None, "the file has no name for torch"
        fn = graph.fn(function_id)
        if op.measure == "module":  # save_pretrained / from_pretrained: the module's tensors
            if _plain(obj) and model_classes(graph, function_id, obj):
                return names.image_size(obj, "module", torch=torch), None
            # a library's model or pipeline (diffusers' EMAModel is no torch module): no size
            return None, f"{obj or 'the model'} is not known to be a torch module"
        owner = obj[:-len(".state_dict()")] if obj.endswith(".state_dict()") else ""
        if _plain(owner):
            # ``torch.save(model.state_dict(), f)``: the model's parameters and buffers, the
            # optimizer's state (state_dict() is not called twice: hooks, an FSDP gather)
            if is_optimizer(graph, fs, fn, owner):
                return names.image_size(owner, "optimizer", torch=torch), None
            if model_classes(graph, function_id, owner) or MODEL_NAME.search(owner.rsplit(".", 1)[-1]):
                return names.image_size(owner, "module", torch=torch), None
            return names.image_size(owner, "object"), None  # a module or an optimizer: known only then
        if not _plain(obj):
            return None, "the object written is an expression"
        if op.kind == "save" and (model_classes(graph, function_id, obj) or MODEL_NAME.search(obj.rsplit(".", 1)[-1])):
            return names.image_size(obj, "module", torch=torch), None  # a whole model
        return names.image_size(obj, "state", torch=torch), None


#: the name a returned checkpoint load is bound to inside its region (``strip`` gives the
#: ``return`` back)
LOADED_NAME = "_dft_read"


def _plain(text: str) -> bool:
    """A name or an attribute chain (``state``, ``self.state``): reading it runs nothing."""
    return bool(text) and all(part.isidentifier() for part in text.split("."))