"""ML-R10: ``ai.data.preprocess`` on transforms, ``ai.data.preprocess.derive(name="collate")`` on collate functions."""

from __future__ import annotations

import re

from dftpass.api import (
    aliases, Case, dataset_sample_readers, Decorate, does_io, Edit, FileNames, function_region, has_region,
    is_derived, is_node, needs_body_region, nesting_rank, origin_kind as kind, origin_subject as subject, Pass,
    PassKind, unwrappable, WrapBody, WrapStmt,
)

NODE = "data.preprocess"
COLLATE = "collate"
#: keywords that hand a data set (or a data module) the transform it applies per sample
TRANSFORM_KEYWORDS = frozenset({"transform", "target_transform", "transforms", "pre_transform", "transform_fn",
                                "preprocess", "preprocess_fn", "augmentation", "augmentations"})
#: methods that attach a per-sample transform to a data set (Hugging Face ``datasets``)
TRANSFORM_METHODS = frozenset({"with_transform", "set_transform"})
#: keywords that hand a loader its collate function (``DataLoader``, transformers' ``Trainer``)
COLLATE_KEYWORDS = frozenset({"collate_fn", "data_collator"})
#: ``self.<attr>(x)`` in a data set: the transform it was given
TRANSFORM_ATTR = re.compile(r"(?i)^_?(\w+_)?(transforms?|tfms?|tforms?|augment\w*|augs?|preprocess\w*|pre_process\w*)$")
#: words of a function or class name that say it transforms a sample (``random_crop``,
#: ``RandomResizedCrop``, ``normalize``, ``tokenize``)
_WORD_STEMS = ("preprocess", "transform", "augment", "normaliz", "normalis", "standardiz", "tokeniz", "resiz",
               "rescal", "crop", "flip", "rotat", "jitter", "distort", "padd")
_WORDS = frozenset({"aug", "pad", "tfm", "blur", "noise"})
#: library calls that apply a list of transforms in turn (their arguments' project
#: transforms run per sample, inside the library)
COMPOSERS = frozenset({"Compose", "RandomApply", "RandomChoice", "RandomOrder", "OneOf", "SomeOf", "Sequential"})

_IMPORT = "from dftracer.python import ai\n"


def transform_named(name: str) -> bool:
    """Whether a function or class name says it transforms a sample."""
    words = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", name).lower().strip("_").split("_")
    return any(w in _WORDS or w.startswith(_WORD_STEMS) for w in words)


