"""ML-R2: ``@ai.pipeline.train`` / ``.evaluate`` / ``.test`` on the functions that run those loops."""

from __future__ import annotations

from dftpass.api import (
    calls_at, Case, evaluated_by_callers, evaluates, function_region, has_region, InsertAfter, InsertBefore,
    is_model_call, is_node, is_optimizer_step, facts, Pass, PassKind, sibling, split_of, step_calls, trains, WrapStmt,
)

PHASES = ("pipeline.train", "pipeline.evaluate", "pipeline.test")


class PipelinePhases(Pass):
    """Mark the functions that run the training, evaluation and test loops.

    What it does:
        A function that runs a batch loop (``loops`` analysis) is a *train* phase when the
        loop does a backward pass or an optimizer step (itself or through the functions it
        calls), and an *evaluate* phase when it runs without gradients (``@torch.no_grad``,
        ``with torch.inference_mode():``, ``model.eval()``, or every call of the function
        sits in a caller's ``with torch.no_grad():``). An evaluation function whose
        name says ``test`` is a *test* phase. A loop that runs a step without showing a
        backward pass (a benchmark's ``framework.compute(batch)``, a framework's
        ``train_step(batch)``) is the phase of the data it runs over: the split is read from
        how its loader was built (``get_loader(DatasetType.TRAIN)``, ``get_batch(val_data, i)``),
        and only when nothing else decides, from the function's name. The function gets
        ``@ai.pipeline.train`` / ``.evaluate`` / ``.test``; a batch loop at module level gets
        ``ai.pipeline.train.start()`` before and ``.stop()`` after it. When two candidates
        of one phase call each other, only the outer one is marked. A function or script
        with no batch loop whose loop calls an optimizer step itself (full-batch training:
        ``for i in range(steps): optimizer.step(closure)`` with LBFGS) is a *train* phase too,
        and a ``with torch.no_grad():`` block directly in that loop that calls the model (the
        prediction after each step) gets ``with ai.pipeline.evaluate:`` around it; so does such
        a block in a training batch loop (also under an ``if``) right after ``model.eval()``:
        the evaluation every k steps.

        Other shapes: in full-batch training the function an epoch loop calls for its one
        step is the *train* phase (pygcn's ``train(epoch)``); a gradient-free function named
        for evaluation or test that runs the model once (no batch loop: pygcn's ``test()``) is
        that phase; in a function that trains, a batch loop of its own after ``model.eval()``
        that does not train gets ``with ai.pipeline.evaluate:`` (an Accelerate script's
        evaluation after each epoch); and the test split read inside a training loop (dlrm's
        ``inference()`` every ``--test-freq`` batches) is a validation: *evaluate*.

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
            # dlrm's shape: the model is a global that run() sets (``global net``), called through a helper;
            # the test split read every k batches of training is a validation: the evaluate phase
            'import torch\nfrom torch.utils.data import DataLoader\n\n\n'
            'class Net(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n'
            '        self.fc = torch.nn.Linear(4, 1)\n\n    def forward(self, x):\n'
            '        return self.fc(x)\n\n\ndef wrap(x):\n    return net(x)\n\n\n'
            'def inference(test_ld):\n    total = 0.0\n    for x in test_ld:\n'
            '        total += wrap(x).sum().item()\n    return total\n\n\n'
            'def run(train_data, test_data):\n    global net\n    net = Net()\n'
            '    opt = torch.optim.SGD(net.parameters(), lr=0.1)\n'
            '    train_ld = DataLoader(train_data)\n    test_ld = DataLoader(test_data)\n'
            '    for j, x in enumerate(train_ld):\n        wrap(x).sum().backward()\n'
            '        opt.step()\n        if j % 10 == 0:\n            inference(test_ld)\n',
            'from dftracer.python import ai\nimport torch\n'
            'from torch.utils.data import DataLoader\n\n\nclass Net(torch.nn.Module):\n'
            '    def __init__(self):\n        super().__init__()\n'
            '        self.fc = torch.nn.Linear(4, 1)\n\n    def forward(self, x):\n'
            '        return self.fc(x)\n\n\ndef wrap(x):\n    return net(x)\n\n\n'
            '@ai.pipeline.evaluate\ndef inference(test_ld):\n    total = 0.0\n'
            '    for x in test_ld:\n        total += wrap(x).sum().item()\n    return total\n\n\n'
            '@ai.pipeline.train\ndef run(train_data, test_data):\n    global net\n'
            '    net = Net()\n    opt = torch.optim.SGD(net.parameters(), lr=0.1)\n'
            '    train_ld = DataLoader(train_data)\n    test_ld = DataLoader(test_data)\n'
            '    for j, x in enumerate(train_ld):\n        wrap(x).sum().backward()\n'
            '        opt.step()\n        if j % 10 == 0:\n            inference(test_ld)\n',
        ),
        Case(
            # an accelerate script's shape: one function trains, then evaluates after model.eval() in a
            # batch loop of its own: the function is the train phase, that loop the evaluate phase
            'import torch\n\n\n'
            'def training_function(model, opt, train_dataloader, eval_dataloader, epochs):\n'
            '    for epoch in range(epochs):\n        model.train()\n'
            '        for batch in train_dataloader:\n'
            '            model(batch).sum().backward()\n            opt.step()\n'
            '        model.eval()\n        for batch in eval_dataloader:\n'
            '            with torch.no_grad():\n'
            '                print(model(batch).sum().item())\n',
            'from dftracer.python import ai\nimport torch\n\n\n@ai.pipeline.train\n'
            'def training_function(model, opt, train_dataloader, eval_dataloader, epochs):\n'
            '    for epoch in range(epochs):\n        model.train()\n'
            '        for batch in train_dataloader:\n'
            '            model(batch).sum().backward()\n            opt.step()\n'
            '        model.eval()\n        with ai.pipeline.evaluate:\n'
            '            for batch in eval_dataloader:\n                with torch.no_grad():\n'
            '                    print(model(batch).sum().item())\n',
        ),
        Case(
            # full-batch training (pygcn): the function the epoch loop calls for its one step is the train
            # phase; a gradient-free function named test that runs the model once is the test phase
            'import torch\n\nmodel = torch.nn.Linear(8, 3)\n'
            'optimizer = torch.optim.Adam(model.parameters())\n'
            'features, labels = torch.randn(50, 8), torch.randint(0, 3, (50,))\n\n\n'
            'def train(epoch):\n    model.train()\n    optimizer.zero_grad()\n'
            '    loss = torch.nn.functional.cross_entropy(model(features), labels)\n'
            '    loss.backward()\n    optimizer.step()\n\n\ndef test():\n    model.eval()\n'
            '    output = model(features)\n'
            '    print((output.argmax(1) == labels).float().mean().item())\n\n\n'
            'for epoch in range(200):\n    train(epoch)\ntest()\n',
            'from dftracer.python import ai\nimport torch\n\nmodel = torch.nn.Linear(8, 3)\n'
            'optimizer = torch.optim.Adam(model.parameters())\n'
            'features, labels = torch.randn(50, 8), torch.randint(0, 3, (50,))\n\n\n'
            '@ai.pipeline.train\ndef train(epoch):\n    model.train()\n'
            '    optimizer.zero_grad()\n'
            '    loss = torch.nn.functional.cross_entropy(model(features), labels)\n'
            '    loss.backward()\n    optimizer.step()\n\n\n@ai.pipeline.test\ndef test():\n'
            '    model.eval()\n    output = model(features)\n'
            '    print((output.argmax(1) == labels).float().mean().item())\n\n\n'
            'for epoch in range(200):\n    train(epoch)\ntest()\n',
        ),
        Case(
            # issue 39: the loaders come from outside the project (provenance breaks at make_stream);
            # the step shows the batch loops, and the region still lands: train, and evaluate (a model run without gradients over the loop)
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
            '        return self.fc(x)\n\n\n@ai.pipeline.train\n'
            'def train_one_epoch(model, opt, batches, device):\n    for x, y in batches:\n'
            '        x = x.to(device)\n        loss = ((model(x) - y) ** 2).mean()\n'
            '        loss.backward()\n        opt.step()\n\n\n@torch.no_grad()\n'
            '@ai.pipeline.evaluate\ndef validate(model, batches):\n    total = 0.0\n'
            '    for x, y in batches:\n        total += ((model(x) - y) ** 2).sum().item()\n'
            '    return total\n\n\ndef main():\n    model = Net()\n'
            '    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n'
            '    for epoch in range(3):\n'
            "        train_one_epoch(model, opt, make_stream('train'), 'cuda')\n"
            "        validate(model, make_stream('val'))\n",
        ),
        Case(
            # a script that trains on the whole data set (pytorch/examples' time_sequence_prediction):
            # the step loop is the train phase, the prediction after each step under no_grad the
            # evaluate phase
            "import torch\nimport torch.nn as nn\n\n\nclass Seq(nn.Module):\n    def forward(self, x):\n"
            "        return x\n\n\nseq = Seq()\nx = torch.zeros(3)\noptimizer = torch.optim.LBFGS(seq.parameters())\n"
            "for i in range(3):\n    def closure():\n        optimizer.zero_grad()\n        loss = seq(x).sum()\n"
            "        loss.backward()\n        return loss\n    optimizer.step(closure)\n    with torch.no_grad():\n"
            "        pred = seq(x)\n        print(pred.sum().item())\n",
            "from dftracer.python import ai\nimport torch\nimport torch.nn as nn\n\n\nclass Seq(nn.Module):\n"
            "    def forward(self, x):\n        return x\n\n\nseq = Seq()\nx = torch.zeros(3)\n"
            "optimizer = torch.optim.LBFGS(seq.parameters())\nai.pipeline.train.start()\nfor i in range(3):\n"
            "    def closure():\n        optimizer.zero_grad()\n        loss = seq(x).sum()\n        loss.backward()\n"
            "        return loss\n    optimizer.step(closure)\n    with ai.pipeline.evaluate:\n"
            "        with torch.no_grad():\n            pred = seq(x)\n            print(pred.sum().item())\n"
            "ai.pipeline.train.stop()\n",
        ),
        Case(
            # full-batch training (LBFGS on the whole data set): no loop fetches batches, the
            # loop that calls the optimizer step is the training
            "import torch\n\n\ndef fit(model, x, y, steps):\n    opt = torch.optim.LBFGS(model.parameters())\n"
            "    for i in range(steps):\n        def closure():\n            opt.zero_grad()\n"
            "            loss = ((model(x) - y) ** 2).mean()\n            loss.backward()\n            return loss\n"
            "        opt.step(closure)\n",
            "from dftracer.python import ai\nimport torch\n\n\n@ai.pipeline.train\ndef fit(model, x, y, steps):\n"
            "    opt = torch.optim.LBFGS(model.parameters())\n    for i in range(steps):\n        def closure():\n"
            "            opt.zero_grad()\n            loss = ((model(x) - y) ** 2).mean()\n            loss.backward()\n"
            "            return loss\n        opt.step(closure)\n",
        ),
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
        Case(
            # gradient-free because every caller runs it under no_grad
            "import torch\n\n\ndef score(model, loader):\n    for x, y in loader:\n        model(x)\n\n\n"
            "def on_batch_end(model, loader):\n    model.eval()\n    with torch.no_grad():\n"
            "        score(model, loader)\n",
            "from dftracer.python import ai\nimport torch\n\n\n@ai.pipeline.evaluate\ndef score(model, loader):\n"
            "    for x, y in loader:\n        model(x)\n\n\n"
            "def on_batch_end(model, loader):\n    model.eval()\n    with torch.no_grad():\n"
            "        score(model, loader)\n",
        ),
        Case(
            # no backward pass in sight: the split of the data decides
            "import torch\n\n\ndef run(framework, loaders):\n    loader = loaders.get(split='valid')\n"
            "    for batch in torch.utils.data.DataLoader(loader):\n        framework.compute(batch)\n\n\n"
            "def _train(framework, train_loader):\n    for batch in train_loader:\n        framework.compute(batch)\n",
            "from dftracer.python import ai\nimport torch\n\n\n@ai.pipeline.evaluate\ndef run(framework, loaders):\n"
            "    loader = loaders.get(split='valid')\n    for batch in torch.utils.data.DataLoader(loader):\n"
            "        framework.compute(batch)\n\n\n@ai.pipeline.train\ndef _train(framework, train_loader):\n"
            "    for batch in train_loader:\n        framework.compute(batch)\n",
        ),
        Case(
            # x-transformers' shape: every k steps the model goes in eval mode and runs on a batch
            # of the validation split under no_grad, inside the training loop
            "import torch\n\n\ndef fit(model, loader, val_batches, opt):\n    for i, (x, y) in enumerate(loader):\n"
            "        model(x, y).backward()\n        opt.step()\n        if i % 10 == 0:\n            model.eval()\n"
            "            with torch.no_grad():\n                print(model(*next(val_batches)))\n"
            "            model.train()\n",
            "from dftracer.python import ai\nimport torch\n\n\n@ai.pipeline.train\n"
            "def fit(model, loader, val_batches, opt):\n    for i, (x, y) in enumerate(loader):\n"
            "        model(x, y).backward()\n        opt.step()\n        if i % 10 == 0:\n            model.eval()\n"
            "            with ai.pipeline.evaluate:\n                with torch.no_grad():\n"
            "                    print(model(*next(val_batches)))\n            model.train()\n",
        ),
        Case(
            # a loader over the split a data set builds with train=False (torchvision's test set)
            "import torch\nfrom torch.utils.data import DataLoader\nfrom torchvision import datasets\n\n\n"
            "def main(model):\n    loader = DataLoader(datasets.MNIST('data', train=False), batch_size=64)\n"
            "    model.eval()\n    with torch.no_grad():\n        for x, y in loader:\n            model(x)\n",
            "from dftracer.python import ai\nimport torch\nfrom torch.utils.data import DataLoader\n"
            "from torchvision import datasets\n\n\n@ai.pipeline.test\ndef main(model):\n"
            "    loader = DataLoader(datasets.MNIST('data', train=False), batch_size=64)\n    model.eval()\n"
            "    with torch.no_grad():\n        for x, y in loader:\n            model(x)\n",
        ),
        Case(
            # a training loop with an evaluation batch loop inside (x-transformers): one train phase
            # around the outer loop, the evaluate phase on the inference block; none of its own
            # for the inner loop (a train phase inside the evaluate phase)
            'import torch\nfrom torch.utils.data import DataLoader\n\nGRADIENT_ACCUMULATE_EVERY = 2\n\n\n'
            'def cycle(loader):\n    while True:\n        for data in loader:\n            yield data\n\n\n'
            'model = torch.nn.Linear(4, 1)\noptim = torch.optim.Adam(model.parameters())\n'
            'train_loader = DataLoader(torch.randn(64, 4), batch_size=4)\ntrain_loader = cycle(train_loader)\n'
            'val_loaders = {}\nfor length in (2, 4):\n'
            '    val_loader = DataLoader(torch.randn(16, 4), batch_size=length)\n'
            '    val_loaders[length] = cycle(val_loader)\n\nfor i in range(10):\n    model.train()\n'
            '    for _ in range(GRADIENT_ACCUMULATE_EVERY):\n        data = next(train_loader)\n'
            '        model(data).sum().backward()\n        optim.step()\n        optim.zero_grad()\n'
            '    if i % 5 == 0:\n        model.eval()\n        with torch.inference_mode():\n'
            '            for length in (2, 4):\n                val_loader = val_loaders[length]\n'
            '                val_data = next(val_loader)\n                print(model(val_data).sum().item())\n',
            'from dftracer.python import ai\nimport torch\nfrom torch.utils.data import DataLoader\n\n'
            'GRADIENT_ACCUMULATE_EVERY = 2\n\n\ndef cycle(loader):\n    while True:\n'
            '        for data in loader:\n            yield data\n\n\nmodel = torch.nn.Linear(4, 1)\n'
            'optim = torch.optim.Adam(model.parameters())\n'
            'train_loader = DataLoader(torch.randn(64, 4), batch_size=4)\ntrain_loader = cycle(train_loader)\n'
            'val_loaders = {}\nfor length in (2, 4):\n'
            '    val_loader = DataLoader(torch.randn(16, 4), batch_size=length)\n'
            '    val_loaders[length] = cycle(val_loader)\n\nai.pipeline.train.start()\nfor i in range(10):\n'
            '    model.train()\n    for _ in range(GRADIENT_ACCUMULATE_EVERY):\n'
            '        data = next(train_loader)\n        model(data).sum().backward()\n        optim.step()\n'
            '        optim.zero_grad()\n    if i % 5 == 0:\n        model.eval()\n'
            '        with ai.pipeline.evaluate:\n            with torch.inference_mode():\n'
            '                for length in (2, 4):\n                    val_loader = val_loaders[length]\n'
            '                    val_data = next(val_loader)\n'
            '                    print(model(val_data).sum().item())\nai.pipeline.train.stop()\n',
        ),
    ]

    def run(self, ctx) -> None:
        loops = ctx.analysis("loops")
        graph = ctx.analysis("callgraph")
        candidates: dict[str, tuple[str, str]] = {}
        for function_id in graph.functions:
            # a batch loop inside another (x-transformers' validation over several lengths every
            # k steps) is in that loop's phase; the evaluate block around it is _predictions'
            batch = [f for f in loops.loops_of(function_id) if f.kind == "batch" and not f.yields_batches
                     and loops.enclosing(f, "batch") is None]
            if not batch:
                continue
            found = phase_of(graph, loops, function_id, batch)
            if found is None:
                continue
            fs, fn = graph.functions[function_id]
            if found[0] == "pipeline.train":
                for facts in batch:
                    self._predictions(ctx, graph, loops, function_id, facts.loop.index, after_eval=True)
                self._evaluation_loops(ctx, graph, loops, function_id, batch)
            if fn.is_module:
                self._module_level(ctx, fs, fn, batch, *found)
            else:
                candidates[function_id] = found
        for function_id, loop_index in full_batch_steps(graph, loops):
            fs, fn = graph.functions[function_id]
            self._predictions(ctx, graph, loops, function_id, loop_index)
            if fn.is_module:
                self._module_level(ctx, fs, fn, [loops.facts[(function_id, loop_index)]], "pipeline.train",
                                   "a loop that runs the optimizer step (full-batch training)")
            else:
                candidates.setdefault(function_id, ("pipeline.train", "runs the optimizer step in a loop "
                                                                      "(full-batch training)"))
        for facts in loops.of_kind("epoch"):
            for step in facts.full_batch:
                candidates.setdefault(step, ("pipeline.train", "one full-batch training step an epoch (the epoch "
                                                               f"loop at line {facts.loop.line})"))
        for function_id, phase in loopless_evaluations(graph, loops):
            candidates.setdefault(function_id, (phase, "runs the model once without gradients (no batch loop), "
                                                       "named for it"))
        # the same node nested in itself keeps only the inner event: mark the outer one only
        inner = set()
        for caller, (phase, _) in candidates.items():
            reach = graph.reachable(caller)
            inner.update(c for c, (p, _) in candidates.items() if p == phase and c != caller and c in reach)
        for function_id, (phase, why) in sorted(candidates.items()):
            fs, fn = graph.functions[function_id]
            if function_id in inner or any(has_region(fs, fn, p) for p in PHASES):
                continue
            names = ctx.names(fs.relpath)
            ctx.add_edit(fs.relpath, function_region(names, fn, phase, self.id, f"{phase.split('.')[1]} phase: {why}"))

    def _predictions(self, ctx, graph, loops, function_id: str, loop_index: int, after_eval: bool = False) -> None:
        """In a full-batch training loop, a ``with torch.no_grad():`` block directly in the
        loop's body that calls the model is the evaluation of that step (time_sequence_prediction's
        prediction after each LBFGS step): ``with ai.pipeline.evaluate:`` around it. In a batch
        loop that trains (``after_eval``), such a block in the loop (also under an ``if``) is
        the evaluation every k steps when the model is put in eval mode just before it
        (x-transformers: ``if i % validate_every == 0: model.eval(); with torch.no_grad():
        loss = model(next(val_loader))``); a block without ``.eval()`` before it (a teacher's
        forward, an EMA update) is part of the training step."""
        fs, fn = graph.functions[function_id]
        body = loops.facts[(function_id, loop_index)].loop.stmt
        for call in fn.calls:
            if call.stmt_kind != "with" or call.callee.rsplit(".", 1)[-1] not in facts(graph).no_grad:
                continue
            if after_eval:
                if not (call.loops and call.loops[-1] == loop_index and call.stmt[:len(body)] == body):
                    continue
                block, at = call.stmt[:-1], call.stmt[-1]
                if not any(c.method == "eval" and not c.args and c.stmt[:-1] == block and c.stmt[-1][0] == at[0]
                           and c.stmt[-1][1] < at[1] for c in fn.calls):
                    continue
            elif call.stmt[:-1] != body or call.stmt[-1][0] != "body":
                continue
            block = call.stmt
            inside = [i for i, c in enumerate(fn.calls) if c.stmt[:len(block)] == block and c.stmt != block]
            if not any(is_model_call(graph, function_id, i) for i in inside):
                continue
            if any(is_node(fs, w, "pipeline.evaluate") for w in call.withs):
                continue
            why = ("the model in eval mode without gradients inside the training loop" if after_eval else
                   "the model run without gradients after each step of full-batch training")
            ctx.add_edit(fs.relpath, WrapStmt(self.id, call.line, f"evaluate phase: {why}", block,
                                              ctx.names(fs.relpath).node("pipeline.evaluate")))

    def _evaluation_loops(self, ctx, graph, loops, function_id: str, batch) -> None:
        """In a function that trains, a batch loop of its own that does not train and runs
        after ``model.eval()`` in the same block (an accelerate script's evaluation after each
        epoch's training loop) is the evaluate phase: ``start()``/``stop()`` around it."""
        fs, fn = graph.functions[function_id]
        for facts in batch:
            loop = facts.loop
            if trains(graph, function_id, lambda call: bool(set(call.loops) &
                                                            loops.loop_and_descendants(function_id, loop.index))):
                continue
            block, at = loop.stmt[:-1], loop.stmt[-1]
            if not any(c.method == "eval" and not c.args and c.stmt[:-1] == block and c.stmt[-1][0] == at[0]
                       and c.stmt[-1][1] < at[1] for c in fn.calls):
                continue
            if not loops.does_step(function_id, loops.loop_and_descendants(function_id, loop.index)):
                continue
            if any(is_node(fs, c.callee, "pipeline.evaluate", "start") for c in calls_at(fn, sibling(loop.stmt, -1))) \
                    or any(is_node(fs, w, "pipeline.evaluate") for c in fn.calls if c.stmt == loop.stmt for w in c.withs):
                continue
            # a ``with`` region; the lean step makes it start()/stop() when nothing leaves the loop early
            text = "evaluate phase: a batch loop without a backward pass after model.eval(), in a function that trains"
            ctx.add_edit(fs.relpath, WrapStmt(self.id, loop.line, text, loop.stmt,
                                              ctx.names(fs.relpath).node("pipeline.evaluate")))

    def _module_level(self, ctx, fs, fn, batch, phase: str, why: str) -> None:
        """A script's batch loop at module level: ``start()`` before it, ``stop()`` after it
        (a ``with`` would re-indent the whole loop)."""
        for facts in batch:
            loop = facts.loop
            if any(is_node(fs, c.callee, phase, "start") for c in calls_at(fn, sibling(loop.stmt, -1))):
                continue
            names = ctx.names(fs.relpath)
            text = f"{phase.split('.')[1]} phase (module level): {why}"
            ctx.add_edit(fs.relpath, InsertBefore(self.id, loop.line, text, loop.stmt, names.start(phase)))
            ctx.add_edit(fs.relpath, InsertAfter(self.id, loop.line, text, loop.stmt, names.stop(phase)))


def loopless_evaluations(graph, loops):
    """(function id, phase) of the functions that evaluate the whole data at once: no batch
    loop, gradient-free (``model.eval()``, ``no_grad``), a model call, no backward pass, a
    name that says evaluation or test (pygcn's ``test()``), and not run per batch of another
    loop (then it is that step's)."""
    calls = list(step_calls(graph, loops))
    per_batch = {function_id for function_id, _ in calls} | {t for function_id, i in calls
                                                            for t in graph.targets(function_id, i)}
    for function_id, (fs, fn) in graph.functions.items():
        if fn.is_module or function_id in per_batch or any(f.kind == "batch" for f in loops.loops_of(function_id)):
            continue
        if graph.in_model_class(function_id):
            continue
        split = split_of([fn.name])
        if split not in ("evaluate", "test") or not evaluates(fn, graph) or trains(graph, function_id):
            continue
        if any(is_model_call(graph, function_id, i) for i in range(len(fn.calls))):
            yield function_id, "pipeline.test" if split == "test" else "pipeline.evaluate"


def _run_while_training(graph, loops, function_id: str) -> bool:
    """Whether the function is called inside a loop that trains (dlrm's ``inference()`` every
    ``--test-freq`` batches of the training loop): what it runs is a validation, whatever the
    split's name."""
    for caller, site in graph.call_sites_of(function_id):
        for index in site.loops:
            facts = loops.facts.get((caller, index))
            if facts is not None and facts.kind in ("batch", "epoch") and trains(
                    graph, caller, lambda call, i=index: i in call.loops and call is not site):
                return True
    return False


def full_batch_steps(graph, loops):
    """(function id, index of its outermost loop that calls an optimizer step itself) of every
    function with no batch loop: the training loop of a program that trains on the whole data
    set at once (LBFGS), where no loop fetches batches."""
    for function_id, (fs, fn) in graph.functions.items():
        if any(f.kind == "batch" for f in loops.loops_of(function_id)):
            continue
        outer = sorted({c.loops[0] for c in fn.calls if c.loops and c.stmt_kind == "expr"
                        and is_optimizer_step(graph, fs, fn, c)})
        if outer:
            yield function_id, outer[0]


def phase_of(graph, loops, function_id: str, batch: list) -> tuple[str, str] | None:
    """(phase node, why) of a function that runs the batch loops ``batch``, or None."""
    fs, fn = graph.functions[function_id]
    indexes = {f.loop.index for f in batch}

    def in_batch_loop(call) -> bool:
        return bool(set(call.loops) & indexes)

    if trains(graph, function_id, in_batch_loop):
        return "pipeline.train", "runs a batch loop that trains"
    if evaluates(fn, graph) or evaluated_by_callers(graph, function_id):
        # the test split (``MNIST(train=False)``) unless the name says validation
        test = "test" in fn.name.lower() or (any(f.split == "test" for f in batch)
                                             and split_of([fn.name]) != "evaluate"
                                             and not _run_while_training(graph, loops, function_id))
        return ("pipeline.test" if test else "pipeline.evaluate"), "runs a batch loop without gradients"
    stepping = [f for f in batch if loops.does_step(function_id, {f.loop.index})]
    if not stepping:
        return None
    split = next((f.split for f in stepping if f.split), None)
    if split == "test" and "test" not in fn.name.lower() and _run_while_training(graph, loops, function_id):
        split = "evaluate"  # the test split, read every k steps of training: a validation
    if split:
        return f"pipeline.{split}", f"runs a step on every batch of the {split} data"
    named = split_of([fn.name])
    if named:
        return f"pipeline.{named}", f"runs a step on every batch (and its name says {named})"
    return None
