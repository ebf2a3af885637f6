"""ML-R9: ``@ai.data.item`` on the function that produces one sample."""

from __future__ import annotations

from dftpass.core.passes import Case, Pass, PassKind
from dftpass.core.placement import function_region, has_region
from dftpass.core.values import classes
from dftpass.plugins.knowledge import LOG_METHODS, does_io

DATASET_BASES = ("Dataset", "data.Dataset", "torch.utils.data.Dataset", "MapDataPipe")


class DatasetItems(Pass):
    """Mark the function that produces one sample with ``@ai.data.item``.

    What it does:
        For each map-style data set (a class with ``__getitem__`` that subclasses a
        ``Dataset`` or is handed to a ``DataLoader``), the function that really reads one
        sample gets ``@ai.data.item``: ``__getitem__`` itself, unless it only dispatches
        (its one project call is the one it returns, whatever it logs or counts first).
        Then the dispatch is followed, through factories (``self.reader`` set from
        ``ReaderFactory.get_reader(...)``), overrides and ``super()`` calls of any length,
        to the function that does the reading (DLIO marks its readers' ``read_index``);
        never both, and with several readers each gets its own. A batch producer that builds
        its batch sample by sample (``torch.stack([read(i) for i in ix])``) has the same
        role for the function called per sample.

    Why:
        ``item`` events run in the DataLoader workers (their own trace files): they show
        the time to produce each sample, which is what a data stall is made of.

    Example:
        ``def __getitem__(self, index): array = np.load(...); return transform(array)`` gets
        ``@ai.data.item``.

    Fix safety:
        Safe: the decorator keeps the signature; a dataset instance still pickles for
        spawn workers (methods are not pickled with instances). Iterable datasets
        (``__iter__`` generators) are left alone: a decorator would time only the creation
        of the generator.

    Options:
        None.
    """

    id = "ML-R9"
    title = "Dataset items"
    kind = PassKind.TRANSFORM
    requires = ("callgraph", "loops")
    tags = ("data",)

    VALID = [
        # __getitem__ of a class that is not a data set
        "class Grid:\n    def __getitem__(self, key):\n        return key\n",
    ]
    INVALID = [
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
    ]

    def run(self, ctx) -> None:
        graph = ctx.analysis("callgraph")
        loops = ctx.analysis("loops")
        items: dict[str, str] = {}
        loader_args = self._classes_given_to_loaders(graph)
        for class_id, (fs, cs) in graph.classes.items():
            if "__getitem__" not in cs.methods:
                continue
            if not graph.has_base(class_id, DATASET_BASES) and class_id not in loader_args:
                continue
            getitem_id = f"{fs.relpath}::{cs.methods['__getitem__']}"
            chain = sample_readers(graph, getitem_id)
            if any(has_region(*graph.functions[c], "data.item") for c in chain | {getitem_id}):
                continue
            for target in chain:
                items.setdefault(target, f"produces one sample of {cs.name}")
        # a batch producer that builds its batch sample by sample (``[read(i) for i in ix]``)
        for facts in loops.of_kind("batch"):
            for producer in facts.producers:
                pfn = graph.fn(producer)
                for i, call in enumerate(pfn.calls):
                    if not (call.in_comprehension or call.loops):
                        continue
                    for target in graph.targets(producer, i):
                        tfn = graph.fn(target)
                        if not tfn.is_generator and not target.endswith(".__init__"):
                            items.setdefault(target, f"produces one sample of the batch {pfn.name}() builds")
        for target, why in sorted(items.items()):
            tfs, tfn = graph.functions[target]
            if has_region(tfs, tfn, "data.item"):
                continue
            ctx.add_edit(tfs.relpath, function_region(ctx.names(tfs.relpath), tfn, "data.item", self.id, why))

    @staticmethod
    def _classes_given_to_loaders(graph) -> set[str]:
        """Project classes whose instances are the first argument of a ``DataLoader(...)``."""
        out = set()
        for function_id, (fs, fn) in graph.functions.items():
            for call in fn.calls:
                if call.method != "DataLoader" or not call.args or not call.args[0]:
                    continue
                out |= classes(graph.values.of(function_id, call.args[0]))
        return out


def sample_readers(graph, getitem_id: str, depth: int = 6) -> set[str]:
    """The functions that really read one sample for ``__getitem__``: follow what it only
    dispatches to (``return self.reader.read_index(i)``, through factories and overrides
    that call ``super()``) until a function does the reading itself."""
    frontier, found = [getitem_id], set()
    for _ in range(depth):
        following = []
        for function_id in frontier:
            targets = _dispatches_to(graph, function_id)
            if targets and not does_io(graph, function_id):
                following.extend(targets)
            else:
                found.add(function_id)
        if not following:
            break
        frontier = list(dict.fromkeys(following))
    else:
        found.update(frontier)
    # an override that calls the base's version nests in it: keep the innermost
    return {f for f in found if not any(o != f and o in graph.reachable(f) for o in found)}


def _dispatches_to(graph, function_id: str) -> list[str]:
    """The project functions ``function_id`` hands the sample over to: every project call it
    makes is the one it returns (a 4-line ``__getitem__`` that counts and logs still only
    dispatches)."""
    fn = graph.fn(function_id)
    returned, other = [], False
    # calls inside a log line's arguments (``logger.debug(f"... {rank()}")``) are not work
    logged = {c.stmt for c in fn.calls if c.stmt_kind == "expr" and c.method in LOG_METHODS}
    for i, call in enumerate(fn.calls):
        targets = [t for t in graph.targets(function_id, i)
                   if not graph.fn(t).is_generator and not graph.fn(t).is_async]
        if not targets or (call.stmt in logged and call.stmt_kind != "expr"):
            continue
        if call.stmt_kind == "return":
            returned.extend(targets)
        else:
            other = True
    return [] if other else returned
