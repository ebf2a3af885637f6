"""ML-R17: ``with ai.device.transfer:`` around the host-to-device moves of batches."""

from __future__ import annotations

from dftpass.api import (
    Case, Expect, Finding, has_region, is_model_call, is_node, LOSS_NAME, moves_to_device, Pass, PassKind, Severity,
    unwrappable, WrapStmt,
)


class DeviceTransfer(Pass):
    """Time the host-to-device copies of the batches with ``with ai.device.transfer:``.

    What it does:
        Each statement that moves a step's data to an accelerator is wrapped in
        ``with ai.device.transfer:``. Which statements, batch provenance says (the
        ``transfers`` analysis over ``batch_provenance``): the moves on the way from where the
        data is drawn or read to what the step consumes, wherever they are (two calls below
        the loop, in a producer or a generator, in a data set's ``__getitem__``), and not
        the moves of anything else (a recurrent state the model makes, timesteps drawn in
        the step). What the batch loop itself draws (its iterable, its ``next()``) is data,
        whoever produced it (a loader ``deepspeed.initialize`` hands back), and so is what a
        model's own data method moves (``model.parse_batch(batch)`` with ``to_gpu`` inside); a
        ``batch.to(device)`` statement of its own (a BatchEncoding moved in place) counts
        too. For a batch loop whose step provenance cannot walk, the moves in the loop,
        in the project functions its body calls (one level down, not the model) and in the
        batch producers count, as before: ``data, target = data.to(device), target.to(device)``,
        ``x = x.cuda(non_blocking=True)``, ``batch = {k: v.to(device) for k, v in
        batch.items()}``, ``x, y = x.pin_memory().to(device, non_blocking=True), ...``.

        A move is ``.cuda(...)``, or ``.to(...)`` whose device (first argument or
        ``device=``) is an accelerator: ``'cuda'``, ``'cuda:1'``, ``'mps'``, an index, a
        ``torch.device(...)``, ``x.device``, or a name that holds one (``device``,
        ``args.gpu``, ``local_rank``, a local assigned from ``torch.device``). Not moves:
        ``.to(torch.float16)``/``.to(dtype=...)``, ``.to('cpu')``, and ``.to(other)`` whose
        argument the code does not show to be a device. Models and losses are not batches
        (``model.to(device)``, ``criterion.cuda()``), and the start-up ``model.to(device)``
        is outside the batch loop anyway.

        Each statement gets its own region: the engine wraps one statement per ``with``, so
        the two lines of the imagenet example give two events per step (start/stop pairs
        around several lines would lose the region when a line raises). A statement that
        also calls the model, a loss or a project function is left alone with a note (the
        region would time them as transfer); so are statements the region cannot go around
        (see ML-R5). Statements already inside ``with ai.device.transfer:``, or in a function
        that carries that region, are skipped.

        Copies back to the host (``.cpu()``, ``.item()``, ``.tolist()``, ``.numpy()``) are not
        this region: they wait for the GPU's queued work, so their time is mostly compute,
        and they get no note.

    Why:
        Host-to-device copies of each batch are on the critical path of a step unless they
        overlap with compute; the ``device`` events show how long they take, next to the
        loader's ``fetch`` and the model's ``compute``.

        With ``non_blocking=True`` (from pinned memory) the copy is asynchronous on CUDA: the
        region times only its launch, and the copy's duration shows up in whatever next waits
        on the stream (usually the forward pass). A long ``transfer`` event with
        ``non_blocking=True`` means the memory was not pinned (the copy ran synchronously).

    Example:
        ``images = images.to(device, non_blocking=True)`` becomes
        ``with ai.device.transfer:`` / ``images = images.to(device, non_blocking=True)``.

    Fix safety:
        Safe: a ``with`` around one statement changes nothing the statement computes. Without
        a GPU ``.to(device)`` to the CPU is a no-op and the events are short. With
        ``non_blocking=True`` only the launch is timed (see Why).

    Options:
        None.
    """

    id = "ML-R17"
    title = "Device transfer"
    kind = PassKind.TRANSFORM
    requires = ("callgraph", "transfers")
    frameworks = ("pytorch",)
    tags = ("compute", "device")

    VALID = [
        # a dtype cast, copies inside the model call's statement, and reads back to the host
        Case(
            "import torch\n\n\ndef train(model, loader, optimizer, device):\n    model = model.to(device)\n"
            "    for x, y in loader:\n        x = x.to(torch.float16)\n"
            "        loss = model(x.to(device), y.to(device))\n        loss.backward()\n        optimizer.step()\n"
            "        print(loss.detach().cpu().item())\n",
            findings=(
                Expect("info", "x.to() not wrapped: the statement also calls model()", line=8),
            ),
        ),
        # already annotated
        "import torch\nfrom dftracer.python import ai\n\n\ndef train(model, loader, optimizer, device):\n"
        "    for x, y in loader:\n        with ai.device.transfer:\n            x, y = x.to(device), y.to(device)\n"
        "        loss = model(x, y)\n        loss.backward()\n        optimizer.step()\n",
        # a copy at start-up, outside the batch loop
        "import torch\n\n\ndef main(model, loader, optimizer, device):\n    model.to(device)\n"
        "    example = torch.randn(1, 3, 224, 224).to(device)\n    traced = torch.jit.trace(model, example)\n"
        "    for x, y in loader:\n        loss = traced(x).sum()\n        loss.backward()\n"
        "        optimizer.step()\n",
    ]
    INVALID = [
        Case(
            # issue 39: the loaders come from outside the project (provenance breaks at make_stream);
            # the step shows the batch loops, and the region still lands: the move of what the loop draws
            'import torch\nfrom streams import make_stream\n\n\nclass Net(torch.nn.Module):\n'
            '    def __init__(self):\n        super().__init__()\n'
            '        self.fc = torch.nn.Linear(4, 1)\n\n    def forward(self, x):\n'
            '        return self.fc(x)\n\n\ndef train_one_epoch(model, opt, batches, device):\n'
            '    for x, y in batches:\n        x = x.to(device)\n'
            '        loss = ((model(x) - y) ** 2).mean()\n        loss.backward()\n'
            '        opt.step()\n\n\n@torch.no_grad()\ndef validate(model, batches):\n'
            '    total = 0.0\n    for x, y in batches:\n'
            '        total += ((model(x) - y) ** 2).sum().item()\n    return total\n\n\n'
            'def main():\n    model = Net()\n'
            '    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n'
            '    for epoch in range(3):\n'
            "        train_one_epoch(model, opt, make_stream('train'), 'cuda')\n"
            "        validate(model, make_stream('val'))\n",
            'from dftracer.python import ai\nimport torch\nfrom streams import make_stream\n\n\n'
            'class Net(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n'
            '        self.fc = torch.nn.Linear(4, 1)\n\n    def forward(self, x):\n'
            '        return self.fc(x)\n\n\ndef train_one_epoch(model, opt, batches, device):\n'
            '    for x, y in batches:\n        with ai.device.transfer:\n'
            '            x = x.to(device)\n        loss = ((model(x) - y) ** 2).mean()\n'
            '        loss.backward()\n        opt.step()\n\n\n@torch.no_grad()\n'
            'def validate(model, batches):\n    total = 0.0\n    for x, y in batches:\n'
            '        total += ((model(x) - y) ** 2).sum().item()\n    return total\n\n\n'
            'def main():\n    model = Net()\n'
            '    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n'
            '    for epoch in range(3):\n'
            "        train_one_epoch(model, opt, make_stream('train'), 'cuda')\n"
            "        validate(model, make_stream('val'))\n",
        ),
        # pytorch/examples imagenet: two copies, a region each; the start-up `model.to(device)` and the
        # loss's `.to(device)` are not batches
        Case(
            "import torch\nimport torch.distributed as dist\n\n\n"
            "def train(train_loader, model, criterion, optimizer, epoch, device, args):\n    model.train()\n"
            "    for i, (images, target) in enumerate(train_loader):\n"
            "        # move data to the same device as model\n"
            "        images = images.to(device, non_blocking=True)\n"
            "        target = target.to(device, non_blocking=True)\n\n        output = model(images)\n"
            "        loss = criterion(output, target)\n        optimizer.zero_grad()\n        loss.backward()\n"
            "        optimizer.step()\n\n\ndef main_worker(gpu, args):\n"
            "    device = torch.device('cuda:{}'.format(gpu))\n    model = torch.nn.Linear(4, 2)\n"
            "    model.to(device)\n    criterion = torch.nn.CrossEntropyLoss().to(device)\n"
            "    optimizer = torch.optim.SGD(model.parameters(), 0.1)\n"
            "    loader = torch.utils.data.DataLoader([])\n    for epoch in range(args.epochs):\n"
            "        train(loader, model, criterion, optimizer, epoch, device, args)\n",
            "from dftracer.python import ai\nimport torch\nimport torch.distributed as dist\n\n\n"
            "def train(train_loader, model, criterion, optimizer, epoch, device, args):\n    model.train()\n"
            "    for i, (images, target) in enumerate(train_loader):\n"
            "        # move data to the same device as model\n        with ai.device.transfer:\n"
            "            images = images.to(device, non_blocking=True)\n        with ai.device.transfer:\n"
            "            target = target.to(device, non_blocking=True)\n\n        output = model(images)\n"
            "        loss = criterion(output, target)\n        optimizer.zero_grad()\n        loss.backward()\n"
            "        optimizer.step()\n\n\ndef main_worker(gpu, args):\n"
            "    device = torch.device('cuda:{}'.format(gpu))\n    model = torch.nn.Linear(4, 2)\n"
            "    model.to(device)\n    criterion = torch.nn.CrossEntropyLoss().to(device)\n"
            "    optimizer = torch.optim.SGD(model.parameters(), 0.1)\n"
            "    loader = torch.utils.data.DataLoader([])\n    for epoch in range(args.epochs):\n"
            "        train(loader, model, criterion, optimizer, epoch, device, args)\n",
        ),
        # nanoGPT: the batch producer get_batch() moves x and y from pinned memory
        Case(
            "import numpy as np\nimport torch\n\ndevice = 'cuda'\n"
            "device_type = 'cuda' if 'cuda' in device else 'cpu'\nblock_size, batch_size = 8, 4\n\n\n"
            "def get_batch(split):\n    data = np.memmap(f'{split}.bin', dtype=np.uint16, mode='r')\n"
            "    ix = torch.randint(len(data) - block_size, (batch_size,))\n"
            "    x = torch.stack([torch.from_numpy((data[i:i+block_size]).astype(np.int64)) for i in ix])\n"
            "    y = torch.stack([torch.from_numpy((data[i+1:i+1+block_size]).astype(np.int64)) for i in ix])\n"
            "    if device_type == 'cuda':\n"
            "        # pin arrays x,y, which allows us to move them to GPU asynchronously (non_blocking=True)\n"
            "        x, y = x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device,"
            " non_blocking=True)\n    else:\n        x, y = x.to(device), y.to(device)\n    return x, y\n\n\n"
            "def train(model, optimizer, max_iters):\n    X, Y = get_batch('train')\n"
            "    for iter_num in range(max_iters):\n        logits, loss = model(X, Y)\n"
            "        X, Y = get_batch('train')\n        loss.backward()\n        optimizer.step()\n"
            "        optimizer.zero_grad(set_to_none=True)\n",
            "from dftracer.python import ai\nimport numpy as np\nimport torch\n\ndevice = 'cuda'\n"
            "device_type = 'cuda' if 'cuda' in device else 'cpu'\nblock_size, batch_size = 8, 4\n\n\n"
            "def get_batch(split):\n    data = np.memmap(f'{split}.bin', dtype=np.uint16, mode='r')\n"
            "    ix = torch.randint(len(data) - block_size, (batch_size,))\n"
            "    x = torch.stack([torch.from_numpy((data[i:i+block_size]).astype(np.int64)) for i in ix])\n"
            "    y = torch.stack([torch.from_numpy((data[i+1:i+1+block_size]).astype(np.int64)) for i in ix])\n"
            "    if device_type == 'cuda':\n"
            "        # pin arrays x,y, which allows us to move them to GPU asynchronously (non_blocking=True)\n"
            "        with ai.device.transfer:\n"
            "            x, y = x.pin_memory().to(device, non_blocking=True), y.pin_memory().to(device,"
            " non_blocking=True)\n    else:\n        with ai.device.transfer:\n"
            "            x, y = x.to(device), y.to(device)\n    return x, y\n\n\n"
            "def train(model, optimizer, max_iters):\n    X, Y = get_batch('train')\n"
            "    for iter_num in range(max_iters):\n        logits, loss = model(X, Y)\n"
            "        X, Y = get_batch('train')\n        loss.backward()\n        optimizer.step()\n"
            "        optimizer.zero_grad(set_to_none=True)\n",
        ),
        # Hugging Face style: a dict of tensors; and a step function the batch loop calls (one level down),
        # where a copy in the model call's statement is left alone
        Case(
            "import torch\nfrom torch.utils.data import DataLoader\n\n\ndef evaluate(model, dataset, device):\n"
            "    model.eval()\n    loader = DataLoader(dataset, batch_size=8)\n    losses = []\n"
            "    for batch in loader:\n        batch = {k: v.to(device) for k, v in batch.items()}\n"
            "        with torch.no_grad():\n            outputs = model(**batch)\n"
            "        losses.append(outputs.loss.cpu())\n    return torch.stack(losses).mean().item()\n\n\n"
            "def train_step(model, batch, optimizer):\n    inputs, labels = batch\n"
            "    inputs = inputs.cuda(non_blocking=True).float()\n    loss = model(inputs, labels.cuda())\n"
            "    loss.backward()\n    optimizer.step()\n    return loss.item()\n\n\n"
            "def fit(model, loader, optimizer, epochs):\n    for epoch in range(epochs):\n"
            "        for batch in loader:\n            loss = train_step(model, batch, optimizer)\n",
            "from dftracer.python import ai\nimport torch\nfrom torch.utils.data import DataLoader\n\n\n"
            "def evaluate(model, dataset, device):\n    model.eval()\n"
            "    loader = DataLoader(dataset, batch_size=8)\n    losses = []\n    for batch in loader:\n"
            "        with ai.device.transfer:\n            batch = {k: v.to(device) for k, v in batch.items()}\n"
            "        with torch.no_grad():\n            outputs = model(**batch)\n"
            "        losses.append(outputs.loss.cpu())\n    return torch.stack(losses).mean().item()\n\n\n"
            "def train_step(model, batch, optimizer):\n    inputs, labels = batch\n    with ai.device.transfer:\n"
            "        inputs = inputs.cuda(non_blocking=True).float()\n    loss = model(inputs, labels.cuda())\n"
            "    loss.backward()\n    optimizer.step()\n    return loss.item()\n\n\n"
            "def fit(model, loader, optimizer, epochs):\n    for epoch in range(epochs):\n"
            "        for batch in loader:\n            loss = train_step(model, batch, optimizer)\n",
            findings=(
                Expect("info", "labels.cuda() not wrapped: the statement also calls model()", line=20),
            ),
        ),
        Case(
            # improved-diffusion's shape: the batch moves two calls below the loop, with a device
            # a project function gives; the recurrent state a model makes is not the batch
            "import torch\nfrom torch.utils.data import DataLoader\n\n\ndef dev():\n    return torch.device('cuda')\n\n\n"
            "class Loop:\n    def __init__(self, model, opt, data):\n        self.model, self.opt, self.data = model, opt, data\n\n"
            "    def forward_backward(self, batch):\n        hidden = self.model.init_hidden().cuda()\n"
            "        micro = batch[0:2].to(dev())\n        self.model(micro, hidden).sum().backward()\n\n"
            "    def run_step(self, batch):\n        self.forward_backward(batch)\n        self.opt.step()\n\n"
            "    def run(self):\n        it = iter(DataLoader(self.data, batch_size=4))\n        for step in range(10):\n"
            "            batch = next(it)\n            self.run_step(batch)\n",
            "from dftracer.python import ai\nimport torch\nfrom torch.utils.data import DataLoader\n\n\ndef dev():\n"
            "    return torch.device('cuda')\n\n\nclass Loop:\n    def __init__(self, model, opt, data):\n"
            "        self.model, self.opt, self.data = model, opt, data\n\n    def forward_backward(self, batch):\n"
            "        hidden = self.model.init_hidden().cuda()\n        with ai.device.transfer:\n"
            "            micro = batch[0:2].to(dev())\n        self.model(micro, hidden).sum().backward()\n\n"
            "    def run_step(self, batch):\n        self.forward_backward(batch)\n        self.opt.step()\n\n"
            "    def run(self):\n        it = iter(DataLoader(self.data, batch_size=4))\n        for step in range(10):\n"
            "            batch = next(it)\n            self.run_step(batch)\n",
        ),
    ]

    def run(self, ctx) -> None:
        graph = ctx.analysis("callgraph")
        for function_id, stmts in ctx.analysis("transfers").by_function.items():
            fs, fn = graph.functions[function_id]
            if has_region(fs, fn, "device.transfer"):
                continue
            for stmt, moves in stmts.items():
                call = moves[0]
                if any(is_node(fs, w, "device.transfer") for w in call.withs):
                    continue
                shown = f"{call.callee}()"
                everything = [i for i, c in enumerate(fn.calls) if c.stmt == stmt]
                other = self._other_work(graph, function_id, fn, everything, moves)
                why = f"{shown} not wrapped: the statement also calls {other}()" if other else None
                why = why or (f"{shown} not wrapped: {reason}" if (reason := unwrappable(fs, fn, call)) else None)
                if why:
                    ctx.report(Finding(self.id, why, fs.relpath, call.line, call.col, Severity.INFO))
                    continue
                blocking = "" if any(dict(c.keywords).get("non_blocking") == "True" for c in moves) else " (blocking)"
                ctx.add_edit(fs.relpath, WrapStmt(self.id, call.line, f"host-to-device copy {shown}{blocking}", stmt,
                                                  ctx.names(fs.relpath).node("device.transfer")))

    @staticmethod
    def _other_work(graph, function_id: str, fn, indexes, moves=()) -> str | None:
        """A call in the statement that is not part of a copy: the model, a loss, a project
        function (not the one that gives the copy its device: ``x.to(dist_util.dev())``)."""
        devices = {v for m in moves for v in (*m.args, *(v for k, v in m.keywords if k == "device")) if v}
        for i in indexes:
            call = fn.calls[i]
            if moves_to_device(fn, call) or call.callee + "()" in devices:
                continue
            if is_model_call(graph, function_id, i) or LOSS_NAME.search(call.method) or graph.targets(function_id, i):
                return call.callee
        return None
