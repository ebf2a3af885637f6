"""ML-R9: ``@ai.data.item`` on the function that produces one sample."""

from __future__ import annotations

from dftpass.core.passes import Case, Pass, PassKind
from dftpass.core.placement import function_region, has_region

DATASET_BASES = ("Dataset", "data.Dataset", "torch.utils.data.Dataset", "MapDataPipe")


class DatasetItems(Pass):
    """Mark the function that produces one sample with ``@ai.data.item``.

    What it does:
        For each map-style data set (a class with ``__getitem__`` that subclasses a
        ``Dataset`` or is handed to a ``DataLoader``), ``__getitem__`` gets ``@ai.data.item``,
        unless it only delegates (a body of at most two statements returning a call to a
        project function): then the function it delegates to is the one marked (DLIO marks
        its readers' ``read_index`` the same way). Never both.

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
    requires = ("callgraph",)
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
        loader_args = self._classes_given_to_loaders(graph)
        for class_id, (fs, cs) in graph.classes.items():
            if "__getitem__" not in cs.methods:
                continue
            if not graph.has_base(class_id, DATASET_BASES) and class_id not in loader_args:
                continue
            getitem_id = f"{fs.relpath}::{cs.methods['__getitem__']}"
            target_id = self._delegate(graph, getitem_id) or getitem_id
            candidates = {getitem_id, target_id}
            if any(has_region(*graph.functions[c], "data.item") for c in candidates):
                continue
            tfs, tfn = graph.functions[target_id]
            why = f"produces one sample of {cs.name}"
            ctx.add_edit(tfs.relpath, function_region(ctx.names(tfs.relpath), tfn, "data.item", self.id, why))

    @staticmethod
    def _delegate(graph, getitem_id: str) -> str | None:
        fs, fn = graph.functions[getitem_id]
        if fn.n_stmts > 2:
            return None
        for i, call in enumerate(fn.calls):
            if call.stmt_kind == "return":
                target = graph.call_target(getitem_id, i)
                if target and not graph.fn(target).is_generator and not graph.fn(target).is_async:
                    return target
        return None

    @staticmethod
    def _classes_given_to_loaders(graph) -> set[str]:
        """Project classes whose instances are the first argument of a ``DataLoader(...)``."""
        out = set()
        for fs, fn in graph.functions.values():
            for call in fn.calls:
                if call.method != "DataLoader" or not call.args or not call.args[0]:
                    continue
                arg = call.args[0]
                values = [a.value for a in fn.assigns if a.target == arg and a.value]
                values += [arg] if arg.endswith("()") else []
                for value in values:
                    target = graph._resolve_name(fs, value[:-2]) if value.endswith("()") else None
                    if target and target in graph.classes:
                        out.add(target)
        return out
