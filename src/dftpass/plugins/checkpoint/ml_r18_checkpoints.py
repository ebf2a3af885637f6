"""ML-R18: ``ai.checkpoint.capture`` / ``.restart`` around what saves / loads model state."""

from __future__ import annotations

from dftpass.api import (
    Case, CheckpointPlan, Decorate, Finding, function_region, has_region, InsertAfter, InsertBefore, nesting_rank,
    Pass, PassKind, Severity,
)



class CheckpointRegions(Pass):
    """Time checkpoints: ``ai.checkpoint.capture`` where model state is saved, ``.restart``
    where it is loaded, ``@ai.checkpoint.init`` on a checkpointing class's constructor.

    What it does:
        Finds checkpoints by what the code does, not by names: ``torch.save`` of model state
        (a ``state_dict()``, a dict built from them, a model, the state a function is handed),
        ``torch.load`` of what then goes to ``load_state_dict`` (or is read by a class that also
        saves: DLIO's ``load_state``), ``torch.distributed.checkpoint``, safetensors
        ``save_file``/``load_file``, ``save_pretrained`` (and ``from_pretrained`` of a path in a
        function that only loads), orbax ``CheckpointManager``/``*Checkpointer`` ``save`` and
        ``restore``, ``tf.train.Checkpoint(...)`` ``save``/``write``/``restore``/``read``,
        ``tf.train.CheckpointManager.save``, Keras ``model.save``/``save_weights``/
        ``load_weights``/``keras.models.load_model``, Lightning ``trainer.save_checkpoint``,
        DeepSpeed ``engine.save_checkpoint``/``load_checkpoint`` and Accelerate
        ``accelerator.save_state``/``load_state``.

        * A function whose job is the checkpoint gets ``@ai.checkpoint.capture`` or
          ``@ai.checkpoint.restart``: it saves, or loads, itself, on every path (not under an
          ``if``/``try``; an ``if`` that lets one rank write, ``if dist.get_rank() == 0:``,
          still counts: the other ranks wait for that write), in at most 30 statements; it builds no model, optimizer or loader and
          does not train or evaluate; it is not the program's entry. Only the innermost: a
          function that calls another such function (or one already annotated) is not
          decorated, and its own saves get statement regions instead, so the node never nests.
        * Any other save or load (a training loop, ``main``, ``setup()``, a script's top level)
          gets a statement region, ``ai.checkpoint.capture.start()`` ... ``.stop()``, in its
          block: from the statement that builds the saved object (nanoGPT's ``checkpoint =
          {...}``) to the save; from the load to the last statement that restores from what it
          read (``iter_num = checkpoint["iter_num"]``, or ``model.load_state_dict(sd)`` of a
          name taken from it; a loop never extends it). Saves next to each other share one
          region. When both branches of an ``if``/``else`` load and the restoring follows it
          (pytorch/examples' imagenet), the region goes around the ``if``/``else`` too.
        * A helper that only writes what it is handed, forwarding ``*args`` or on one rank
          (detr's ``save_on_master(*args, **kwargs)``: ``if is_main_process(): torch.save(*args,
          **kwargs)``), is its callers' checkpoint: each call that hands it state gets the
          capture, and its ``torch.save`` is that capture's ``checkpoint.io.write`` (ML-R26).
        * A checkpointing class (one method saves, one loads, none trains: DLIO's
          ``save_state``/``load_state``) gets ``@ai.checkpoint.init`` on its ``__init__`` (event
          ``checkpoint.init``). An abstract base's constructor that only the subclasses'
          constructors run leaves the region to them (each concrete class's construction,
          whole: where DLIO's authors put it); of other constructors that run one another
          (``super().__init__()``), the innermost: the node is not re-entrant.

        ``torch.save`` of something that is not state (predictions an evaluation function
        saves, a tensor computed in the function) is left alone, and so is a
        ``torch.load`` whose result never reaches ``load_state_dict`` (data), any ``torch.load``
        in a data set, and ``from_pretrained`` of a hub name.

    Why:
        Checkpoints stall training: every rank waits while state is copied and written. With
        their own category they show up next to compute and data loading, and
        ``dftpass analyze`` can tell a slow file system from a slow model.

    Example:
        ``def save_checkpoint(path, model, optimizer, epoch): torch.save({...}, path)`` gets
        ``@ai.checkpoint.capture``; in a training loop, ``if epoch % 10 == 0:
        torch.save(model.state_dict(), p)`` becomes ``ai.checkpoint.capture.start()``,
        ``torch.save(...)``, ``ai.checkpoint.capture.stop()`` inside the ``if``.

    Fix safety:
        Safe. The decorator keeps the signature (generators and ``async`` functions get a
        region inside the body). A statement region is a start/stop pair, not a ``with``, so
        that ML-R26's I/O phase (a ``with`` on the save itself) nests inside it: if the save
        raises, the region's event is lost (the node stays open until its next start). A
        region that would end at a ``return``, cross another, or contain a call of a function
        that has the same region is not made (a note says so). Functions and blocks that
        already have the region are left alone.

    Options:
        None.
    """

    id = "ML-R18"
    title = "Checkpoint regions"
    kind = PassKind.TRANSFORM
    requires = ("callgraph", "checkpoints")
    tags = ("checkpoint",)

    VALID = [
        # predictions an evaluation function saves are not state
        "import torch\n\n\n@torch.no_grad()\ndef predict(model, loader):\n    model.eval()\n"
        "    preds = torch.cat([model(x).argmax(1) for x, _ in loader])\n"
        "    torch.save(preds, 'preds.pt')\n    return preds\n",
        # a data set reads its samples with torch.load: data, not a restart
        "import torch\nfrom torch.utils.data import Dataset\n\n\nclass Shards(Dataset):\n"
        "    def __init__(self, files):\n        self.files = files\n\n    def __len__(self):\n"
        "        return len(self.files)\n\n    def __getitem__(self, i):\n        return torch.load(self.files[i])\n",
        # DQN's target network copies weights in memory: no checkpoint
        "import torch\n\n\ndef sync(policy_net, target_net, step):\n    if step % 1000 == 0:\n"
        "        target_net.load_state_dict(policy_net.state_dict())\n",
        # already annotated (under another name for ai)
        "import torch\nfrom dftracer.python import ai as dft_ai\n\n\n@dft_ai.checkpoint.capture\n"
        "def save(model, path):\n    torch.save(model.state_dict(), path)\n",
        # a hub model id: building the model, not reading a checkpoint
        "from transformers import AutoModelForCausalLM\n\n\ndef build():\n"
        "    return AutoModelForCausalLM.from_pretrained('gpt2')\n",
    ]
    INVALID = [
        Case(
            # issue 39: a rank-guarded helper that saves what it is handed (detr's utils.save_on_master):
            # the capture is at the call that hands it state; the write inside is that capture's I/O (ML-R26)
            'import torch\nimport utils\n\n\ndef main(model, opt, loader, epochs):\n'
            '    for epoch in range(epochs):\n        for x in loader:\n'
            '            model(x).sum().backward()\n            opt.step()\n'
            "        utils.save_on_master({'model': model.state_dict(), 'epoch': epoch}, 'checkpoint.pth')\n",
            'from dftracer.python import ai\nimport torch\nimport utils\n\n\n'
            'def main(model, opt, loader, epochs):\n    for epoch in range(epochs):\n'
            '        for x in loader:\n            model(x).sum().backward()\n'
            '            opt.step()\n        ai.checkpoint.capture.start()\n'
            "        utils.save_on_master({'model': model.state_dict(), 'epoch': epoch}, 'checkpoint.pth')\n"
            '        ai.checkpoint.capture.stop()\n',
            files={'utils.py': 'import torch\nimport torch.distributed as dist\n\n\ndef is_main_process():\n    return not dist.is_initialized() or dist.get_rank() == 0\n\n\ndef save_on_master(*args, **kwargs):\n    if is_main_process():\n        torch.save(*args, **kwargs)\n'},
        ),
        # a script that saves the whole model when it improves, and loads it back at the end
        # (word_language_model): the load binds the model it saved, a restart
        Case("import torch\n\nmodel = torch.nn.Linear(4, 1)\nbest = None\nfor epoch in range(3):\n"
             "    loss = model(torch.randn(8, 4)).sum()\n    loss.backward()\n"
             "    if best is None or loss.item() < best:\n        best = loss.item()\n"
             '        with open("model.pt", "wb") as f:\n            torch.save(model, f)\n'
             'with open("model.pt", "rb") as f:\n    model = torch.load(f, weights_only=False)\n'
             "print(model(torch.randn(1, 4)))\n",
             "from dftracer.python import ai\nimport torch\n\nmodel = torch.nn.Linear(4, 1)\nbest = None\n"
             "for epoch in range(3):\n    loss = model(torch.randn(8, 4)).sum()\n    loss.backward()\n"
             "    if best is None or loss.item() < best:\n        best = loss.item()\n"
             '        with open("model.pt", "wb") as f:\n            ai.checkpoint.capture.start()\n'
             "            torch.save(model, f)\n            ai.checkpoint.capture.stop()\n"
             'with open("model.pt", "rb") as f:\n    ai.checkpoint.restart.start()\n'
             "    model = torch.load(f, weights_only=False)\n    ai.checkpoint.restart.stop()\n"
             "print(model(torch.randn(1, 4)))\n"),
        Case(
            # a base that is built itself keeps the region; its subclass's constructor runs it
            # (the node is not re-entrant: one region per construction)
            'import torch\n\n\nclass Saver:\n    def __init__(self, path):\n        self.path = path\n\n'
            '    def save(self, state):\n        torch.save(state, self.path)\n\n'
            '    def load(self, model):\n        model.load_state_dict(torch.load(self.path))\n\n\n'
            'class BestSaver(Saver):\n    def __init__(self, path):\n        super().__init__(path)\n'
            '        self.best = None\n',
            'from dftracer.python import ai\nimport torch\n\n\nclass Saver:\n    @ai.checkpoint.init\n'
            '    def __init__(self, path):\n        self.path = path\n\n    @ai.checkpoint.capture\n'
            '    def save(self, state):\n        torch.save(state, self.path)\n\n    @ai.checkpoint.restart\n'
            '    def load(self, model):\n        model.load_state_dict(torch.load(self.path))\n\n\n'
            'class BestSaver(Saver):\n    def __init__(self, path):\n        super().__init__(path)\n'
            '        self.best = None\n',
        ),
        Case(
            # the bundled app's shape: functions that only save / only load
            "import os\n\nimport torch\n\n\ndef save_checkpoint(path, model, optimizer, epoch):\n"
            "    state = {\"model\": model.state_dict(), \"optimizer\": optimizer.state_dict(), \"epoch\": epoch}\n"
            "    tmp = path + \".tmp\"\n    torch.save(state, tmp)\n    os.replace(tmp, path)\n\n\n"
            "def load_checkpoint(path, model, optimizer):\n    state = torch.load(path, weights_only=True)\n"
            "    model.load_state_dict(state[\"model\"])\n    optimizer.load_state_dict(state[\"optimizer\"])\n"
            "    return state[\"epoch\"]\n",
            "from dftracer.python import ai\nimport os\n\nimport torch\n\n\n@ai.checkpoint.capture\n"
            "def save_checkpoint(path, model, optimizer, epoch):\n"
            "    state = {\"model\": model.state_dict(), \"optimizer\": optimizer.state_dict(), \"epoch\": epoch}\n"
            "    tmp = path + \".tmp\"\n    torch.save(state, tmp)\n    os.replace(tmp, path)\n\n\n"
            "@ai.checkpoint.restart\n"
            "def load_checkpoint(path, model, optimizer):\n    state = torch.load(path, weights_only=True)\n"
            "    model.load_state_dict(state[\"model\"])\n    optimizer.load_state_dict(state[\"optimizer\"])\n"
            "    return state[\"epoch\"]\n",
        ),
        Case(
            # nanoGPT: a script; resume at start-up, save inside the training loop
            "import os\n\nimport torch\n\nfrom model import GPT, GPTConfig\n\nout_dir = 'out'\n"
            "init_from = 'resume'\nmodel_args = dict(n_layer=4)\nif init_from == 'scratch':\n"
            "    model = GPT(GPTConfig(**model_args))\nelif init_from == 'resume':\n"
            "    print(f\"Resuming training from {out_dir}\")\n    ckpt_path = os.path.join(out_dir, 'ckpt.pt')\n"
            "    checkpoint = torch.load(ckpt_path, map_location='cpu')\n"
            "    model = GPT(GPTConfig(**checkpoint['model_args']))\n    state_dict = checkpoint['model']\n"
            "    model.load_state_dict(state_dict)\n    iter_num = checkpoint['iter_num']\n"
            "optimizer = torch.optim.AdamW(model.parameters())\niter_num = 0\nwhile True:\n"
            "    loss = model.step_loss()\n    loss.backward()\n    optimizer.step()\n"
            "    if iter_num % 250 == 0:\n        print(f\"step {iter_num}: loss {loss.item():.4f}\")\n"
            "        if iter_num > 0:\n            checkpoint = {\n                'model': model.state_dict(),\n"
            "                'optimizer': optimizer.state_dict(),\n                'iter_num': iter_num,\n"
            "            }\n            print(f\"saving checkpoint to {out_dir}\")\n"
            "            torch.save(checkpoint, os.path.join(out_dir, 'ckpt.pt'))\n    iter_num += 1\n"
            "    if iter_num > 5000:\n        break\n",
            "from dftracer.python import ai\nimport os\n\nimport torch\n\nfrom model import GPT, GPTConfig\n\n"
            "out_dir = 'out'\n"
            "init_from = 'resume'\nmodel_args = dict(n_layer=4)\nif init_from == 'scratch':\n"
            "    model = GPT(GPTConfig(**model_args))\nelif init_from == 'resume':\n"
            "    print(f\"Resuming training from {out_dir}\")\n    ckpt_path = os.path.join(out_dir, 'ckpt.pt')\n"
            "    ai.checkpoint.restart.start()\n"
            "    checkpoint = torch.load(ckpt_path, map_location='cpu')\n"
            "    model = GPT(GPTConfig(**checkpoint['model_args']))\n    state_dict = checkpoint['model']\n"
            "    model.load_state_dict(state_dict)\n    iter_num = checkpoint['iter_num']\n"
            "    ai.checkpoint.restart.stop()\n"
            "optimizer = torch.optim.AdamW(model.parameters())\niter_num = 0\nwhile True:\n"
            "    loss = model.step_loss()\n    loss.backward()\n    optimizer.step()\n"
            "    if iter_num % 250 == 0:\n        print(f\"step {iter_num}: loss {loss.item():.4f}\")\n"
            "        if iter_num > 0:\n            ai.checkpoint.capture.start()\n"
            "            checkpoint = {\n                'model': model.state_dict(),\n"
            "                'optimizer': optimizer.state_dict(),\n                'iter_num': iter_num,\n"
            "            }\n            print(f\"saving checkpoint to {out_dir}\")\n"
            "            torch.save(checkpoint, os.path.join(out_dir, 'ckpt.pt'))\n"
            "            ai.checkpoint.capture.stop()\n    iter_num += 1\n"
            "    if iter_num > 5000:\n        break\n",
        ),
        Case(
            # DLIO's checkpointing classes: init on the subclass's constructor (the abstract base's runs inside it)
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
            '\nclass BaseCheckpointing(ABC):\n    def __init__(self, ext):\n'
            '        self.ext = ext\n'
            '        self.model_state = {"layer": torch.zeros(1024, dtype=torch.int8)}\n\n'
            '    def get_name(self, suffix):\n'
            '        return os.path.join("checkpoints", f"{suffix}.{self.ext}")\n\n    @abstractmethod\n'
            '    def save_state(self, suffix, state):\n        pass\n\n    @abstractmethod\n'
            '    def load_state(self, suffix, state):\n        pass\n\n    def checkpoint(self, epoch, step):\n'
            '        self.save_state(suffix=f"model-{epoch}-{step}", state=self.model_state)\n\n'
            '    def restart(self, epoch, step):\n'
            '        self.load_state(suffix=f"model-{epoch}-{step}", state=self.model_state)\n\n\n'
            'class PyTorchCheckpointing(BaseCheckpointing):\n    @ai.checkpoint.init\n    def __init__(self):\n'
            '        super().__init__("pt")\n\n    @ai.checkpoint.capture\n'
            '    def save_state(self, suffix, state):\n        name = self.get_name(suffix)\n'
            '        with open(name, "wb") as f:\n            torch.save(state, f)\n\n'
            '    @ai.checkpoint.restart\n    def load_state(self, suffix, state):\n'
            '        name = self.get_name(suffix)\n        state = torch.load(name)\n'
            '        assert len(state.keys()) > 0\n',
        ),
        Case(
            # TensorFlow: a manager's save inside the training loop, the restore at start-up
            'import tensorflow as tf\n\n\ndef train(model, dataset, epochs, ckpt_dir):\n'
            '    optimizer = tf.keras.optimizers.Adam(1e-3)\n'
            '    ckpt = tf.train.Checkpoint(step=tf.Variable(0), model=model, optimizer=optimizer)\n'
            '    manager = tf.train.CheckpointManager(ckpt, ckpt_dir, max_to_keep=3)\n'
            '    ckpt.restore(manager.latest_checkpoint)\n    for epoch in range(epochs):\n'
            '        for x, y in dataset:\n            with tf.GradientTape() as tape:\n'
            '                loss = tf.reduce_mean(tf.square(model(x) - y))\n'
            '            grads = tape.gradient(loss, model.trainable_variables)\n'
            '            optimizer.apply_gradients(zip(grads, model.trainable_variables))\n'
            '            ckpt.step.assign_add(1)\n            if int(ckpt.step) % 100 == 0:\n'
            '                save_path = manager.save()\n'
            '                print(f"Saved checkpoint for step {int(ckpt.step)}: {save_path}")\n'
            '    model.save_weights("final.weights.h5")\n',
            'from dftracer.python import ai\nimport tensorflow as tf\n\n\n'
            'def train(model, dataset, epochs, ckpt_dir):\n    optimizer = tf.keras.optimizers.Adam(1e-3)\n'
            '    ckpt = tf.train.Checkpoint(step=tf.Variable(0), model=model, optimizer=optimizer)\n'
            '    manager = tf.train.CheckpointManager(ckpt, ckpt_dir, max_to_keep=3)\n'
            '    ai.checkpoint.restart.start()\n    ckpt.restore(manager.latest_checkpoint)\n'
            '    ai.checkpoint.restart.stop()\n    for epoch in range(epochs):\n        for x, y in dataset:\n'
            '            with tf.GradientTape() as tape:\n'
            '                loss = tf.reduce_mean(tf.square(model(x) - y))\n'
            '            grads = tape.gradient(loss, model.trainable_variables)\n'
            '            optimizer.apply_gradients(zip(grads, model.trainable_variables))\n'
            '            ckpt.step.assign_add(1)\n            if int(ckpt.step) % 100 == 0:\n'
            '                ai.checkpoint.capture.start()\n                save_path = manager.save()\n'
            '                ai.checkpoint.capture.stop()\n'
            '                print(f"Saved checkpoint for step {int(ckpt.step)}: {save_path}")\n'
            '    ai.checkpoint.capture.start()\n    model.save_weights("final.weights.h5")\n'
            '    ai.checkpoint.capture.stop()\n',
        ),
        Case(
            # orbax: a small checkpointer class
            'import orbax.checkpoint as ocp\n\n\nclass Checkpointer:\n'
            '    def __init__(self, directory, max_to_keep=3):\n'
            '        options = ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, create=True)\n'
            '        self.manager = ocp.CheckpointManager(directory, options=options)\n\n'
            '    def save(self, step, state):\n'
            '        self.manager.save(step, args=ocp.args.StandardSave(state))\n'
            '        self.manager.wait_until_finished()\n\n    def restore(self, state):\n'
            '        step = self.manager.latest_step()\n        if step is None:\n            return state, 0\n'
            '        return self.manager.restore(step, args=ocp.args.StandardRestore(state)), step\n',
            'from dftracer.python import ai\nimport orbax.checkpoint as ocp\n\n\nclass Checkpointer:\n'
            '    @ai.checkpoint.init\n    def __init__(self, directory, max_to_keep=3):\n'
            '        options = ocp.CheckpointManagerOptions(max_to_keep=max_to_keep, create=True)\n'
            '        self.manager = ocp.CheckpointManager(directory, options=options)\n\n'
            '    @ai.checkpoint.capture\n    def save(self, step, state):\n'
            '        self.manager.save(step, args=ocp.args.StandardSave(state))\n'
            '        self.manager.wait_until_finished()\n\n    @ai.checkpoint.restart\n'
            '    def restore(self, state):\n        step = self.manager.latest_step()\n'
            '        if step is None:\n            return state, 0\n'
            '        return self.manager.restore(step, args=ocp.args.StandardRestore(state)), step\n',
        ),
        Case(
            # an asynchronous save in a loop: the region ends when the program waits for it
            'import orbax.checkpoint as ocp\nfrom flax import nnx\n\n\ndef train(model, epochs, path):\n'
            '    checkpointer = ocp.StandardCheckpointer()\n    for epoch in range(epochs):\n'
            '        if epoch % 2:\n            checkpointer.save(path / str(epoch), nnx.state(model))\n'
            '            checkpointer.wait_until_finished()\n',
            'from dftracer.python import ai\nimport orbax.checkpoint as ocp\nfrom flax import nnx\n\n\n'
            'def train(model, epochs, path):\n'
            '    checkpointer = ocp.StandardCheckpointer()\n    for epoch in range(epochs):\n'
            '        if epoch % 2:\n            ai.checkpoint.capture.start()\n'
            '            checkpointer.save(path / str(epoch), nnx.state(model))\n'
            '            checkpointer.wait_until_finished()\n            ai.checkpoint.capture.stop()\n',
        ),
        Case(
            # the innermost function that saves is decorated; its caller's own save gets a statement region
            'import torch\n\n\ndef save_model(model, path):\n    torch.save(model.state_dict(), path)\n\n\n'
            'def save_all(model, optimizer, path):\n    save_model(model, path + "/model.pt")\n'
            '    torch.save(optimizer.state_dict(), path + "/optim.pt")\n\n\n'
            'def train(model, optimizer, loader, epochs):\n    for epoch in range(epochs):\n'
            '        for x, y in loader:\n            optimizer.zero_grad()\n'
            '            model(x).loss(y).backward()\n            optimizer.step()\n'
            '        save_all(model, optimizer, f"ckpt/{epoch}")\n        if epoch == epochs - 1:\n'
            '            torch.save(model.state_dict(), "final.pt")\n'
            '            torch.save(optimizer.state_dict(), "final-optim.pt")\n',
            'from dftracer.python import ai\nimport torch\n\n\n@ai.checkpoint.capture\n'
            'def save_model(model, path):\n    torch.save(model.state_dict(), path)\n\n\n'
            'def save_all(model, optimizer, path):\n    save_model(model, path + "/model.pt")\n'
            '    ai.checkpoint.capture.start()\n    torch.save(optimizer.state_dict(), path + "/optim.pt")\n'
            '    ai.checkpoint.capture.stop()\n\n\ndef train(model, optimizer, loader, epochs):\n'
            '    for epoch in range(epochs):\n        for x, y in loader:\n            optimizer.zero_grad()\n'
            '            model(x).loss(y).backward()\n            optimizer.step()\n'
            '        save_all(model, optimizer, f"ckpt/{epoch}")\n        if epoch == epochs - 1:\n'
            '            ai.checkpoint.capture.start()\n'
            '            torch.save(model.state_dict(), "final.pt")\n'
            '            torch.save(optimizer.state_dict(), "final-optim.pt")\n'
            '            ai.checkpoint.capture.stop()\n',
        ),
        Case(
            # pytorch/examples' imagenet: both branches load; the region goes around the if/else and
            # the statements that restore from what was read
            'import os\n\nimport torch\n\n\ndef main_worker(gpu, args, model, optimizer, train_loader):\n'
            '    if args.resume:\n        if os.path.isfile(args.resume):\n'
            '            print("=> loading checkpoint \'{}\'".format(args.resume))\n'
            '            if args.gpu is None:\n                checkpoint = torch.load(args.resume)\n'
            '            else:\n'
            '                checkpoint = torch.load(args.resume, map_location=f"cuda:{args.gpu}")\n'
            '            args.start_epoch = checkpoint["epoch"]\n'
            '            model.load_state_dict(checkpoint["state_dict"])\n'
            '            optimizer.load_state_dict(checkpoint["optimizer"])\n        else:\n'
            '            print("=> no checkpoint found at \'{}\'".format(args.resume))\n'
            '    for epoch in range(args.start_epoch, args.epochs):\n'
            '        for images, target in train_loader:\n            loss = model(images).loss(target)\n'
            '            optimizer.zero_grad()\n            loss.backward()\n            optimizer.step()\n',
            'from dftracer.python import ai\nimport os\n\nimport torch\n\n\n'
            'def main_worker(gpu, args, model, optimizer, train_loader):\n    if args.resume:\n'
            '        if os.path.isfile(args.resume):\n'
            '            print("=> loading checkpoint \'{}\'".format(args.resume))\n'
            '            ai.checkpoint.restart.start()\n            if args.gpu is None:\n'
            '                checkpoint = torch.load(args.resume)\n            else:\n'
            '                checkpoint = torch.load(args.resume, map_location=f"cuda:{args.gpu}")\n'
            '            args.start_epoch = checkpoint["epoch"]\n'
            '            model.load_state_dict(checkpoint["state_dict"])\n'
            '            optimizer.load_state_dict(checkpoint["optimizer"])\n'
            '            ai.checkpoint.restart.stop()\n        else:\n'
            '            print("=> no checkpoint found at \'{}\'".format(args.resume))\n'
            '    for epoch in range(args.start_epoch, args.epochs):\n'
            '        for images, target in train_loader:\n            loss = model(images).loss(target)\n'
            '            optimizer.zero_grad()\n            loss.backward()\n            optimizer.step()\n',
        ),
        Case(
            # a load helper that returns what it read (improved-diffusion's dist_util.load_state_dict):
            # the restart is where its callers hand the state over; a function defined inside the one
            # that saves (save_one in save) is part of that checkpoint; the class saves and loads: init
            'import io\n\nimport torch\n\n\ndef load_state(path):\n    with open(path, "rb") as f:\n'
            '        data = f.read()\n    return torch.load(io.BytesIO(data))\n\n\nclass Trainer:\n'
            '    def __init__(self, model, opt, resume):\n        self.model, self.opt = model, opt\n'
            '        if resume:\n            self.model.load_state_dict(load_state(resume))\n'
            '            self.opt.load_state_dict(load_state(resume + ".opt"))\n\n    def save(self, path):\n'
            '        def save_one(obj, name):\n            torch.save(obj.state_dict(), path + name)\n\n'
            '        save_one(self.model, ".model")\n        if torch.distributed.get_rank() == 0:\n'
            '            save_one(self.opt, ".opt")\n',
            'from dftracer.python import ai\nimport io\n\nimport torch\n\n\ndef load_state(path):\n'
            '    with open(path, "rb") as f:\n        data = f.read()\n'
            '    return torch.load(io.BytesIO(data))\n\n\nclass Trainer:\n    @ai.checkpoint.init\n'
            '    def __init__(self, model, opt, resume):\n        self.model, self.opt = model, opt\n'
            '        if resume:\n            ai.checkpoint.restart.start()\n'
            '            self.model.load_state_dict(load_state(resume))\n'
            '            self.opt.load_state_dict(load_state(resume + ".opt"))\n'
            '            ai.checkpoint.restart.stop()\n\n    @ai.checkpoint.capture\n'
            '    def save(self, path):\n        def save_one(obj, name):\n'
            '            torch.save(obj.state_dict(), path + name)\n\n        save_one(self.model, ".model")\n'
            '        if torch.distributed.get_rank() == 0:\n            save_one(self.opt, ".opt")\n',
        ),
        Case(
            # a function a save runs as a hook (Accelerate's save_state pre-hook) is part of that
            # checkpoint: the capture goes around save_state, never on the hook (the node would nest)
            'import torch\nfrom accelerate import Accelerator\n\n\ndef main(model, loader, opt):\n'
            '    accelerator = Accelerator()\n\n    def save_hook(models, weights, output_dir):\n'
            '        for m in models:\n            m.save_pretrained(output_dir)\n            weights.pop()\n\n'
            '    accelerator.register_save_state_pre_hook(save_hook)\n'
            '    for step, batch in enumerate(loader):\n        model(batch).backward()\n        opt.step()\n'
            '        if step % 100 == 0:\n            accelerator.save_state(f"ckpt-{step}")\n',
            'from dftracer.python import ai\nimport torch\nfrom accelerate import Accelerator\n\n\n'
            'def main(model, loader, opt):\n    accelerator = Accelerator()\n\n'
            '    def save_hook(models, weights, output_dir):\n        for m in models:\n'
            '            m.save_pretrained(output_dir)\n            weights.pop()\n\n'
            '    accelerator.register_save_state_pre_hook(save_hook)\n'
            '    for step, batch in enumerate(loader):\n        model(batch).backward()\n        opt.step()\n'
            '        if step % 100 == 0:\n            ai.checkpoint.capture.start()\n'
            '            accelerator.save_state(f"ckpt-{step}")\n            ai.checkpoint.capture.stop()\n',
        ),
        Case(
            # the write under a rank-0 test is the job's checkpoint on every path: the others wait
            # for it at the barrier, inside the same capture (improved-diffusion's TrainLoop.save)
            'import torch\nimport torch.distributed as dist\n\n\nclass Loop:\n    def save(self, path):\n'
            '        if dist.get_rank() == 0:\n            torch.save(self.model.state_dict(), path)\n'
            '        dist.barrier()\n',
            'from dftracer.python import ai\nimport torch\nimport torch.distributed as dist\n\n\nclass Loop:\n'
            '    @ai.checkpoint.capture\n    def save(self, path):\n'
            '        if dist.get_rank() == 0:\n            torch.save(self.model.state_dict(), path)\n'
            '        dist.barrier()\n',
        ),
    ]

    def run(self, ctx) -> None:
        graph = ctx.analysis("callgraph")
        plan: CheckpointPlan = ctx.analysis("checkpoints")
        for function_id, (node, why) in sorted(plan.functions.items()):
            fs, fn = graph.functions[function_id]
            if has_region(fs, fn, node):
                continue
            ctx.add_edit(fs.relpath, function_region(ctx.names(fs.relpath), fn, node, self.id, why))
        for span in plan.spans:
            fs = graph.file_of(span.function)
            names = ctx.names(fs.relpath)
            ctx.add_edit(fs.relpath, InsertBefore(self.id, span.line, span.why, span.first, names.start(span.node)))
            ctx.add_edit(fs.relpath, InsertAfter(self.id, span.end_line, span.why, span.last, names.stop(span.node)))
        for init, why in sorted(plan.inits.items()):
            fs, fn = graph.functions[init]
            ctx.add_edit(fs.relpath, Decorate(self.id, fn.line, why, fn.stmt,
                                              ctx.names(fs.relpath).init_decorator("checkpoint"),
                                              rank=nesting_rank("checkpoint")))
        for function_id, line, message in plan.notes:
            ctx.report(Finding(self.id, message, graph.file_of(function_id).relpath, line, severity=Severity.INFO))
