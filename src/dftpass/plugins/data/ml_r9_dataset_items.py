"""ML-R9: ``@ai.data.item`` on the function that produces one sample."""

from __future__ import annotations

from dftpass.api import (
    Case, dataset_sample_readers, Expect, Finding, function_region, has_region, InsertAfter, is_dataset_class,
    iterable_sample_spans, loader_datasets_seen, Pass,
    PassKind, per_sample_functions, sample_readers, Severity, WrapStmt,
)
# the recognisers live in knowledge/data.py (ML-R25 and ML-R27 need the same data path); the names
# stay importable from here


class DatasetItems(Pass):
    """Mark the function that produces one sample with ``@ai.data.item``.

    What it does:
        For each map-style data set (a class with ``__getitem__`` that subclasses a
        ``Dataset``, directly or through a library's data set class such as
        ``torchvision.datasets.CocoDetection``, or is handed to a ``DataLoader``), the
        function that really reads one
        sample gets ``@ai.data.item``: ``__getitem__`` itself, unless it only dispatches
        (its one project call is the one it returns, whatever it logs or counts first).
        Then the dispatch is followed, through factories (``self.reader`` set from
        ``ReaderFactory.get_reader(...)``), overrides and ``super()`` calls of any length,
        to the function that does the reading (DLIO marks its readers' ``read_index``);
        never both, and with several readers each gets its own. A batch producer that builds
        its batch sample by sample (``torch.stack([read(i) for i in ix])``) has the same
        role for the function called per sample, unless that function only transforms the
        sample it is handed (batch provenance: ``char_tensor(chunk)``; ML-R10 marks it).

        The item event carries the sample's bytes (``image_size``, as DLIO's authors put them):
        of the name the item returns (``x = ...; return x``), or of the sample a function it
        calls cuts and keeps (DLIO's ``get_sample``: ``image = self.open_file_map[f][...,
        i]``), measured by ``dftpass.runtime.nbytes`` while tracing.

        When some loader's data set is built where dftpass cannot see which class it is (a
        registry ``DATASETS[name](...)``, a configuration, a factory outside the project),
        every project class with the map-style protocol (``__getitem__`` and ``__len__``, not
        a model) is taken for a data set, and a note says it is unsure: an item region costs
        one event a sample, a missing one hides the loading.

        An iterable data set (``IterableDataset`` with a generator ``__iter__``) gets
        ``with ai.data.item:`` around the statements of its loop that come before the
        ``yield``: the sample's read and transforms, not the consumer's time after it.

    Why:
        ``item`` events run in the DataLoader workers (their own trace files): they show
        the time to produce each sample, which is what a data stall is made of.

    Example:
        ``def __getitem__(self, index): array = np.load(...); return transform(array)`` gets
        ``@ai.data.item``.

        A ``__getitem__`` that calls nothing and has no loop (``return self.x[i], self.y[i]``)
        only indexes memory: it gets no region (an info finding says so).

    Fix safety:
        Safe: the decorator keeps the signature; a dataset instance still pickles for
        spawn workers (methods are not pickled with instances). Iterable datasets
        (``__iter__`` generators) never get a decorator (it would time only the creation
        of the generator); their region is a ``with`` that closes before each ``yield``, so
        no region is open while the generator is suspended.

    Options:
        None.
    """

    id = "ML-R9"
    title = "Dataset items"
    kind = PassKind.TRANSFORM
    requires = ("callgraph", "loops", "batch_provenance")
    tags = ("data",)

    VALID = [
        # a function a producer calls per sample that only encodes the slice it is handed
        # (char-rnn's char_tensor): a transform (ML-R10's), not the sample's item
        "import random\n\nimport torch\n\n\ndef read_corpus(path):\n    return open(path).read()\n\n\n"
        "text = read_corpus('input.txt')\n\n\ndef encode(chunk):\n    return torch.tensor([ord(c) for c in chunk])\n\n\n"
        "def random_batch(n, size):\n    starts = [random.randint(0, len(text) - n - 1) for _ in range(size)]\n"
        "    return torch.stack([encode(text[s:s + n]) for s in starts])\n\n\n"
        "def main(model, opt):\n    for it in range(100):\n        model(random_batch(8, 4).float()).sum().backward()\n"
        "        opt.step()\n",
        # __getitem__ of a class that is not a data set
        "class Grid:\n    def __getitem__(self, key):\n        return key\n",
        # a data set in memory: indexing costs less than an event
        "import torch\nfrom torch.utils.data import Dataset\n\n\nclass Pairs(Dataset):\n    def __init__(self, n):\n"
        "        self.x = torch.randn(n, 4)\n\n    def __getitem__(self, i):\n        return self.x[i], i % 2\n",
    ]
    INVALID = [
        Case(
            # issue 39: a class with a data set's protocol (no Dataset base), built through a registry
            # (DATASETS[name](...)) where dftpass cannot see which class the loader gets: its item is marked, and a note says it is unsure;
            # a class with __getitem__ alone (no __len__) is not one
            'import numpy as np\n\n\nclass NpyFrames:\n    def __init__(self, n):\n'
            '        self.n = n\n\n    def __len__(self):\n        return self.n\n\n'
            '    def __getitem__(self, i):\n        return np.full((4,), i, dtype=np.float32)\n'
            '\n\nclass Other:\n    def __getitem__(self, key):\n        return key\n',
            'from dftracer.python import ai\nimport numpy as np\n\n\nclass NpyFrames:\n'
            '    def __init__(self, n):\n        self.n = n\n\n    def __len__(self):\n'
            '        return self.n\n\n    @ai.data.item\n    def __getitem__(self, i):\n'
            '        return np.full((4,), i, dtype=np.float32)\n\n\nclass Other:\n'
            '    def __getitem__(self, key):\n        return key\n',
            files={'train.py': 'import torch\nfrom torch.utils.data import DataLoader\nimport data\n\nDATASETS = {"frames": data.NpyFrames}\n\n\ndef build(cfg):\n    return DATASETS[cfg](16)\n\n\ndef main():\n    ds = build("frames")\n    loader = DataLoader(ds, batch_size=4)\n    model = torch.nn.Linear(4, 1)\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    for x in loader:\n        model(x).sum().backward()\n        opt.step()\n\n\nif __name__ == "__main__":\n    main()\n'},
            path='data.py',
            findings=(Expect("info", "NpyFrames has a data set's protocol", line=11),),
        ),
        Case(
            "import numpy as np\nfrom torch.utils.data import Dataset\n\n\nclass Samples(Dataset):\n"
            "    def __len__(self):\n        return 10\n\n    def __getitem__(self, index):\n"
            "        return np.load(f'{index}.npy')\n",
            "from dftracer.python import ai\nimport numpy as np\nfrom torch.utils.data import Dataset\n\n\n"
            "class Samples(Dataset):\n    def __len__(self):\n        return 10\n\n    @ai.data.item\n"
            "    def __getitem__(self, index):\n        return np.load(f'{index}.npy')\n",
        ),
        Case(
            # a reader chosen by a factory does the reading; __getitem__ only dispatches
            "import numpy as np\nfrom torch.utils.data import Dataset\n\n\nclass NpyReader:\n"
            "    def read_index(self, i):\n        return np.load(f'{i}.npy')\n\n\nclass Factory:\n"
            "    @staticmethod\n    def get_reader(kind):\n        if kind == 'npy':\n            return NpyReader()\n"
            "        raise ValueError(kind)\n\n\nclass Samples(Dataset):\n    def __init__(self, kind):\n"
            "        self.reader = Factory.get_reader(kind)\n        self.count = 0\n\n"
            "    def __getitem__(self, i):\n        self.count += 1\n        print('reading', i)\n"
            "        return self.reader.read_index(i)\n",
            "from dftracer.python import ai\nimport numpy as np\nfrom torch.utils.data import Dataset\n\n\n"
            "class NpyReader:\n    @ai.data.item\n    def read_index(self, i):\n        return np.load(f'{i}.npy')\n\n\n"
            "class Factory:\n    @staticmethod\n    def get_reader(kind):\n        if kind == 'npy':\n"
            "            return NpyReader()\n        raise ValueError(kind)\n\n\nclass Samples(Dataset):\n"
            "    def __init__(self, kind):\n        self.reader = Factory.get_reader(kind)\n        self.count = 0\n\n"
            "    def __getitem__(self, i):\n        self.count += 1\n        print('reading', i)\n"
            "        return self.reader.read_index(i)\n",
        ),
        Case(
            "import torch\n\n\nclass Reader(torch.utils.data.Dataset):\n    def __getitem__(self, i):\n"
            "        return self.read_index(i)\n\n    def read_index(self, i):\n        with open(str(i), 'rb') as f:\n"
            "            return f.read()\n",
            "from dftracer.python import ai\nimport torch\n\n\nclass Reader(torch.utils.data.Dataset):\n"
            "    def __getitem__(self, i):\n        return self.read_index(i)\n\n    @ai.data.item\n"
            "    def read_index(self, i):\n        with open(str(i), 'rb') as f:\n            return f.read()\n",
        ),
        Case(
            # an iterable data set: the statements before the yield, not the generator's creation
            "import numpy as np\nimport torch\n\n\nclass Stream(torch.utils.data.IterableDataset):\n"
            "    def __iter__(self):\n        m = np.memmap('x.bin', dtype=np.float32, mode='r')\n"
            "        for i in range(len(m) // 4):\n            x = torch.from_numpy(m[4 * i:4 * i + 4].copy())\n"
            "            yield x\n",
            "from dftracer.python import ai\nimport numpy as np\nimport torch\n\n\n"
            "class Stream(torch.utils.data.IterableDataset):\n"
            "    def __iter__(self):\n        m = np.memmap('x.bin', dtype=np.float32, mode='r')\n"
            "        for i in range(len(m) // 4):\n            with ai.data.item:\n"
            "                x = torch.from_numpy(m[4 * i:4 * i + 4].copy())\n"
            "                ai.data.item.update(image_size=x.element_size() * x.nelement())\n"
            "            yield x\n",
        ),
        Case(
            # a data set whose item runs its base's (the zoo's NoisyNpy adds noise to NpyDataset's sample):
            # the base's region times the sample; one on both would nest the node (ML-R22)
            'import numpy as np\nimport torch\nfrom torch.utils.data import DataLoader, Dataset\n\n\n'
            'class Npy(Dataset):\n    def __len__(self):\n        return 8\n\n    def __getitem__(self, i):\n'
            '        return torch.from_numpy(np.load(f"{i}.npy"))\n\n\nclass NoisyNpy(Npy):\n'
            '    def __getitem__(self, i):\n        x = super().__getitem__(i)\n'
            '        return x + 0.1 * torch.randn_like(x)\n\n\ndef fit(model, opt):\n'
            '    for x in DataLoader(NoisyNpy(), batch_size=4):\n        model(x).sum().backward()\n'
            '        opt.step()\n',
            'from dftracer.python import ai\nimport numpy as np\nimport torch\n'
            'from torch.utils.data import DataLoader, Dataset\n\n\nclass Npy(Dataset):\n'
            '    def __len__(self):\n        return 8\n\n    @ai.data.item\n    def __getitem__(self, i):\n'
            '        return torch.from_numpy(np.load(f"{i}.npy"))\n\n\nclass NoisyNpy(Npy):\n'
            '    def __getitem__(self, i):\n        x = super().__getitem__(i)\n'
            '        return x + 0.1 * torch.randn_like(x)\n\n\ndef fit(model, opt):\n'
            '    for x in DataLoader(NoisyNpy(), batch_size=4):\n        model(x).sum().backward()\n'
            '        opt.step()\n',
        ),
        Case(
            # DLIO's readers: the item (read_index) calls get_sample, which cuts the sample from the opened
            # file and keeps it only for the cost of reading it: the item event gets the sample's bytes
            'import numpy as np\nfrom torch.utils.data import DataLoader, Dataset\n\n\nclass Reader:\n'
            '    def __init__(self, files):\n        self.files = files\n        self.open_file_map = {}\n\n'
            '    def get_sample(self, filename, sample_index):\n        raise NotImplementedError\n\n'
            '    def read_index(self, index):\n        filename, sample_index = self.files[index]\n'
            '        if filename not in self.open_file_map:\n'
            '            self.open_file_map[filename] = np.load(filename)\n'
            '        self.get_sample(filename, sample_index)\n        return index\n\n\n'
            'class NpyReader(Reader):\n    def get_sample(self, filename, sample_index):\n'
            '        image = self.open_file_map[filename][..., sample_index]\n\n\nclass Samples(Dataset):\n'
            '    def __init__(self, reader):\n        self.reader = reader\n\n    def __len__(self):\n'
            '        return 8\n\n    def __getitem__(self, i):\n        return self.reader.read_index(i)\n\n\n'
            'def fit(model, opt, files):\n    for x in DataLoader(Samples(NpyReader(files)), batch_size=4):\n'
            '        model(x).sum().backward()\n        opt.step()\n',
            'import dftpass.runtime as _dft_runtime\nfrom dftracer.python import ai, env as _dft_env\n'
            'import numpy as np\nfrom torch.utils.data import DataLoader, Dataset\n\n\nclass Reader:\n'
            '    def __init__(self, files):\n        self.files = files\n        self.open_file_map = {}\n\n'
            '    def get_sample(self, filename, sample_index):\n        raise NotImplementedError\n\n'
            '    @ai.data.item\n    def read_index(self, index):\n'
            '        filename, sample_index = self.files[index]\n'
            '        if filename not in self.open_file_map:\n'
            '            self.open_file_map[filename] = np.load(filename)\n'
            '        self.get_sample(filename, sample_index)\n        return index\n\n\n'
            'class NpyReader(Reader):\n    def get_sample(self, filename, sample_index):\n'
            '        image = self.open_file_map[filename][..., sample_index]\n'
            '        if _dft_env.DFTRACER_ENABLE:\n'
            '            ai.data.item.update(image_size=_dft_runtime.nbytes(image))\n\n\n'
            'class Samples(Dataset):\n    def __init__(self, reader):\n        self.reader = reader\n\n'
            '    def __len__(self):\n        return 8\n\n    def __getitem__(self, i):\n'
            '        return self.reader.read_index(i)\n\n\ndef fit(model, opt, files):\n'
            '    for x in DataLoader(Samples(NpyReader(files)), batch_size=4):\n'
            '        model(x).sum().backward()\n        opt.step()\n',
        ),
        Case(
            # an item that returns the sample it made: its bytes, measured while tracing (np.load may give
            # an array or an NpzFile: dftpass.runtime.nbytes)
            'import numpy as np\nimport torch\nfrom torch.utils.data import DataLoader, Dataset\n\n\n'
            'class Shards(Dataset):\n    def __init__(self, paths):\n        self.paths = paths\n\n'
            '    def __len__(self):\n        return len(self.paths)\n\n    def __getitem__(self, i):\n'
            '        x = np.load(self.paths[i])\n        x = torch.from_numpy(x).float() / 255\n'
            '        return x\n\n\ndef fit(model, opt, paths):\n'
            '    for x in DataLoader(Shards(paths), batch_size=4):\n        model(x).sum().backward()\n'
            '        opt.step()\n',
            'import dftpass.runtime as _dft_runtime\nfrom dftracer.python import ai, env as _dft_env\n'
            'import numpy as np\nimport torch\nfrom torch.utils.data import DataLoader, Dataset\n\n\n'
            'class Shards(Dataset):\n    def __init__(self, paths):\n        self.paths = paths\n\n'
            '    def __len__(self):\n        return len(self.paths)\n\n    @ai.data.item\n'
            '    def __getitem__(self, i):\n        x = np.load(self.paths[i])\n'
            '        x = torch.from_numpy(x).float() / 255\n        if _dft_env.DFTRACER_ENABLE:\n'
            '            ai.data.item.update(image_size=_dft_runtime.nbytes(x))\n        return x\n\n\n'
            'def fit(model, opt, paths):\n    for x in DataLoader(Shards(paths), batch_size=4):\n'
            '        model(x).sum().backward()\n        opt.step()\n',
        ),
    ]

    def run(self, ctx) -> None:
        graph = ctx.analysis("callgraph")
        loops = ctx.analysis("loops")
        items: dict[str, str] = {}
        seen, _ = loader_datasets_seen(graph)
        for name, getitem_id, chain in dataset_sample_readers(graph):
            if any(has_region(*graph.functions[c], "data.item") for c in chain | {getitem_id}):
                continue
            class_id = graph.class_of_method(getitem_id)
            if class_id not in seen and not is_dataset_class(graph, class_id):
                # a loader's data set is built where dftpass cannot see (a registry, a config):
                # an item region costs one event a sample, a missing one hides the loading
                gfs, gfn = graph.functions[getitem_id]
                ctx.report(Finding(self.id, f"{name} has a data set's protocol (__getitem__, __len__) and a "
                                   "loader's data set is built where dftpass cannot see which class it is: marked "
                                   "as a data set, unsure", gfs.relpath, gfn.line, gfn.col, Severity.INFO))
            for target in chain:
                items.setdefault(target, f"produces one sample of {name}")
        # a batch producer that builds its batch sample by sample (``[read(i) for i in ix]``)
        transforms = ctx.analysis("batch_provenance").transforms()
        for target, producer in per_sample_functions(graph, loops).items():
            if target in transforms:
                continue  # it only transforms a sample it is handed (char-rnn's char_tensor): ML-R10's
            items.setdefault(target, f"produces one sample of the batch {producer}() builds")
        for span in iterable_sample_spans(graph):
            sfs, sfn = graph.functions[span.function]
            if has_region(sfs, sfn, "data.item"):
                continue
            names = ctx.names(sfs.relpath)
            tail = (names.node_update("data.item", image_size=names.image_size(span.tensor, "tensor")),) \
                if span.tensor else ()
            ctx.add_edit(sfs.relpath, WrapStmt(self.id, span.line, f"produces one sample of {span.dataset} "
                                               "(the statements before its yield)", span.first,
                                               names.node("data.item"), tail=tail,
                                               through=span.last if span.last != span.first else None))
        # an item that runs another's (``return super().__getitem__(i)`` plus noise): the inner
        # one's region times the sample; two would nest the node, which keeps the inner event only
        # (the inner one planned now, or holding its region from an earlier run)
        outer = {t for t in items if any(o != t and (o in items or has_region(*graph.functions[o], "data.item"))
                                         for o in graph.reachable(t) if o in graph.functions)}
        for target, why in sorted(items.items()):
            tfs, tfn = graph.functions[target]
            if has_region(tfs, tfn, "data.item") or target in outer:
                continue
            if not tfn.calls and not tfn.loops:
                # ``return self.x[i], self.y[i]``: an event (~8 µs traced) would cost more
                # than the sample (bench/overhead.py measured +17 % on a 1 ms step)
                ctx.report(Finding(self.id, f"{tfn.qualname} only indexes data in memory: no item region (its "
                                   "event would cost more than the sample)", tfs.relpath, tfn.line, tfn.col,
                                   Severity.INFO))
                continue
            ctx.add_edit(tfs.relpath, function_region(ctx.names(tfs.relpath), tfn, "data.item", self.id, why))
            self._sample_sizes(ctx, graph, target)

    def _sample_sizes(self, ctx, graph, item: str) -> None:
        """The item event's ``image_size``: the sample the item returns (``x = ...; return
        x``), or the one a function it calls cuts and keeps (DLIO's readers' ``get_sample``:
        ``image = self.open_file_map[filename][..., sample_index]``, read for its cost and
        dropped). The update sticks to the ``data.item`` node, so the open item event carries
        it; it runs only while tracing (the sample's type is known then: ``nbytes``)."""
        spots = [(item, _returned_sample(graph.fn(item)))]
        for call, targets in graph.calls_with_targets(item):
            spots += [(t, _kept_sample(graph.fn(t))) for t in sorted(targets) if t in graph.functions]
        for function_id, assign in spots:
            if assign is None:
                continue
            fs = graph.file_of(function_id)
            names = ctx.names(fs.relpath)
            code = names.when_tracing(names.node_update("data.item", image_size=names.image_size(assign.target, "any")))
            ctx.add_edit(fs.relpath, InsertAfter(self.id, assign.line, f"the size of the sample {assign.target}",
                                                 assign.stmt, code))


def _top_level(fn, stmt) -> int | None:
    """The index of ``stmt`` among the function's own statements (None if it is nested)."""
    return stmt[len(fn.stmt)][1] if len(stmt) == len(fn.stmt) + 1 else None


def _last_index(fn) -> int:
    return max((s[len(fn.stmt)][1] for s in [*(c.stmt for c in fn.calls), *(a.stmt for a in fn.assigns)]
                if len(s) > len(fn.stmt)), default=-1)


def _returned_sample(fn):
    """The last top-level assignment of the name the function returns (``return x``)."""
    named = [r for r in fn.returns if r and r.isidentifier()]
    if len(named) != 1 or len(fn.returns) != 1:
        return None
    found = [a for a in fn.assigns if a.target == named[0] and _top_level(fn, a.stmt) is not None]
    return found[-1] if found else None


def _kept_sample(fn):
    """The function's last statement, when it binds a plain name to a subscript that nothing
    reads after it (a sample cut from what was read, kept only for the cost of reading it)."""
    if fn.returns or not fn.assigns:
        return None
    last = fn.assigns[-1]
    index = _top_level(fn, last.stmt)
    if index is None or index != _last_index(fn) or not last.target.isidentifier() or not (last.value or "").endswith("[]"):
        return None
    return last
