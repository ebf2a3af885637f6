"""ML-R6: wrap the loader a batch loop iterates in ``ai.dataloader.fetch.iter``."""

from __future__ import annotations

from dftpass.api import (
    calls_at, Case, does_step, Expect, Finding, function_region, has_region, InsertAfter, InsertBefore, is_node, Pass,
    PassKind, Severity, sibling, WrapIter, WrapValue,
)


class BatchLoop(Pass):
    """Mark where every batch loop waits for its data: ``ai.dataloader.fetch``.

    What it does:
        For each batch loop (the ``loops`` analysis), by how it gets its batches:

        * it iterates a loader (a ``DataLoader``, a ``tf.data`` pipeline, a factory's
          loader, through ``enumerate``/``tqdm``/``zip``): the loader is wrapped in
          ``ai.dataloader.fetch.iter(...)``, inside any ``enumerate``, so the loop still
          unpacks what it did;
        * it takes ``next(it)`` from a loader's iterator: ``ai.dataloader.fetch.start()``
          before and ``.stop()`` after that statement, or around the whole ``try`` when an
          ``except StopIteration:`` starts the iterator again (the restart is part of the wait);
        * it calls a project function that produces the batch (``x, y = get_batch(data, i)``,
          named like one, or one that returns ``next(it)`` of a loader's iterator whatever its
          name: ``batch = loader.next()``): that function gets ``@ai.dataloader.fetch``;
        * it iterates a project generator that yields a loader's batches
          (``for batch in loader.next():``): the generator's own loop is the one wrapped;
        * its step draws ``next(it)`` from a project generator in the middle of an expression
          (``opt_state = update(i, opt_state, next(batches))``): the iterator is wrapped where
          it is made, ``batches = ai.dataloader.fetch.iter(data_stream())``, so that every
          ``next()`` is timed without splitting the statement.

        When names say nothing (a producer called ``random_training_set``, a generator that
        slices arrays in memory), batch provenance finds the producer by following what the
        step consumes back to where it is drawn (the ``loops`` analysis).

        The step itself is evidence enough (issue 39): a loop whose body trains (a backward
        pass, an optimizer, scaler or engine step, a jitted update, in the body or in a
        function it calls), or runs a model without gradients on what it draws, is a batch
        loop whatever it iterates, and its iterable (or its ``next()``) is the fetch. Where
        provenance could not prove the producer (an iterator built outside the project, a
        parameter no caller passes, an attribute never set), the fetch is still placed and
        a note names the break. A loop that runs a step but fetches nothing it can see says
        so and places nothing (a note: full-batch training, or a producer it does not know).
        A model's own loops (sampling in its ``generate``) draw no batches and get neither.

    Why:
        ``fetch.iter`` writes two events per batch: ``fetch.iter``, the time the training
        loop waited for the batch (the data stall), and ``fetch.block``, the time spent
        on it; start/stop and the decorator write the wait. Without them a trace cannot show
        whether loading keeps up with compute (ML-R24).

    Example:
        ``for step, (x, y) in enumerate(train_loader):`` becomes
        ``for step, (x, y) in enumerate(ai.dataloader.fetch.iter(train_loader)):``

    Fix safety:
        Safe: the wrapper yields the same elements in the same order. A loop that can
        ``break`` loses the events of the iteration that breaks: dftracer writes an
        iteration's events when the next element is asked for, and after a ``break`` it
        never is (reported, since nothing inserted around the loop can change that). For the
        same reason an endless iterator wrapped where it is made loses its last wait (the
        program never asks for the batch after its last), and its events are written with
        the step of the ``next()`` that follows; it writes no ``fetch.block`` (between two
        ``next()`` calls is no loop body). When the interpreter exits with such a generator
        still open at module level, dftracer's clean-up of it may print "Exception ignored
        in: <generator ... iter>" to stderr (the trace and the exit code are unaffected). If
        ``next()`` raises, ``stop()`` is not reached and that wait has no event. Loops over
        anything that is not a loader are left alone; a loop already wrapped is not
        wrapped again.

    Options:
        None (what counts as a loader or a batch producer is configured on the ``loops``
        analysis: ``rules.options.loops.loader_name_pattern``, ``loader_factories``,
        ``batch_producer_pattern``).
    """

    id = "ML-R6"
    title = "Batch loop"
    kind = PassKind.TRANSFORM
    requires = ("loops", "overhead")
    tags = ("pipeline", "dataloader")

    VALID = [
        # a loop over something that is not a loader
        "def f(cfg):\n    for key, value in cfg.items():\n        print(key, value)\n",
        # a loop over a list of closures whose name reads like loaders
        "def f(x):\n    loaders = [lambda: 1, lambda: 2]\n    for i, fn in enumerate(loaders):\n        fn()\n",
        # already wrapped
        "from dftracer.python import ai\n\n\ndef f(train_loader):\n"
        "    for batch in ai.dataloader.fetch.iter(train_loader):\n        pass\n",
        # full-batch training: no fetch to place, and it is said
        Case(
            "import torch\n\n\ndef train(model, opt, X):\n    for epoch in range(10):\n"
            "        model(X).sum().backward()\n        opt.step()\n",
            findings=(Expect("info", "full-batch training, or a batch producer it does not know", line=5),),
        ),
        # a model's own sampling loop (x-transformers' ``generate``) draws no batches: nothing
        # to place and nothing to say
        'import torch\n\n\nclass Sampler(torch.nn.Module):\n    def __init__(self):\n'
        '        super().__init__()\n        self.net = torch.nn.Linear(4, 4)\n\n    @torch.no_grad()\n'
        '    def generate(self, seq, steps):\n        for t in zip(range(steps), reversed(range(steps))):\n'
        '            seq = self.net(seq)\n        return seq\n',
    ]
    INVALID = [
        # issue 39: the step shows the batch loop, whatever produced its data; a broken
        # chain of provenance is said (a note) and vetoes nothing
        Case(
            "import torch\nfrom streams import make_stream\n\n\ndef train(model, opt):\n"
            "    it = make_stream('train')\n    for step in range(10):\n        x, y = next(it)\n"
            "        model(x).sum().backward()\n        opt.step()\n",
            "from dftracer.python import ai\nimport torch\nfrom streams import make_stream\n\n\ndef train(model, opt):\n"
            "    it = make_stream('train')\n    for step in range(10):\n        ai.dataloader.fetch.start()\n"
            "        x, y = next(it)\n        ai.dataloader.fetch.stop()\n"
            "        model(x).sum().backward()\n        opt.step()\n",
            findings=(Expect("info", "next(it), and it is built by streams.make_stream(), outside the project",
                             line=7),),
        ),
        Case(
            "import torch\n\n\ndef train(model, opt, batches):\n    for x, y in batches:\n"
            "        model(x).sum().backward()\n        opt.step()\n",
            "from dftracer.python import ai\nimport torch\n\n\ndef train(model, opt, batches):\n"
            "    for x, y in ai.dataloader.fetch.iter(batches):\n"
            "        model(x).sum().backward()\n        opt.step()\n",
            findings=(Expect("info", "batches is a parameter whose callers dftpass cannot follow", line=5),),
        ),
        Case(
            # an attribute the class never sets (batch provenance looked at every method)
            "import torch\n\n\nclass Trainer:\n    def __init__(self, model, opt):\n"
            "        self.model, self.opt = model, opt\n\n    def fit(self):\n        for step in range(10):\n"
            "            x = next(self.stream)\n            self.model(x).sum().backward()\n            self.opt.step()\n",
            "from dftracer.python import ai\nimport torch\n\n\nclass Trainer:\n    def __init__(self, model, opt):\n"
            "        self.model, self.opt = model, opt\n\n    def fit(self):\n        for step in range(10):\n"
            "            ai.dataloader.fetch.start()\n            x = next(self.stream)\n"
            "            ai.dataloader.fetch.stop()\n            self.model(x).sum().backward()\n            self.opt.step()\n",
            findings=(Expect("info", "next(self.stream), and self.stream is never assigned in Trainer or its bases",
                             line=9),),
        ),
        Case(
            # the detr shape: a logging generator over a loader handed in as a parameter, built by
            # a project helper of a module imported whole (``import utils``): the consumer's loop
            # is the fetch, not the wrapper's
            "import torch\nimport utils\n\n\ndef train_one_epoch(model, opt, data_loader):\n"
            "    logger = utils.MetricLogger()\n    for x, y in logger.log_every(data_loader, 10):\n"
            "        model(x).sum().backward()\n        opt.step()\n",
            "from dftracer.python import ai\nimport torch\nimport utils\n\n\ndef train_one_epoch(model, opt, data_loader):\n"
            "    logger = utils.MetricLogger()\n    for x, y in ai.dataloader.fetch.iter(logger.log_every(data_loader, 10)):\n"
            "        model(x).sum().backward()\n        opt.step()\n",
            files={"utils.py": "class MetricLogger:\n    def log_every(self, iterable, freq):\n"
                               "        for i, obj in enumerate(iterable):\n            yield obj\n"},
        ),
        Case(
            # a project class that hands out a loader's next batch, whatever its method is
            # called (makemore's InfiniteDataLoader.next)
            'import torch\nfrom torch.utils.data import DataLoader\n\n\nclass EndlessLoader:\n'
            '    def __init__(self, data):\n        self.it = iter(DataLoader(data, batch_size=2))\n\n'
            '    def next(self):\n        return next(self.it)\n\n\ndef fit(model, data, opt):\n'
            '    loader = EndlessLoader(data)\n    for step in range(10):\n        batch = loader.next()\n'
            '        model(batch).sum().backward()\n        opt.step()\n',
            'from dftracer.python import ai\nimport torch\nfrom torch.utils.data import DataLoader\n\n\n'
            'class EndlessLoader:\n    def __init__(self, data):\n'
            '        self.it = iter(DataLoader(data, batch_size=2))\n\n    @ai.dataloader.fetch\n'
            '    def next(self):\n        return next(self.it)\n\n\ndef fit(model, data, opt):\n'
            '    loader = EndlessLoader(data)\n    for step in range(10):\n        batch = loader.next()\n'
            '        model(batch).sum().backward()\n        opt.step()\n',
        ),
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
            # a loop that can break: wrapped, and the lost last iteration is said
            "def run(loader, dry_run):\n    for batch in loader:\n        if dry_run:\n            break\n",
            "from dftracer.python import ai\n\n\ndef run(loader, dry_run):\n"
            "    for batch in ai.dataloader.fetch.iter(loader):\n        if dry_run:\n            break\n",
            findings=(Expect("warning", "the loop can `break`", line=2),),
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
            "    for step in range(steps):\n        ai.dataloader.fetch.start()\n        batch = next(it)\n"
            "        ai.dataloader.fetch.stop()\n        print(batch)\n",
        ),
        Case(
            # the minGPT shape: while True, next(), and a restart when the loader runs out
            "from torch.utils.data import DataLoader\n\n\ndef run(model, ds):\n    loader = DataLoader(ds)\n"
            "    data_iter = iter(loader)\n    while True:\n        try:\n            batch = next(data_iter)\n"
            "        except StopIteration:\n            data_iter = iter(loader)\n            batch = next(data_iter)\n"
            "        model(batch)\n",
            "from dftracer.python import ai\nfrom torch.utils.data import DataLoader\n\n\ndef run(model, ds):\n"
            "    loader = DataLoader(ds)\n    data_iter = iter(loader)\n    while True:\n"
            "        ai.dataloader.fetch.start()\n        try:\n            batch = next(data_iter)\n"
            "        except StopIteration:\n            data_iter = iter(loader)\n            batch = next(data_iter)\n"
            "        ai.dataloader.fetch.stop()\n        model(batch)\n",
        ),
        Case(
            # a tf.data pipeline held in an attribute
            "import tensorflow as tf\n\n\nclass Loader:\n    def __init__(self, x):\n"
            "        self._dataset = tf.data.Dataset.from_tensor_slices(x).batch(32).prefetch(2)\n\n"
            "    def epoch(self, step_fn):\n        for batch in self._dataset:\n            step_fn(batch)\n",
            "from dftracer.python import ai\nimport tensorflow as tf\n\n\nclass Loader:\n    def __init__(self, x):\n"
            "        self._dataset = tf.data.Dataset.from_tensor_slices(x).batch(32).prefetch(2)\n\n"
            "    def epoch(self, step_fn):\n        for batch in ai.dataloader.fetch.iter(self._dataset):\n"
            "            step_fn(batch)\n",
        ),
        Case(
            # index-driven batches: the function that produces the batch is the fetch
            "def get_batch(source, i):\n    return source[i:i + 2], source[i + 1:i + 3]\n\n\n"
            "def train(model, data, opt):\n    for batch, i in enumerate(range(0, len(data), 2)):\n"
            "        x, y = get_batch(data, i)\n        model(x).backward()\n",
            "from dftracer.python import ai\n\n\n@ai.dataloader.fetch\ndef get_batch(source, i):\n"
            "    return source[i:i + 2], source[i + 1:i + 3]\n\n\n"
            "def train(model, data, opt):\n    for batch, i in enumerate(range(0, len(data), 2)):\n"
            "        x, y = get_batch(data, i)\n        model(x).backward()\n",
        ),
        Case(
            # a loader object from a factory, and a generator that yields its batches: the
            # generator's loop is wrapped, the consumer's loop is not wrapped again
            "from torch.utils.data import DataLoader\n\n\nclass TorchLoader:\n    def __init__(self, ds):\n"
            "        self._dataset = DataLoader(ds)\n\n    def next(self):\n        for batch in self._dataset:\n"
            "            yield batch\n\n\ndef make_loader(kind, ds):\n    if kind == 'torch':\n"
            "        return TorchLoader(ds)\n    raise ValueError(kind)\n\n\nclass Bench:\n"
            "    def __init__(self, ds):\n        self.loader = make_loader('torch', ds)\n\n"
            "    def train(self, compute):\n        for batch in self.loader.next():\n            compute(batch)\n",
            "from dftracer.python import ai\nfrom torch.utils.data import DataLoader\n\n\nclass TorchLoader:\n"
            "    def __init__(self, ds):\n        self._dataset = DataLoader(ds)\n\n    def next(self):\n"
            "        for batch in ai.dataloader.fetch.iter(self._dataset):\n            yield batch\n\n\n"
            "def make_loader(kind, ds):\n    if kind == 'torch':\n        return TorchLoader(ds)\n"
            "    raise ValueError(kind)\n\n\nclass Bench:\n    def __init__(self, ds):\n"
            "        self.loader = make_loader('torch', ds)\n\n    def train(self, compute):\n"
            "        for batch in self.loader.next():\n            compute(batch)\n",
        ),
        Case(
            # issue 29's shape: a generator method bound by functools.partial, next() at
            # module level: the consumer's next() is the fetch
            "import functools\n\nimport torch\nfrom torch.utils.data import DataLoader\n\n\nclass Task:\n"
            "    @staticmethod\n    def iter_batches(split, ds):\n        for x, y in DataLoader(ds):\n"
            "            yield x, y\n\n\niter_batches = functools.partial(Task.iter_batches, ds=[(1.0, 2.0)])\n"
            "it = iter_batches(split='train')\nmodel = torch.nn.Linear(1, 1)\nwhile True:\n    X, Y = next(it)\n"
            "    model(X).sum().backward()\n",
            "from dftracer.python import ai\nimport functools\n\nimport torch\nfrom torch.utils.data import DataLoader\n"
            "\n\nclass Task:\n    @staticmethod\n    def iter_batches(split, ds):\n        for x, y in DataLoader(ds):\n"
            "            yield x, y\n\n\niter_batches = functools.partial(Task.iter_batches, ds=[(1.0, 2.0)])\n"
            "it = iter_batches(split='train')\nmodel = torch.nn.Linear(1, 1)\nwhile True:\n"
            "    ai.dataloader.fetch.start()\n    X, Y = next(it)\n    ai.dataloader.fetch.stop()\n"
            "    model(X).sum().backward()\n",
        ),
        Case(
            # a generator of in-memory slices drawn with next() inside the step's call (jax's
            # mnist_classifier shape): the iterator is wrapped where it is made
            "import numpy as np\nimport torch\n\n\ndef stream(x, y):\n    while True:\n"
            "        for i in range(0, len(x), 2):\n            yield x[i:i + 2], y[i:i + 2]\n\n\n"
            "def update(model, opt, batch):\n    x, y = batch\n    ((model(x) - y) ** 2).mean().backward()\n"
            "    opt.step()\n\n\ndef main(model, opt):\n    x, y = np.load('x.npy'), np.load('y.npy')\n"
            "    batches = stream(x, y)\n    for step in range(10):\n        update(model, opt, next(batches))\n",
            "from dftracer.python import ai\nimport numpy as np\nimport torch\n\n\ndef stream(x, y):\n"
            "    while True:\n        for i in range(0, len(x), 2):\n            yield x[i:i + 2], y[i:i + 2]\n\n\n"
            "def update(model, opt, batch):\n    x, y = batch\n    ((model(x) - y) ** 2).mean().backward()\n"
            "    opt.step()\n\n\ndef main(model, opt):\n    x, y = np.load('x.npy'), np.load('y.npy')\n"
            "    batches = ai.dataloader.fetch.iter(stream(x, y), include_block=False)\n    for step in range(10):\n"
            "        update(model, opt, next(batches))\n",
        ),
        Case(
            # a producer no name gives away (char-rnn's random_training_set): batch provenance
            # walks the step's input back to it, and to the text it slices
            "import random\n\nimport torch\n\n\ndef read_corpus(path):\n    return open(path).read()\n\n\n"
            "text = read_corpus('input.txt')\n\n\ndef random_chunk(n):\n"
            "    start = random.randint(0, len(text) - n - 1)\n"
            "    return torch.tensor([ord(c) for c in text[start:start + n]])\n\n\n"
            "def train(model, opt, inp):\n    model(inp.float()).sum().backward()\n    opt.step()\n\n\n"
            "def main(model, opt):\n    for it in range(100):\n        train(model, opt, random_chunk(8))\n",
            "from dftracer.python import ai\nimport random\n\nimport torch\n\n\ndef read_corpus(path):\n"
            "    return open(path).read()\n\n\ntext = read_corpus('input.txt')\n\n\n@ai.dataloader.fetch\n"
            "def random_chunk(n):\n    start = random.randint(0, len(text) - n - 1)\n"
            "    return torch.tensor([ord(c) for c in text[start:start + n]])\n\n\n"
            "def train(model, opt, inp):\n    model(inp.float()).sum().backward()\n    opt.step()\n\n\n"
            "def main(model, opt):\n    for it in range(100):\n        train(model, opt, random_chunk(8))\n",
        ),
        Case(
            # x-transformers' length-extrapolation script: the training loop takes next() of a
            # cycle() over a loader (rebound at module level) in its accumulation loop, and every k
            # steps evaluates next() of one cycle() per length in a loop of its own: both fetch
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
            '    val_loaders[length] = cycle(val_loader)\n\nfor i in range(10):\n    model.train()\n'
            '    for _ in range(GRADIENT_ACCUMULATE_EVERY):\n        ai.dataloader.fetch.start()\n'
            '        data = next(train_loader)\n        ai.dataloader.fetch.stop()\n'
            '        model(data).sum().backward()\n        optim.step()\n        optim.zero_grad()\n'
            '    if i % 5 == 0:\n        model.eval()\n        with torch.inference_mode():\n'
            '            for length in (2, 4):\n                val_loader = val_loaders[length]\n'
            '                ai.dataloader.fetch.start()\n                val_data = next(val_loader)\n'
            '                ai.dataloader.fetch.stop()\n                print(model(val_data).sum().item())\n',
        ),
        Case(
            # a function that draws next() in a loop of its own and keeps the batches runs a
            # batch loop; it does not hand batches to the epoch loop that calls it (open_clip's
            # evaluate, which would otherwise be decorated as the fetch around its own fetches)
            'import torch\nfrom torch.utils.data import DataLoader\n\n\ndef evaluate(model, loader):\n'
            '    it = iter(loader)\n    total = 0.0\n    while True:\n        batch = next(it, None)\n'
            '        if batch is None:\n            break\n        total += model(batch).sum().item()\n'
            '    return total\n\n\ndef train_one_epoch(model, opt, loader):\n    for x in loader:\n'
            '        model(x).sum().backward()\n        opt.step()\n\n\n'
            'def main(model, opt, loader, epochs):\n    for epoch in range(epochs):\n'
            '        train_one_epoch(model, opt, loader)\n        print(evaluate(model, loader))\n',
            'from dftracer.python import ai\nimport torch\nfrom torch.utils.data import DataLoader\n\n\n'
            'def evaluate(model, loader):\n    it = iter(loader)\n    total = 0.0\n    while True:\n'
            '        ai.dataloader.fetch.start()\n        batch = next(it, None)\n'
            '        ai.dataloader.fetch.stop()\n        if batch is None:\n            break\n'
            '        total += model(batch).sum().item()\n    return total\n\n\n'
            'def train_one_epoch(model, opt, loader):\n    for x in ai.dataloader.fetch.iter(loader):\n'
            '        model(x).sum().backward()\n        opt.step()\n\n\ndef main(model, opt, loader, epochs):\n'
            '    for epoch in range(epochs):\n        train_one_epoch(model, opt, loader)\n'
            '        print(evaluate(model, loader))\n',
        ),
    ]

    def run(self, ctx) -> None:
        loops = ctx.analysis("loops")
        graph = ctx.analysis("callgraph")
        producers: dict[str, str] = {}
        for facts in loops.of_kind("batch"):
            fs, fn = graph.functions[facts.function]
            names = ctx.names(fs.relpath)
            loop = facts.loop
            if facts.style == "next":
                for region in facts.fetch_regions:
                    self._start_stop(ctx, fs, fn, loop.line, region)
            elif facts.style == "producer":
                for p in facts.producers:
                    producers.setdefault(p, f"{fs.relpath}:{loop.line}")
            elif facts.style == "made":
                for function_id, stmt, line in facts.made:
                    self._wrap_made(ctx, graph, function_id, stmt, line, facts)
            elif facts.wraps_iterable and not facts.wrapped_by:
                # the tracing budget (--step-time) may leave out the loop body's event
                body = names.iter_options(body=ctx.analysis("overhead").loop_body)
                ctx.add_edit(fs.relpath, WrapIter(self.id, loop.line, f"batch loop: {facts.reason}", loop.stmt,
                                                  names.iter_callee("dataloader.fetch"), depth=facts.wrap_depth,
                                                  extra=body))
                if loop.has_break and ctx.mode != "validate":
                    ctx.report(Finding(self.id, "the loop can `break`: the iteration that breaks is not "
                                       "recorded (dftracer writes an iteration's fetch.iter/fetch.block events "
                                       "when the next batch is asked for, which a `break` never does)",
                                       fs.relpath, loop.line, loop.col, Severity.WARNING))
            if facts.anchored and ctx.mode != "validate":
                # provenance refines and never vetoes: the break is said, the fetch stays
                why, _ = self._why_unfed(graph, facts.function, fn, facts, self._flow_breaks(loops, facts))
                ctx.report(Finding(self.id, f"batch fetch placed from the step's own evidence "
                                   f"({facts.anchored.split(': ', 1)[-1]}); where the batch comes from was not "
                                   f"proved: {why}", fs.relpath, loop.line, loop.col, Severity.INFO))
        self._broken_chains(ctx, graph, loops)
        for function_id, where in sorted(producers.items()):
            pfs, pfn = graph.functions[function_id]
            if has_region(pfs, pfn, "dataloader.fetch"):
                continue
            ctx.add_edit(pfs.relpath, function_region(ctx.names(pfs.relpath), pfn, "dataloader.fetch", self.id,
                                                      f"produces the batches of the batch loop at {where}"))

    def _broken_chains(self, ctx, graph, loops) -> None:
        """Say where a loop runs a step on data whose fetch dftpass did not find, and why:
        never silent, never a guess. The loops are the innermost ones of their function that
        run a step (a backward pass, an optimizer step, a model call) and are neither batch
        nor epoch loops, outside every batch loop and the functions a batch loop calls."""
        batch = loops.of_kind("batch")
        per_batch = set()
        for facts in batch:
            for call, targets in graph.calls_with_targets(facts.function):
                if facts.loop.index in call.loops:
                    per_batch |= {t for target in targets for t in {target, *graph.reachable(target)}}
            per_batch |= set(facts.producers) | set(facts.feeders) | set(facts.sources)
        for (function_id, index), facts in sorted(loops.facts.items(), key=lambda kv: kv[0]):
            if facts.kind != "other" or function_id in per_batch:
                continue
            fs, fn = graph.functions[function_id]
            inner = loops.loop_and_descendants(function_id, index) - {index}
            outer = set()
            p = facts.loop.parent
            while p is not None:
                outer.add(p)
                p = fn.loops[p].parent
            if any(loops.facts[(function_id, i)].kind == "batch" for i in inner | outer):
                continue
            if any(does_step(graph, function_id, {i}) for i in inner) or not does_step(graph, function_id, {index}):
                continue
            if any(fn.yields):
                continue  # a generator's loop: its consumer has the steps
            owner = graph.class_of_method(function_id)
            if owner is not None and graph.is_module_class(owner):
                continue  # a model's own loop (a sampling loop in ``generate``): it draws no batches
            why, severity = self._why_unfed(graph, function_id, fn, facts, self._flow_breaks(loops, facts))
            if ctx.mode == "validate":
                # a limit of what dftpass can place, said by `run` and `plan`; in `validate`
                # nothing is missing that a run would write, so it fails no gate (a note)
                severity = Severity.INFO
            ctx.report(Finding(self.id, f"no batch fetch placed for the step in the loop at line {facts.loop.line}: "
                               f"{why}", fs.relpath, facts.loop.line, facts.loop.col, severity))

    @staticmethod
    def _flow_breaks(loops, facts) -> list[str]:
        """Where batch provenance's walk back from the loop's step stopped, and why."""
        flow = loops.dataflow
        if flow is None:
            return []
        fn = flow.graph.fn(facts.function)
        inside = loops.loop_and_descendants(facts.function, facts.loop.index)
        reasons = []
        for index, receiver in loops.consumers(facts.function, inside):
            call = fn.calls[index]
            for b in flow.derive_call_args(facts.function, call.line, call.col, receiver).breaks:
                if b.reason not in reasons:
                    reasons.append(b.reason)
        return reasons

    @staticmethod
    def _why_unfed(graph, function_id: str, fn, facts, breaks: list[str] = ()) -> tuple[str, Severity]:
        """The reason the loop's batch has no producer dftpass can follow, and how sure that is
        a gap (a warning) rather than full-batch training (a note). ``breaks``: where batch
        provenance's walk stopped (the more precise reason, when one names the value)."""
        loop = facts.loop

        def known(text: str, origins: list[str]) -> str:
            outside = [o.split(":", 1)[1] for o in origins if o.startswith("ext:")]
            if outside and len(outside) == len(origins):
                return f"{text} is built by {outside[0]}, outside the project, which dftpass cannot follow " \
                       "(rules.options.loops.loader_factories names loader factories)"
            return f"{text} holds {', '.join(o.split(':', 1)[1] for o in origins[:3])}, which is not a data " \
                   "loader dftpass knows (rules.options.loops.loader_factories names more)"

        def held(text: str) -> str:
            assigned = [a.value for a in fn.assigns if a.target == text and a.value]
            if text in fn.params:
                return f"{text} is a parameter whose callers dftpass cannot follow"
            if assigned:
                return f"{text} is built by {assigned[-1].replace('()', '(...)')}, a call dftpass cannot follow"
            named = [b for b in breaks if b.startswith(f"{text} ")]
            if named:
                return named[0]
            return f"dftpass cannot tell what {text} holds"

        for n in loop.next_calls:
            if n.iterator:
                origins = sorted(graph.values.of(function_id, n.iterator)) if graph.values is not None else []
                what = held(n.iterator) if not origins else known(n.iterator, origins)
                return f"the batch comes from next({n.iterator}), and {what}", Severity.WARNING
        if loop.kind == "for" and not loop.literal_iter and loop.layers[:1] and \
                loop.layers[0].callee.rsplit(".", 1)[-1] not in ("range", "trange", "count"):
            subject = loop.core or loop.iter_text
            origins = sorted(graph.values.of(function_id, subject)) if graph.values is not None and subject else []
            what = held(subject) if not origins else known(subject, origins)
            return f"the loop iterates {facts.subject or subject}, and {what}", Severity.WARNING
        if loop.kind == "for" and loop.core and not loop.layers:
            subject = loop.core
            origins = sorted(graph.values.of(function_id, subject)) if graph.values is not None else []
            if not origins:
                return f"the loop iterates {subject}, and {held(subject)}", Severity.WARNING
        return ("no call in the loop fetches a batch that dftpass can see: full-batch training, or a batch "
                "producer it does not know (rules.options.loops.batch_producer_pattern names more)", Severity.INFO)

    def _wrap_made(self, ctx, graph, function_id: str, stmt, line: int, facts) -> None:
        """``it = gen()`` -> ``it = ai.dataloader.fetch.iter(gen())``, unless it already is."""
        fs, fn = graph.functions[function_id]
        values = [a.value for a in fn.assigns if a.stmt == stmt and a.value]
        if any(is_node(fs, v.removesuffix("()"), "dataloader.fetch", "iter") for v in values):
            return
        names = ctx.names(fs.relpath)
        # no block event: between two next() calls of an iterator drawn from anywhere is no
        # loop body, and an endless stream's last block would span the rest of the run
        ctx.add_edit(fs.relpath, WrapValue(self.id, line, f"batch loop at line {facts.loop.line}: {facts.reason}",
                                           stmt, names.iter_callee("dataloader.fetch"),
                                           extra=names.iter_options(body=False)))

    def _start_stop(self, ctx, fs, fn, line: int, region) -> None:
        """``fetch.start()`` / ``.stop()`` around ``region`` (a statement), unless it already is."""
        before = calls_at(fn, sibling(region, -1))
        inside = [c for c in fn.calls if c.stmt[: len(region)] == region]
        if any(is_node(fs, c.callee, "dataloader.fetch", "start") for c in before) or \
                any(is_node(fs, w, "dataloader.fetch") for c in inside for w in c.withs):
            return
        names = ctx.names(fs.relpath)
        why = "next() from a data loader"
        ctx.add_edit(fs.relpath, InsertBefore(self.id, line, why, region, names.start("dataloader.fetch")))
        ctx.add_edit(fs.relpath, InsertAfter(self.id, line, why, region, names.stop("dataloader.fetch")))