class PreprocessCollate(Pass):
    """Mark transforms with ``ai.data.preprocess`` and collate functions with its ``collate`` child.

    What it does:
        *Preprocess.* In the data path (each data set's ``__getitem__`` and the readers it
        dispatches to, ML-R9's targets), the project functions applied to a sample get
        ``@ai.data.preprocess``: what ``self.transform(x)`` (also ``transforms``,
        ``target_transform``, ``augment``, ``preprocess`` ...) runs when the call graph
        resolves it to project code (a function, or the ``__call__`` of a transform class),
        and project functions called there whose name says they transform (``normalize``,
        ``random_crop``, ``self.preprocess``, ``tokenize``). Outside project data sets, a
        project transform handed to a library data set (``ImageFolder(root,
        transform=AddNoise())``, ``transform=T.Compose([AddNoise(), T.ToTensor()])``,
        ``ds.with_transform(fn)``) gets the decorator on its ``__call__`` or function.
        When ``self.transform`` holds only library code (a torchvision ``Compose`` passed
        in: the most common shape), the statement in ``__getitem__`` that calls it is
        wrapped in ``with ai.data.preprocess:``; a ``__getitem__`` that reads its sample and
        then transforms it in its own statements (resizes, a crop, scaling) gets the region
        around those statements, from the first after the read to the last before the
        ``return``. Whatever their names, the project functions
        a step's data passes through on its way from where it is read (batch provenance:
        ``char_tensor(chunk)`` called per sample by a batch producer, ``mnist()`` scaling a
        whole data set after reading it) are transforms too; the outermost one gets the region.

        *Collate.* The project function or class (its ``__call__``) given as
        ``collate_fn=`` (``DataLoader``) or ``data_collator=`` (transformers' ``Trainer``),
        also through ``functools.partial``, gets ``@ai.data.preprocess.derive(name="collate")``:
        events named ``preprocess.collate``.

        ``ai`` nodes are not re-entrant: a transform that calls another (a ``preprocess``
        method calling ``normalize``, a project ``Compose`` calling its members) keeps only
        the outermost region, so its event covers the whole preprocessing; the collate
        child is a node of its own, so a collate function may run preprocessing inside.

    Why:
        Preprocessing and collation run in the DataLoader workers, once per sample and once
        per batch: with ``item`` (ML-R9) they split a slow data path into reading, transforming
        and batching.

    Example:
        ``img = self.transform(img)`` in ``__getitem__``, where ``transform`` is a
        ``transforms.Compose([...])`` passed in, becomes ``with ai.data.preprocess:`` around
        that statement; ``DataLoader(ds, collate_fn=pad_collate)`` puts
        ``@ai.data.preprocess.derive(name="collate")`` on ``pad_collate``.

    Fix safety:
        Safe. The decorator is ``functools.wraps``-style and keeps a module-level function
        picklable (spawn/forkserver workers pickle ``collate_fn`` and the data set); the
        ``derive(...)`` in the decorator runs once at import, tracing on or off (~16 µs, then
        cached by name). Generators and async functions are left alone (a region would span
        the consumer's time). Lambdas cannot be decorated (``collate_fn=lambda b: ...``).
        Library data sets with library transforms (pytorch/examples' MNIST and ImageNet:
        ``datasets.MNIST(..., transform=transforms.Compose([...]))``) run no project code per
        sample, so nothing is annotated: wrapping the transform object itself would make it a
        local function that spawn workers cannot pickle. Functions already carrying the
        region, or reached from one, are left alone.

    Options:
        None.
    """

    id = "ML-R10"
    title = "Preprocess and collate"
    kind = PassKind.TRANSFORM
    requires = ("callgraph", "batch_provenance")
    after = ("ML-R9",)
    tags = ("data",)

    VALID = [
        # pytorch/examples mnist: a library data set with library transforms runs no project
        # code per sample
        "import torch\nfrom torchvision import datasets, transforms\n\n\ndef loaders(batch_size):\n"
        "    transform = transforms.Compose([transforms.ToTensor(), transforms.Normalize((0.1307,), (0.3081,))])\n"
        "    train = datasets.MNIST('../data', train=True, download=True, transform=transform)\n"
        "    return torch.utils.data.DataLoader(train, batch_size=batch_size)\n",
        # already annotated by hand; a lambda collate cannot be decorated
        "import numpy as np\nfrom dftracer.python import ai\nfrom torch.utils.data import DataLoader, Dataset\n\n\n"
        "@ai.data.preprocess\ndef normalize(x):\n    return (x - x.mean()) / x.std()\n\n\n"
        "@ai.data.preprocess.derive(name='collate')\ndef stack(batch):\n    return np.stack(batch)\n\n\n"
        "class Arrays(Dataset):\n    def __getitem__(self, i):\n        return normalize(np.load(f'{i}.npy'))\n\n\n"
        "def loaders():\n"
        "    return DataLoader(Arrays(), collate_fn=stack), DataLoader(Arrays(), collate_fn=lambda b: b)\n",
        # helpers of __getitem__ that do not transform the sample
        "import numpy as np\nfrom torch.utils.data import Dataset\n\n\nclass Arrays(Dataset):\n"
        "    def _path(self, i):\n        return f'{i}.npy'\n\n    def __getitem__(self, i):\n"
        "        return np.load(self._path(i))\n",
    ]
    INVALID = [
        Case(
            # dlrm's shape: the training program hands its loader a collate function chosen into a variable;
            # the data module's own smoke test uses one of them too: both are the training program's (what loaders
            # run on its behalf is in its reach), so neither is taken for code only the untraced smoke test runs
            'import torch\nfrom torch.utils.data import DataLoader\n\n\n'
            'def collate_offset(batch):\n    return torch.stack(batch)\n\n\n'
            'def collate_length(batch):\n    return torch.stack(batch)\n\n\n'
            'def make_loader(ds, by_length):\n    if ds:\n        collate = collate_offset\n'
            '        if by_length:\n            collate = collate_length\n'
            '        loader = DataLoader(ds, collate_fn=collate)\n    else:\n'
            "        loader = DataLoader([])\n    return loader\n\n\nif __name__ == '__main__':\n"
            '    for b in DataLoader([torch.zeros(2)] * 4, collate_fn=collate_offset):\n'
            '        print(b)\n',
            'from dftracer.python import ai\nimport torch\n'
            'from torch.utils.data import DataLoader\n\n\n'
            '@ai.data.preprocess.derive(name="collate")\ndef collate_offset(batch):\n'
            '    return torch.stack(batch)\n\n\n@ai.data.preprocess.derive(name="collate")\n'
            'def collate_length(batch):\n    return torch.stack(batch)\n\n\n'
            'def make_loader(ds, by_length):\n    if ds:\n        collate = collate_offset\n'
            '        if by_length:\n            collate = collate_length\n'
            '        loader = DataLoader(ds, collate_fn=collate)\n    else:\n'
            "        loader = DataLoader([])\n    return loader\n\n\nif __name__ == '__main__':\n"
            '    for b in DataLoader([torch.zeros(2)] * 4, collate_fn=collate_offset):\n'
            '        print(b)\n',
            files={'train.py': "import torch\nfrom data import make_loader\n\n\ndef main():\n    model = torch.nn.Linear(2, 1)\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    for x in make_loader([torch.zeros(2)] * 4, False):\n        model(x).sum().backward()\n        opt.step()\n\n\nif __name__ == '__main__':\n    main()\n"},
            path='data.py',
        ),
        Case(
            # the common shape: a project data set applies the torchvision Compose it is given
            "from PIL import Image\nfrom torch.utils.data import Dataset\nfrom torchvision import transforms\n\n\n"
            "class Folder(Dataset):\n    def __init__(self, paths, transform=None):\n        self.paths = paths\n"
            "        self.transform = transform\n\n    def __getitem__(self, index):\n"
            "        img = Image.open(self.paths[index]).convert('RGB')\n        if self.transform is not None:\n"
            "            img = self.transform(img)\n        return img\n\n\n"
            "def build(paths):\n    return Folder(paths, transform=transforms.Compose([transforms.ToTensor()]))\n",
            _IMPORT + "from PIL import Image\nfrom torch.utils.data import Dataset\n"
            "from torchvision import transforms\n\n\n"
            "class Folder(Dataset):\n    def __init__(self, paths, transform=None):\n        self.paths = paths\n"
            "        self.transform = transform\n\n    def __getitem__(self, index):\n"
            "        img = Image.open(self.paths[index]).convert('RGB')\n        if self.transform is not None:\n"
            "            with ai.data.preprocess:\n                img = self.transform(img)\n        return img\n\n\n"
            "def build(paths):\n    return Folder(paths, transform=transforms.Compose([transforms.ToTensor()]))\n",
        ),
        Case(
            # a project transform class inside a torchvision Compose, given to a library data set
            "import torch\nfrom torchvision import datasets, transforms\n\n\nclass AddGaussianNoise:\n"
            "    def __init__(self, std=0.1):\n        self.std = std\n\n    def __call__(self, tensor):\n"
            "        return tensor + torch.randn(tensor.size()) * self.std\n\n\n"
            "def train_set(root):\n    tf = transforms.Compose([transforms.ToTensor(), AddGaussianNoise(0.2)])\n"
            "    return datasets.ImageFolder(root, transform=tf)\n",
            _IMPORT + "import torch\nfrom torchvision import datasets, transforms\n\n\nclass AddGaussianNoise:\n"
            "    def __init__(self, std=0.1):\n        self.std = std\n\n    @ai.data.preprocess\n"
            "    def __call__(self, tensor):\n        return tensor + torch.randn(tensor.size()) * self.std\n\n\n"
            "def train_set(root):\n    tf = transforms.Compose([transforms.ToTensor(), AddGaussianNoise(0.2)])\n"
            "    return datasets.ImageFolder(root, transform=tf)\n",
        ),
        Case(
            # collate functions: a module-level function (also through partial) and a class
            "import functools\n\nimport torch\nfrom torch.utils.data import DataLoader\n\n\n"
            "def pad_collate(batch, pad_id=0):\n"
            "    return torch.nn.utils.rnn.pad_sequence(batch, padding_value=pad_id)\n\n\n"
            "class Collator:\n    def __call__(self, batch):\n        return torch.stack(batch)\n\n\n"
            "def loaders(train, val):\n"
            "    a = DataLoader(train, batch_size=8, collate_fn=functools.partial(pad_collate, pad_id=1))\n"
            "    b = DataLoader(val, batch_size=8, collate_fn=Collator())\n    return a, b\n",
            _IMPORT + "import functools\n\nimport torch\nfrom torch.utils.data import DataLoader\n\n\n"
            "@ai.data.preprocess.derive(name=\"collate\")\n"
            "def pad_collate(batch, pad_id=0):\n"
            "    return torch.nn.utils.rnn.pad_sequence(batch, padding_value=pad_id)\n\n\n"
            "class Collator:\n    @ai.data.preprocess.derive(name=\"collate\")\n    def __call__(self, batch):\n"
            "        return torch.stack(batch)\n\n\n"
            "def loaders(train, val):\n"
            "    a = DataLoader(train, batch_size=8, collate_fn=functools.partial(pad_collate, pad_id=1))\n"
            "    b = DataLoader(val, batch_size=8, collate_fn=Collator())\n    return a, b\n",
        ),
        Case(
            # nested transforms: only the outermost gets the region (nodes are not re-entrant), even
            # where the inner one also runs alone (Plain): nothing is ever nested
            "import numpy as np\nfrom torch.utils.data import Dataset\n\n\ndef normalize(x):\n"
            "    return (x - x.mean()) / (x.std() + 1e-6)\n\n\nclass Arrays(Dataset):\n"
            "    def preprocess(self, x):\n        return normalize(x[:, ::-1])\n\n    def __getitem__(self, i):\n"
            "        return self.preprocess(np.load(f'{i}.npy'))\n\n\nclass Plain(Arrays):\n"
            "    def __getitem__(self, i):\n        return normalize(np.load(f'{i}.npy'))\n",
            _IMPORT + "import numpy as np\nfrom torch.utils.data import Dataset\n\n\ndef normalize(x):\n"
            "    return (x - x.mean()) / (x.std() + 1e-6)\n\n\nclass Arrays(Dataset):\n"
            "    @ai.data.preprocess\n    def preprocess(self, x):\n        return normalize(x[:, ::-1])\n\n"
            "    def __getitem__(self, i):\n        return self.preprocess(np.load(f'{i}.npy'))\n\n\n"
            "class Plain(Arrays):\n    def __getitem__(self, i):\n        return normalize(np.load(f'{i}.npy'))\n",
        ),
        Case(
            # a project transform given to a project data set: the call resolves to its __call__
            "import random\n\nimport numpy as np\nfrom torch.utils.data import Dataset\n\n\nclass RandomFlip:\n"
            "    def __call__(self, x):\n        return x[:, ::-1] if random.random() < 0.5 else x\n\n\n"
            "class Arrays(Dataset):\n    def __init__(self, files, transform=None):\n        self.files = files\n"
            "        self.transform = transform\n\n    def __getitem__(self, i):\n        x = np.load(self.files[i])\n"
            "        return self.transform(x), i\n\n\n"
            "def build(files):\n    return Arrays(files, transform=RandomFlip())\n",
            _IMPORT + "import random\n\nimport numpy as np\nfrom torch.utils.data import Dataset\n\n\n"
            "class RandomFlip:\n"
            "    @ai.data.preprocess\n"
            "    def __call__(self, x):\n        return x[:, ::-1] if random.random() < 0.5 else x\n\n\n"
            "class Arrays(Dataset):\n    def __init__(self, files, transform=None):\n        self.files = files\n"
            "        self.transform = transform\n\n    def __getitem__(self, i):\n        x = np.load(self.files[i])\n"
            "        return self.transform(x), i\n\n\n"
            "def build(files):\n    return Arrays(files, transform=RandomFlip())\n",
        ),
        Case(
            # a producer no name gives away calls a per-sample encoder (batch provenance): the
            # encoder transforms what the step consumes, so it is the preprocessing
            "import random\n\nimport torch\n\n\ndef read_corpus(path):\n    return open(path).read()\n\n\n"
            "text = read_corpus('input.txt')\n\n\ndef encode(chunk):\n"
            "    return torch.tensor([ord(c) for c in chunk])\n\n\ndef random_chunk(n):\n"
            "    start = random.randint(0, len(text) - n - 1)\n    return encode(text[start:start + n])\n\n\n"
            "def train(model, opt, inp):\n    model(inp.float()).sum().backward()\n    opt.step()\n\n\n"
            "def main(model, opt):\n    for it in range(100):\n        train(model, opt, random_chunk(8))\n",
            "from dftracer.python import ai\nimport random\n\nimport torch\n\n\ndef read_corpus(path):\n"
            "    return open(path).read()\n\n\ntext = read_corpus('input.txt')\n\n\n@ai.data.preprocess\n"
            "def encode(chunk):\n    return torch.tensor([ord(c) for c in chunk])\n\n\ndef random_chunk(n):\n"
            "    start = random.randint(0, len(text) - n - 1)\n    return encode(text[start:start + n])\n\n\n"
            "def train(model, opt, inp):\n    model(inp.float()).sum().backward()\n    opt.step()\n\n\n"
            "def main(model, opt):\n    for it in range(100):\n        train(model, opt, random_chunk(8))\n",
        ),
        Case(
            # improved-diffusion's __getitem__: it reads the image, then resizes, converts and scales
            # it in its own statements: those statements are the preprocessing
            'import numpy as np\nfrom PIL import Image\nfrom torch.utils.data import DataLoader, Dataset\n\n\n'
            'class Images(Dataset):\n    def __init__(self, paths, size):\n'
            '        self.paths, self.size = paths, size\n\n    def __len__(self):\n'
            '        return len(self.paths)\n\n    def __getitem__(self, i):\n'
            '        with open(self.paths[i], "rb") as f:\n            img = Image.open(f)\n'
            '            img.load()\n        img = img.resize((self.size, self.size), resample=Image.BICUBIC)\n'
            '        arr = np.array(img.convert("RGB"))\n        arr = arr.astype(np.float32) / 127.5 - 1\n'
            '        return np.transpose(arr, [2, 0, 1])\n\n\ndef fit(model, opt, paths):\n'
            '    for x in DataLoader(Images(paths, 32), batch_size=4):\n        model(x).sum().backward()\n'
            '        opt.step()\n',
            'from dftracer.python import ai\nimport numpy as np\nfrom PIL import Image\n'
            'from torch.utils.data import DataLoader, Dataset\n\n\nclass Images(Dataset):\n'
            '    def __init__(self, paths, size):\n        self.paths, self.size = paths, size\n\n'
            '    def __len__(self):\n        return len(self.paths)\n\n    def __getitem__(self, i):\n'
            '        with open(self.paths[i], "rb") as f:\n            img = Image.open(f)\n'
            '            img.load()\n        with ai.data.preprocess:\n'
            '            img = img.resize((self.size, self.size), resample=Image.BICUBIC)\n'
            '            arr = np.array(img.convert("RGB"))\n'
            '            arr = arr.astype(np.float32) / 127.5 - 1\n'
            '        return np.transpose(arr, [2, 0, 1])\n\n\ndef fit(model, opt, paths):\n'
            '    for x in DataLoader(Images(paths, 32), batch_size=4):\n        model(x).sum().backward()\n'
            '        opt.step()\n',
        ),
    ]

    def run(self, ctx) -> None:
        graph = ctx.analysis("callgraph")
        self.graph = graph
        pre: dict[str, str] = {}
        wraps: dict[tuple[str, tuple], tuple[str, int, str]] = {}
        collate: dict[str, str] = {}
        producers: set[str] = set()
        readers: set[str] = set()
        project_datasets: set[str] = set()
        for name, getitem_id, found in dataset_sample_readers(graph):
            producers |= {getitem_id, *found}
            readers |= found
            project_datasets.add(graph.class_of_method(getitem_id) or "")
        # transforms applied in the project's own data path
        for producer in sorted(producers):
            fs, fn = graph.functions[producer]
            if fn.is_generator or fn.is_async:
                continue
            for i, call in enumerate(fn.calls):
                attr = call.callee[5:] if call.callee.startswith("self.") and call.callee.count(".") == 1 else ""
                by_attr = bool(attr and TRANSFORM_ATTR.match(attr))
                targets = [t for t in graph.targets(producer, i) if not t.endswith(".__init__")]
                if targets:
                    for t in targets:
                        if t not in readers and (by_attr or transform_named(self._name(t))):
                            pre.setdefault(t, f"transforms a sample in {fn.qualname}()")
                elif by_attr and not graph.targets(producer, i) and unwrappable(fs, fn, call) is None:
                    wraps.setdefault((fs.relpath, call.stmt), (producer, call.line,
                                                               f"{call.callee}() transforms a sample"))
        # project transforms handed to library data sets, and collate functions
        for function_id, (fs, fn) in graph.functions.items():
            for i, call in enumerate(fn.calls):
                for key, value in call.keywords:
                    if key in COLLATE_KEYWORDS:
                        for t in self._callables(function_id, value, call):
                            collate.setdefault(t, f"collate function ({key}=) of {call.callee}()")
                    elif key in TRANSFORM_KEYWORDS and not self._project_dataset(function_id, i, project_datasets):
                        for t in self._transforms(function_id, value, call):
                            pre.setdefault(t, f"transform ({key}=) of {call.callee}()")
                if call.method in TRANSFORM_METHODS and call.args and call.args[0]:
                    for t in self._transforms(function_id, call.args[0], call):
                        pre.setdefault(t, f"transform of {call.callee}()")
        # project functions a step's data passes through that transform it (batch provenance:
        # ``char_tensor(chunk)`` per sample in a producer, ``mnist()`` normalizing a data set)
        flow_transforms = ctx.analysis("batch_provenance").transforms()
        for t, why in flow_transforms.items():
            pre.setdefault(t, why)
        for t in collate:
            pre.pop(t, None)
        # a function batch provenance found reading the data once and transforming it (pygcn's
        # ``load_data``) is the outermost transform, though it reads too
        pre = {t: why for t, why in pre.items() if self._decoratable(t, io=t in flow_transforms)
               and (t not in readers or t in flow_transforms)}
        collate = {t: why for t, why in collate.items() if self._decoratable(t)}
        hand_pre, hand_collate = self._hand_annotated()
        pre = self._outermost(pre, hand_pre, lambda fs, fn: has_region(fs, fn, NODE))
        collate = self._outermost(collate, hand_collate,
                                  lambda fs, fn: any(is_derived(fs, d, NODE) for d in (*fn.decorators, *fn.withs)))
        covered = set(pre) | hand_pre
        for t in list(covered):
            covered |= graph.reachable(t)
        for target, why in sorted(pre.items()):
            tfs, tfn = graph.functions[target]
            ctx.add_edit(tfs.relpath, function_region(ctx.names(tfs.relpath), tfn, NODE, self.id, why))
        for target, why in sorted(collate.items()):
            tfs, tfn = graph.functions[target]
            ctx.add_edit(tfs.relpath, self._collate_region(ctx.names(tfs.relpath), tfn, why))
        # a data set's item that reads its sample and then transforms it in place (resizes, a
        # crop, scaling: no transform object to decorate): the statements after the read
        for function_id, (first, last, line) in sorted(ctx.analysis("batch_provenance").item_preprocess().items()):
            fs, fn = graph.functions[function_id]
            spanned = [c for c in fn.calls if first <= c.stmt[:len(first)] <= last]
            if function_id in covered or has_region(fs, fn, NODE) or any(
                    (relpath, c.stmt) in wraps for c in spanned for relpath in (fs.relpath,)) or \
                    any(unwrappable(fs, fn, c) for c in spanned):
                continue
            ctx.add_edit(fs.relpath, WrapStmt(self.id, line, "transforms the sample it read (the statements "
                                              "after the read, up to the return)", first,
                                              ctx.names(fs.relpath).node(NODE), through=last))
        for (relpath, stmt), (producer, line, why) in sorted(wraps.items()):
            fs, fn = graph.functions[producer]
            if producer in covered or has_region(fs, fn, NODE):
                continue
            call = next(c for c in fn.calls if c.stmt == stmt)
            if any(is_node(fs, w, NODE) for w in call.withs):
                continue
            ctx.add_edit(relpath, WrapStmt(self.id, line, why, stmt, ctx.names(relpath).node(NODE)))

    # -- what a value runs -------------------------------------------------------------------------
    def _callables(self, function_id: str, text: str | None, call) -> set[str]:
        """Project functions a value given as a callable runs: a function, a bound method,
        the ``__call__`` of an instance, also through ``functools.partial(f, ...)``."""
        graph = self.graph
        if not text or graph.values is None:
            return set()
        out = self._origins_callables(graph.values.of(function_id, text))
        if out:
            return out
        fn = graph.fn(function_id)
        for stmt in self._statements_of(fn, text, call):
            for c in fn.calls:
                if c.stmt == stmt and c.method == "partial" and c.args and c.args[0]:
                    out |= self._origins_callables(graph.values.of(function_id, c.args[0]))
        return out

    def _origins_callables(self, origins) -> set[str]:
        out = set()
        for origin in origins:
            k, s = kind(origin), subject(origin)
            if k == "func" and not s.endswith(".__init__"):
                out.add(s)
            elif k == "inst":
                target = self.graph.instance_call(s)
                if target:
                    out.add(target)
        return out

    def _transforms(self, function_id: str, text: str | None, call) -> set[str]:
        """The project transforms a ``transform=`` value runs: itself (a function, an
        instance's ``__call__``: a project composer calls its members, so it is the
        outermost), or, for a library composer (``transforms.Compose([...])``), the project
        transforms built in the statement that builds it."""
        out = self._callables(function_id, text, call)
        if out or not text:
            return out
        graph = self.graph
        fn = graph.fn(function_id)
        for stmt in self._statements_of(fn, text, call):
            composed = [c for c in fn.calls if c.stmt == stmt and c.method in COMPOSERS]
            if not composed:
                continue
            for i, c in enumerate(fn.calls):
                if c.stmt != stmt:
                    continue
                if c.method == "Lambda" and c.args:
                    out |= self._callables(function_id, c.args[0], c)
                    continue
                for origin in graph.values.of(function_id, c.callee + "()") if "?" not in c.callee else ():
                    if kind(origin) == "inst":
                        target = graph.instance_call(subject(origin))
                        if target:
                            out.add(target)
        return out

    @staticmethod
    def _statements_of(fn, text: str, call) -> list[tuple]:
        """Where the value ``text`` is built: the call's own statement for an inline call,
        the assignments of a local name otherwise."""
        if text.endswith("()"):
            return [call.stmt]
        return [a.stmt for a in fn.assigns if a.target == text]

    def _project_dataset(self, function_id: str, index: int, project_datasets: set[str]) -> bool:
        """The call builds one of the project's data sets (its ``__getitem__`` applies the
        transform: handled there)."""
        for target in self.graph.targets(function_id, index):
            cls = self.graph.class_of_method(target)
            if target.endswith(".__init__") and cls and any(c in project_datasets for c in self.graph.mro(cls)):
                return True
        return False

    # -- which functions --------------------------------------------------------------------------
    def _name(self, function_id: str) -> str:
        """A function's name, or its class's for ``__call__``/``forward``."""
        fn = self.graph.fn(function_id)
        if fn.name in ("__call__", "forward") and fn.cls:
            return fn.cls.rsplit(".", 1)[-1]
        return fn.name

    def _decoratable(self, function_id: str, io: bool = False) -> bool:
        """A function a preprocess decorator may go on; one that reads (``io``) only when batch
        provenance found it preparing the data once, its reads inside (ML-R25 times them)."""
        fn = self.graph.fn(function_id)
        return not (fn.is_module or fn.is_generator or fn.is_async or function_id.endswith(".__init__")
                    or not io and does_io(self.graph, function_id))

    def _hand_annotated(self) -> tuple[set[str], set[str]]:
        """Functions that already carry a preprocess region / a collate (derived) region."""
        pre, col = set(), set()
        for fs in self.graph.files.values():
            if not aliases(fs):
                continue
            for fn in fs.functions:
                function_id = f"{fs.relpath}::{fn.qualname}"
                if has_region(fs, fn, NODE):
                    pre.add(function_id)
                if any(is_derived(fs, d, NODE) for d in (*fn.decorators, *fn.withs)):
                    col.add(function_id)
        return pre, col

    def _outermost(self, found: dict[str, str], hand: set[str], annotated) -> dict[str, str]:
        """Drop what already has the region, and what runs inside another region of the same
        node (a candidate or a hand annotation reaches it): nested, only the inner event would
        be kept."""
        graph = self.graph
        out = {}
        outer = set(found) | hand
        for t, why in found.items():
            fs, fn = graph.functions[t]
            if t in hand or annotated(fs, fn):
                continue
            if any(o != t and t in graph.reachable(o) for o in outer):
                continue
            out[t] = why
        return out

    def _collate_region(self, names: FileNames, fn, why: str) -> Edit:
        code = names.derived(NODE, COLLATE)
        if needs_body_region(fn):
            return WrapBody(self.id, fn.line, why, fn.stmt, with_item=code)
        return Decorate(self.id, fn.line, why, fn.stmt, code, rank=nesting_rank(NODE))
