"""ML-R3: wrap the epoch loop in ``ai.pipeline.epoch.iter(..., include_iter=False)``."""

from __future__ import annotations

from dftpass.api import Case, is_node, Pass, PassKind, WrapBody, WrapIter


class EpochLoop(Pass):
    """Wrap the iterable of the epoch loop in ``ai.pipeline.epoch.iter(..., include_iter=False)``.

    What it does:
        The epoch loop is the innermost loop that contains a batch loop, in the same
        function or through the functions it calls (the ``loops`` analysis), at module level
        too; a loop over a literal list (``for split in ['train', 'val']``) is not one. In
        full-batch training (no batch loop: pygcn's ``for epoch in range(n): train(epoch)``), a
        loop named for epochs that calls a function training once is the epoch loop. A
        ``while`` loop names its epochs by its counter or its bound (``while k <
        args.nepochs``). Its iterable is wrapped whole; the loop variable is untouched.

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
        is left alone. A ``while`` epoch loop (``while epoch < max_epochs:``) has no
        iterable: its body goes inside ``with ai.pipeline.epoch:`` (``break`` and
        ``continue`` leave the region as they leave the body).

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
        # an epoch loop annotated through dftracer 1.x's module name
        "from dftracer.logger import ai as prof\n\n\ndef train(model, loader):\n    for x in loader:\n"
        "        model(x)\n\n\ndef main(model, loader):\n"
        "    for epoch in prof.pipeline.epoch.iter(range(3), include_iter=False):\n        train(model, loader)\n",
        # x-transformers: the loop that makes one cycle(loader) per validation length runs none
        # of the generator (``it = gen()`` only makes it): no epoch loop; nor the training loop,
        # which takes its batches itself
        'import torch\nfrom torch.utils.data import DataLoader\n\nGRADIENT_ACCUMULATE_EVERY = 2\n\n\n'
        'def cycle(loader):\n    while True:\n        for data in loader:\n            yield data\n\n\n'
        'model = torch.nn.Linear(4, 1)\noptim = torch.optim.Adam(model.parameters())\n'
        'train_loader = DataLoader(torch.randn(64, 4), batch_size=4)\ntrain_loader = cycle(train_loader)\n'
        'LENGTHS = (2, 4)\nval_loaders = {}\nfor length in LENGTHS:\n'
        '    val_loader = DataLoader(torch.randn(16, 4), batch_size=length)\n'
        '    val_loaders[length] = cycle(val_loader)\n\nfor i in range(10):\n    model.train()\n'
        '    for _ in range(GRADIENT_ACCUMULATE_EVERY):\n        data = next(train_loader)\n'
        '        model(data).sum().backward()\n        optim.step()\n        optim.zero_grad()\n'
        '    if i % 5 == 0:\n        model.eval()\n        with torch.inference_mode():\n'
        '            for length in LENGTHS:\n                val_loader = val_loaders[length]\n'
        '                val_data = next(val_loader)\n                print(model(val_data).sum().item())\n',
    ]
    INVALID = [
        Case(
            # a while loop whose bound is read off an object names the epochs (dlrm's ``while k < args.nepochs``)
            'import torch\n\n\ndef run(args, model, opt, train_ld):\n    k = 0\n'
            '    while k < args.nepochs:\n        for x in train_ld:\n'
            '            model(x).sum().backward()\n            opt.step()\n        k += 1\n',
            'from dftracer.python import ai\nimport torch\n\n\n'
            'def run(args, model, opt, train_ld):\n    k = 0\n    while k < args.nepochs:\n'
            '        with ai.pipeline.epoch:\n            for x in train_ld:\n'
            '                model(x).sum().backward()\n                opt.step()\n'
            '            k += 1\n',
        ),
        Case(
            # full-batch training (pygcn): no batch loop; the loop named for epochs calls a function that
            # trains once, outside any loop of its own: it is the epoch loop
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
            'def train(epoch):\n    model.train()\n    optimizer.zero_grad()\n'
            '    loss = torch.nn.functional.cross_entropy(model(features), labels)\n'
            '    loss.backward()\n    optimizer.step()\n\n\ndef test():\n    model.eval()\n'
            '    output = model(features)\n'
            '    print((output.argmax(1) == labels).float().mean().item())\n\n\n'
            'for epoch in ai.pipeline.epoch.iter(range(200), include_iter=False):\n'
            '    train(epoch)\ntest()\n',
        ),
        Case(
            # issue 39: the loaders come from outside the project (provenance breaks at make_stream);
            # the step shows the batch loops, and the region still lands: the loop around the batch loop's function
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
            '    for x, y in batches:\n        x = x.to(device)\n'
            '        loss = ((model(x) - y) ** 2).mean()\n        loss.backward()\n'
            '        opt.step()\n\n\n@torch.no_grad()\ndef validate(model, batches):\n'
            '    total = 0.0\n    for x, y in batches:\n'
            '        total += ((model(x) - y) ** 2).sum().item()\n    return total\n\n\n'
            'def main():\n    model = Net()\n'
            '    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n'
            '    for epoch in ai.pipeline.epoch.iter(range(3), include_iter=False):\n'
            "        train_one_epoch(model, opt, make_stream('train'), 'cuda')\n"
            "        validate(model, make_stream('val'))\n",
        ),
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
        Case(
            # a module-level script's epoch loop, and a while loop over epochs
            "def train(model, loader):\n    for x in loader:\n        model(x)\n\n\n"
            "def fit(model, loader, max_epochs):\n    epoch = 0\n    while epoch < max_epochs:\n"
            "        train(model, loader)\n        epoch += 1\n\n\n"
            "for epoch in range(2):\n    train(None, [])\n",
            "from dftracer.python import ai\n\n\ndef train(model, loader):\n    for x in loader:\n        model(x)\n\n\n"
            "def fit(model, loader, max_epochs):\n    epoch = 0\n    while epoch < max_epochs:\n"
            "        with ai.pipeline.epoch:\n            train(model, loader)\n            epoch += 1\n\n\n"
            "for epoch in ai.pipeline.epoch.iter(range(2), include_iter=False):\n    train(None, [])\n",
        ),
    ]

    def run(self, ctx) -> None:
        loops = ctx.analysis("loops")
        graph = ctx.analysis("callgraph")
        for facts in loops.of_kind("epoch"):
            fs, fn = graph.functions[facts.function]
            names = ctx.names(fs.relpath)
            loop = facts.loop
            if loop.kind == "while":
                if any(loop.index in c.loops and any(is_node(fs, w, "pipeline.epoch") for w in c.withs)
                       for c in fn.calls):
                    continue
                ctx.add_edit(fs.relpath, WrapBody(self.id, loop.line, "epoch loop (while): " + facts.reason,
                                                  loop.stmt, with_item=names.node("pipeline.epoch")))
                continue
            if facts.wrapped_by:
                continue
            ctx.add_edit(fs.relpath, WrapIter(self.id, loop.line, "epoch loop: " + facts.reason,
                                              loop.stmt, names.iter_callee("pipeline.epoch"),
                                              extra=", include_iter=False"))
