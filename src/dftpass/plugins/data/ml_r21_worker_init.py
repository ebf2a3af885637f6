"""ML-R21: DataLoader workers that start tracing themselves."""

from __future__ import annotations

from dftpass.api import Case, Expect, Finding, InsertAfter, Pass, PassKind, Severity

#: loaders that take a ``worker_init_fn`` and start worker processes
WORKER_LOADERS = ("DataLoader", "StatefulDataLoader")
#: the ``num_workers`` values that start no worker
NO_WORKERS = ("0", None)


class WorkerInit(Pass):
    """Give every DataLoader that starts workers a ``worker_init_fn`` that traces the worker.

    What it does:
        For each ``DataLoader(...)`` (or torchdata's ``StatefulDataLoader``) built with
        ``num_workers`` other than 0 and assigned to a name or attribute, adds one line after
        the loader is built: ``loader.worker_init_fn =
        _dft_runtime.worker_init(loader.worker_init_fn)`` (``dftpass.runtime``). In a worker
        that does not trace yet (a ``spawn`` or ``forkserver`` worker) it initializes
        tracing, registers the finalize on the worker's exit path, and then calls the
        loader's own ``worker_init_fn``, if it had one. A forked worker already traces
        (dftracer follows ``fork``): it only calls the chained one there.

    Why:
        Under ``spawn`` and ``forkserver`` (macOS and Windows by default, Linux from Python
        3.14, and any ``multiprocessing_context="spawn"`` loader) DataLoader workers start
        a fresh interpreter and write no trace at all: the sample reads, the preprocessing
        and the per-sample I/O vanish, and the loader/compute overlap cannot be judged
        (ML-R24 says "cannot judge"). Applying it to every loader with workers, whatever
        the start method, keeps a program traced when it moves to another platform or
        Python.

    Example:
        ``train_loader = DataLoader(ds, batch_size=64, num_workers=4)`` is followed by
        ``train_loader.worker_init_fn = _dft_runtime.worker_init(train_loader.worker_init_fn)``.

    Fix safety:
        Safe. ``worker_init_fn`` may be set after the loader is built: each iterator reads
        it when it starts its workers, and ``persistent_workers`` loaders start theirs on
        the first iteration. It is a ``partial`` of a function of ``dftpass.runtime`` around
        the loader's own, so it still pickles for spawn workers (a lambda passed as the
        loader's own ``worker_init_fn`` did not pickle before either). With tracing off it
        does nothing but call the chained one. A loader built inside a ``return``
        or a call (``for x in DataLoader(...)``) has no name to set it on: reported, left alone.

    Options:
        None.
    """

    id = "ML-R21"
    title = "DataLoader workers"
    kind = PassKind.TRANSFORM
    requires = ("callgraph",)
    frameworks = ("pytorch",)
    tags = ("data", "workers")

    VALID = [
        # no workers: the main process loads, and it traces already
        "from torch.utils.data import DataLoader\n\n\ndef make(ds):\n    loader = DataLoader(ds, batch_size=8)\n"
        "    return loader\n",
        "from torch.utils.data import DataLoader\n\n\ndef make(ds):\n"
        "    loader = DataLoader(ds, batch_size=8, num_workers=0)\n    return loader\n",
    ]
    INVALID = [
        Case(
            "import torch\nfrom torch.utils.data import DataLoader\n\n\ndef main(ds):\n"
            "    train_loader = DataLoader(ds, batch_size=64, num_workers=4,\n"
            "                              multiprocessing_context='spawn')\n    for x in train_loader:\n"
            "        pass\n",
            'import dftpass.runtime as _dft_runtime\nimport torch\nfrom torch.utils.data import DataLoader\n\n'
            '\ndef main(ds):\n    train_loader = DataLoader(ds, batch_size=64, num_workers=4,\n'
            "                              multiprocessing_context='spawn')\n"
            '    train_loader.worker_init_fn = _dft_runtime.worker_init(train_loader.worker_init_fn)\n'
            '    for x in train_loader:\n        pass\n',
        ),
        Case(
            # an attribute, a seeding worker_init_fn of the user's (chained), and a loader
            # built in a return statement (reported)
            "import os\n\nimport torch\n\n\ndef seed_worker(worker_id):\n    torch.manual_seed(worker_id)\n\n\n"
            "class Data:\n    def setup(self, ds):\n        self.loader = torch.utils.data.DataLoader(\n"
            "            ds, num_workers=os.cpu_count(), worker_init_fn=seed_worker)\n\n"
            "    def val(self, ds):\n        return torch.utils.data.DataLoader(ds, num_workers=2)\n",
            'import dftpass.runtime as _dft_runtime\nimport os\n\nimport torch\n\n\n'
            'def seed_worker(worker_id):\n    torch.manual_seed(worker_id)\n\n\nclass Data:\n'
            '    def setup(self, ds):\n        self.loader = torch.utils.data.DataLoader(\n'
            '            ds, num_workers=os.cpu_count(), worker_init_fn=seed_worker)\n'
            '        self.loader.worker_init_fn = _dft_runtime.worker_init(self.loader.worker_init_fn)\n\n'
            '    def val(self, ds):\n        return torch.utils.data.DataLoader(ds, num_workers=2)\n',
            findings=(Expect("info", "built in a return statement"),),
        ),
    ]

    def run(self, ctx) -> None:
        graph = ctx.analysis("callgraph")
        for function_id, (fs, fn) in sorted(graph.functions.items()):
            for call in fn.calls:
                if not self._starts_workers(graph, fs, call):
                    continue
                target = _assigned_name(fn, call)
                if target is None:
                    where = "a return statement" if call.stmt_kind == "return" else "an expression"
                    ctx.report(Finding(self.id, f"a DataLoader with workers built in {where}: its workers are "
                                       "not traced under spawn/forkserver (assign it to a name first)",
                                       fs.relpath, call.line, call.col, Severity.INFO))
                    continue
                if any(a.target == f"{target}.worker_init_fn" for a in fn.assigns):
                    continue  # done already (by dftpass or by hand)
                names = ctx.names(fs.relpath)
                why = f"DataLoader workers of {target}: trace them under spawn/forkserver"
                ctx.add_edit(fs.relpath, InsertAfter(self.id, call.line, why, call.stmt,
                                                     names.worker_init_assignment(target)))

    @staticmethod
    def _starts_workers(graph, fs, call) -> bool:
        if call.method not in WORKER_LOADERS:
            return False
        qualified = graph.qualify(fs, call.callee)
        if "." in qualified and not qualified.startswith(("torch.", "torchdata.")):
            return False
        workers = dict(call.keywords).get("num_workers")
        if workers is None and len(call.args) > 5:
            workers = call.args[5]
        return workers not in NO_WORKERS


def _assigned_name(fn, call) -> str | None:
    """The name or attribute a ``x = DataLoader(...)`` statement binds."""
    if call.stmt_kind != "assign":
        return None
    for a in fn.assigns:
        if a.stmt == call.stmt and a.value and a.value.rstrip("()").rsplit(".", 1)[-1] in WORKER_LOADERS:
            return a.target
    return None
