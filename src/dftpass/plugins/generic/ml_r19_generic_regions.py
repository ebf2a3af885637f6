"""ML-R19: ``dft_fn`` regions on the remaining project functions that are worth an event."""

from __future__ import annotations

import attrs

from dftpass.api import (
    Case, Decorate, does_io, FileSummary, FunctionSummary, InsertBefore, is_top_level_model,
    MODULE_SCOPE, needs_body_region, Pass, PassKind, recognize, RULES_THAT_PLACE, run_by_loaders, top_level_line,
    WrapBody,
)

#: decorators of functions that do not run as Python (ML-R23): their caller is timed instead
COMPILED_DECORATORS = frozenset({"jit", "njit", "vectorize", "guvectorize", "cfunc", "stencil", "script",
                                 "function", "compile", "pmap", "cython", "ccall", "cfunc"})
#: dunder methods worth a region (the others are protocol glue: ``__len__``, ``__repr__``...)
DUNDERS = ("__init__", "__call__")
#: every other rule that places regions: ML-R19 takes what they leave
OTHER_RULES = tuple(r for r in RULES_THAT_PLACE if r != "ML-R19")


@attrs.define
class GenericOptions:
    #: the least score a function that runs per epoch or less needs for a region
    threshold: int = 20
    #: the least score for a function that runs once per batch (every event there is paid
    #: on every step: the default asks for I/O, checkpoint or collective work and loops)
    step_threshold: int = 60
    #: the least score for a function that runs once per sample; 0 = never (ML-R9 and
    #: ML-R25 already time the sample's read)
    sample_threshold: int = 0
    #: the implementations of the project's own abstract interfaces (a reader, a storage
    #: backend, a checkpointing mechanism chosen by a factory) get a region whatever their
    #: score: they are the seams where an expert attributes time (DLIO's authors log them
    #: all); per-sample ones only where the interface reaches file I/O
    interfaces: bool = True


#: an abstract reader interface and one implementation: the implementation's methods and the
#: base's constructor get regions, the abstract placeholders do not; ``self.step`` is a number
#: while the object is used (``None`` only in ``__del__``), which ``dft_fn.log`` can read
_INTERFACE = (
    """\
import numpy as np
from abc import ABC, abstractmethod


class Reader(ABC):
    def __init__(self, root):
        self.root = root
        self.step = 1

    @abstractmethod
    def open(self, name):
        pass

    @abstractmethod
    def close(self, handle):
        pass

    def __del__(self):
        self.step = None


class NpyReader(Reader):
    def open(self, name):
        self.step += 1
        return np.load(self.root + name)

    def close(self, handle):
        handle.close()


def main():
    reader = NpyReader('data/')
    reader.close(reader.open('a.npy'))


if __name__ == '__main__':
    main()
""",
    """\
from dftracer.python import dft_fn
import numpy as np
from abc import ABC, abstractmethod
dlp = dft_fn("train", name="train")


class Reader(ABC):
    @dlp.log_init
    def __init__(self, root):
        self.root = root
        self.step = 1

    @abstractmethod
    def open(self, name):
        pass

    @abstractmethod
    def close(self, handle):
        pass

    def __del__(self):
        self.step = None


class NpyReader(Reader):
    @dlp.log
    def open(self, name):
        self.step += 1
        return np.load(self.root + name)

    @dlp.log
    def close(self, handle):
        handle.close()


def main():
    reader = NpyReader('data/')
    reader.close(reader.open('a.npy'))


if __name__ == '__main__':
    main()
""",
)
#: a reader built in a ``worker_init_fn`` and read from ``__getitem__``: run by the loader,
#: not by the program (DLIO's shape); one per sample, and it reads a file
_LOADER_RUNS = (
    """\
import numpy as np
from abc import ABC, abstractmethod
from torch.utils.data import DataLoader, Dataset


class Reader(ABC):
    @abstractmethod
    def read(self, index):
        raise NotImplementedError


class NpyReader(Reader):
    def read(self, index):
        return np.load(f"{index}.npy")


class Samples(Dataset):
    def worker_init(self, worker_id):
        self.reader = NpyReader()

    def __len__(self):
        return 4

    def __getitem__(self, index):
        return self.reader.read(index)


def main():
    samples = Samples()
    loader = DataLoader(samples, num_workers=2, worker_init_fn=samples.worker_init)
    for batch in loader:
        batch.sum().backward()


if __name__ == "__main__":
    main()
""",
    """\
from dftracer.python import dft_fn
import numpy as np
from abc import ABC, abstractmethod
from torch.utils.data import DataLoader, Dataset
dlp = dft_fn("train", name="train")


class Reader(ABC):
    @abstractmethod
    def read(self, index):
        raise NotImplementedError


class NpyReader(Reader):
    @dlp.log
    def read(self, index):
        return np.load(f"{index}.npy")


class Samples(Dataset):
    def worker_init(self, worker_id):
        self.reader = NpyReader()

    def __len__(self):
        return 4

    def __getitem__(self, index):
        return self.reader.read(index)


@dlp.log
def main():
    samples = Samples()
    loader = DataLoader(samples, num_workers=2, worker_init_fn=samples.worker_init)
    for batch in loader:
        batch.sum().backward()


if __name__ == "__main__":
    main()
""",
)


class GenericRegions(Pass):
    """Put ``dft_fn`` regions on the remaining project functions whose work pays for an event.

    What it does:
        In the files that have no dftracer annotation yet (a file annotated by hand, or by
        an earlier run, keeps the regions someone chose), every function a training or
        evaluation program runs that no other rule annotated gets ``@dlp.log`` (``@dlp.log_init`` on a constructor, ``@dlp.log_static`` under
        ``@staticmethod``; a region inside the body of an ``async def``), where ``dlp =
        dft_fn("<module>", name="<module>")`` is one logger per module (the DLIO pattern:
        events carry the module's name as their cat; a module named like a category with a
        meaning, ``data.py`` or ``compute.py``, gets ``"data.py"``), when the cost estimator's score for
        the function clears the threshold for how often it runs. The score counts what the
        body does: I/O, checkpoint, collective, data, transfer and compute calls, loops,
        calls and statements (peer.md's weights, with its defects fixed). How often it runs
        comes from the call graph: a function reached from a batch loop or a model's
        ``forward`` runs per batch and needs a much higher score; one reached from a data
        set's ``__getitem__``, a collate function or a transform runs per sample and gets
        none. What a data loader runs for the program counts as run: the protocol methods
        of the data sets it builds and the ``worker_init_fn`` it hands over, with what they
        call.

        The implementations of the project's own abstract interfaces (a class with
        ``@abstractmethod`` methods, and its subclasses: a reader, a storage backend, a
        checkpointing mechanism picked by a factory) are the seams where an expert
        attributes time, whatever one method costs: each implementation of an abstract
        method, and each constructor of the family, gets a region unless its body is a
        placeholder (``pass``, ``return x``, ``raise NotImplementedError``). One that runs
        per sample gets it only when the interface reads files (an ``open`` that loads a
        file pays for its ~13 µs event; a ``get`` that indexes memory does not). The
        interfaces of a model's parts (a module class, or a class a module builds: an
        attention, a router, an MoE dispatcher) get none: they run per layer and per
        micro-batch, which the call graph cannot count. Never given one: the constructor of a model's block (the model's own
        constructor is the region that building it gets) and a ``def`` inside a module-level
        loop (a new function every iteration: LBFGS's closure).

    Why:
        The AI regions show the phases; the generic regions show where inside them the time
        goes (a slow ``build_vocab``, ``evaluate``, ``save_samples``). Each event costs about
        13 µs with tracing on: a region on a function called per sample or per batch can
        slow a traced run several times over, which is what made the peer's traced runs
        5-10x slower.

    Example:
        ``def build_index(root): ...`` (a loop over files that reads each one) called once
        from ``main`` gets ``@dlp.log``; ``def normalize(x): return (x - m) / s`` called from
        ``__getitem__`` gets nothing.

    Fix safety:
        Safe where it acts. ``dft_fn.log`` converts the parameters and ``self`` attributes
        named ``epoch``, ``step``, ``image_idx`` and ``image_size`` to numbers on every call
        and raises when one is not a number; a parameter's default replaces the value
        passed. So a function is left alone when such a parameter has a default that is
        not a number or a call in the project passes it ``None`` or a string, and a method
        when its class (or a base or subclass) has a method of such a name, gives such an
        attribute a value that is not a number (``None``, a string, a container, the
        result of a call other than ``int()``/``len()``/...) outside ``__del__``, or
        derives from an optimizer or a scheduler. Values the program computes (a counter,
        a parameter, arithmetic) are taken to be the numbers their names say. Generators are left alone (a decorator would time only their creation, a body
        region their consumer's time too); properties, compiled functions (``jit``,
        ``tf.function``, ``torch.jit.script``), nested functions and protocol dunders too.
        The decorator goes innermost, next to ``def``.

    Options:
        threshold (20): least score of a function that runs per epoch or less.
        step_threshold (60): least score of a function that runs once per batch.
        sample_threshold (0 = never): least score of a function that runs once per sample.
        interfaces (true): regions on the implementations of the project's abstract
            interfaces whatever their score (per-sample ones where the interface reads files).
    """

    id = "ML-R19"
    title = "Generic regions"
    kind = PassKind.TRANSFORM
    requires = ("callgraph", "loops", "cost", "programs", "log_safety", "compiled")
    after = OTHER_RULES
    tags = ("generic",)
    Options = GenericOptions

    _MAIN = "\n\nif __name__ == '__main__':\n    main()\n"
    VALID = [
        # the interface's ``step`` attribute is None while the object is used: never decorated
        Case(_INTERFACE[0].replace("self.step = 1", "self.step = None")),
        # an interface of a model's parts (a router, an attention): they run per layer and per
        # micro-batch, which the call graph cannot count; the compute regions time the model
        Case("import torch\nfrom abc import ABC, abstractmethod\nfrom torch import nn\n\n\n"
             "class Router(nn.Module, ABC):\n    @abstractmethod\n    def route(self, x):\n        pass\n\n\n"
             "class TopK(Router):\n    def route(self, x):\n        return torch.topk(x, 2)\n\n\ndef main():\n"
             "    TopK().route(torch.randn(4))\n" + _MAIN),
        # a ``step`` parameter given None by a caller: dft_fn.log would raise
        Case("import numpy as np\nfrom abc import ABC, abstractmethod\n\n\nclass Reader(ABC):\n    @abstractmethod\n"
             "    def open(self, name, step):\n        pass\n\n\nclass NpyReader(Reader):\n"
             "    def open(self, name, step):\n        return np.load(name)\n\n\ndef main():\n"
             "    NpyReader().open('a.npy', None)\n" + _MAIN),
        # a def made anew on every iteration of a module-level loop (LBFGS's closure)
        "import json\n\nfor i in range(3):\n    def load_all(paths):\n        out = {}\n        for p in paths:\n"
        "            with open(p) as f:\n                out.update(json.load(f))\n        return out\n"
        "    load_all(['a.json'])\n",
        # too little work to pay for an event
        "def main():\n    print('hi')\n" + _MAIN,
        # a function with a ``step`` parameter would make dft_fn.log raise: left alone
        Case("import json\n\n\ndef report(path, step=None):\n    for name in ('a', 'b'):\n"
             "        with open(path) as f:\n            json.load(f)\n\n\ndef main():\n    report('x')\n" + _MAIN),
        # the lines dftpass wrote are not the function's work: an argument parser just under the
        # threshold stays under it after ML-R20 logged its parameters (a second run adds nothing)
        Case("import argparse\nimport os\nimport dftpass.runtime as _dft_runtime\n\n\ndef get_args():\n"
             "    parser = argparse.ArgumentParser()\n"
             + "".join(f"    parser.add_argument('--a{i}', default={i})\n" for i in range(22))
             + "    args = parser.parse_args()\n    _dft_runtime.log_parameters(\"args\", args)\n"
             "    os.makedirs(str(args.a0), exist_ok=True)\n    return args\n\n\ndef main():\n    get_args()\n"
             + _MAIN),
        # runs per sample: never
        Case("import numpy as np\nfrom torch.utils.data import Dataset\n\n\ndef decode(path):\n"
             "    out = []\n    for k in range(3):\n        out.append(np.load(path))\n    return out\n\n\n"
             "class D(Dataset):\n    def __getitem__(self, i):\n        return decode(f'{i}.npy')\n\n\n"
             "def main():\n    D()[0]\n" + _MAIN),
    ]
    INVALID = [
        Case(*_INTERFACE),
        Case(*_LOADER_RUNS),
        # a per-sample implementation that only indexes memory is not worth its events (the
        # function that builds the loader is)
        Case(_LOADER_RUNS[0].replace('np.load(f"{index}.npy")', "self.cache[index]"),
             _LOADER_RUNS[1].replace('np.load(f"{index}.npy")', "self.cache[index]")
             .replace("    @dlp.log\n    def read", "    def read")),
        Case(
            # a model's construction is one region: its blocks' constructors are part of it
            'import torch\nfrom torch import nn\n\n\nclass Block(nn.Module):\n    def __init__(self, width):\n'
            '        super().__init__()\n'
            '        self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(4)])\n'
            '        for layer in self.layers:\n            nn.init.normal_(layer.weight)\n'
            '            nn.init.zeros_(layer.bias)\n        self.norm = nn.LayerNorm(width)\n'
            '        self.drop = nn.Dropout(0.1)\n\n\nclass Net(nn.Module):\n'
            '    def __init__(self, depth, width):\n        super().__init__()\n'
            '        self.blocks = nn.ModuleList([Block(width) for _ in range(depth)])\n'
            '        for block in self.blocks:\n            nn.init.zeros_(block.norm.bias)\n'
            '        self.head = nn.Linear(width, 1)\n        self.out = nn.Identity()\n\n\ndef main():\n'
            "    Net(4, 8)\n\n\nif __name__ == \"__main__\":\n    main()\n",
            'from dftracer.python import dft_fn\nimport torch\nfrom torch import nn\ndlp = dft_fn("train", name="train")\n\n\n'
            'class Block(nn.Module):\n    def __init__(self, width):\n        super().__init__()\n'
            '        self.layers = nn.ModuleList([nn.Linear(width, width) for _ in range(4)])\n'
            '        for layer in self.layers:\n            nn.init.normal_(layer.weight)\n'
            '            nn.init.zeros_(layer.bias)\n        self.norm = nn.LayerNorm(width)\n'
            "        self.drop = nn.Dropout(0.1)\n\n\n"
            'class Net(nn.Module):\n    @dlp.log_init\n    def __init__(self, depth, width):\n'
            '        super().__init__()\n'
            '        self.blocks = nn.ModuleList([Block(width) for _ in range(depth)])\n'
            '        for block in self.blocks:\n            nn.init.zeros_(block.norm.bias)\n'
            '        self.head = nn.Linear(width, 1)\n        self.out = nn.Identity()\n\n\ndef main():\n'
            "    Net(4, 8)\n\n\nif __name__ == \"__main__\":\n    main()\n",
        ),
        Case(
            "import os\n\nimport numpy as np\n\n\n# the index is built once\ndef build_index(root):\n"
            "    index = []\n    for name in sorted(os.listdir(root)):\n        index.append(np.load(name).shape)\n"
            "    return index\n\n\ndef main():\n    build_index('.')\n" + _MAIN,
            "from dftracer.python import dft_fn\nimport os\n\nimport numpy as np\n"
            "dlp = dft_fn(\"train\", name=\"train\")\n\n\n# the index is built once\n@dlp.log\ndef build_index(root):\n"
            "    index = []\n    for name in sorted(os.listdir(root)):\n        index.append(np.load(name).shape)\n"
            "    return index\n\n\ndef main():\n    build_index('.')\n" + _MAIN,
        ),
        Case(
            # a constructor gets log_init, a static method log_static under @staticmethod
            "import json\n\n\nclass Vocab:\n    def __init__(self, path):\n        self.words = {}\n"
            "        for line in open(path):\n            for w in json.loads(line):\n"
            "                self.words.setdefault(w, len(self.words))\n\n    @staticmethod\n"
            "    def merge(paths):\n        out = {}\n        for p in paths:\n            with open(p) as f:\n"
            "                out.update(json.load(f))\n        return out\n\n\ndef main():\n"
            "    Vocab('v.json')\n    Vocab.merge(['a.json'])\n" + _MAIN,
            "from dftracer.python import dft_fn\nimport json\ndlp = dft_fn(\"train\", name=\"train\")\n\n\n"
            "class Vocab:\n    @dlp.log_init\n    def __init__(self, path):\n        self.words = {}\n"
            "        for line in open(path):\n            for w in json.loads(line):\n"
            "                self.words.setdefault(w, len(self.words))\n\n    @staticmethod\n"
            "    @dlp.log_static\n    def merge(paths):\n        out = {}\n        for p in paths:\n"
            "            with open(p) as f:\n                out.update(json.load(f))\n        return out\n\n\n"
            "def main():\n    Vocab('v.json')\n    Vocab.merge(['a.json'])\n" + _MAIN,
        ),
        Case(
            # an async function gets a region of its own inside the body
            "import asyncio\nimport json\n\n\nasync def fetch_all(paths):\n    out = []\n    for p in paths:\n"
            "        await asyncio.sleep(0)\n        with open(p) as f:\n            out.append(json.load(f))\n"
            "    return out\n\n\ndef main():\n    asyncio.run(fetch_all(['a']))\n" + _MAIN,
            "from dftracer.python import dft_fn\nimport asyncio\nimport json\n\n\nasync def fetch_all(paths):\n"
            "    with dft_fn(\"train\", name=\"fetch_all\"):\n        out = []\n        for p in paths:\n"
            "            await asyncio.sleep(0)\n            with open(p) as f:\n                out.append(json.load(f))\n"
            "        return out\n\n\ndef main():\n    asyncio.run(fetch_all(['a']))\n" + _MAIN,
        ),
        Case(
            # the parameters block an earlier run wrote into get_args is dftpass's, not the function's
            # work: get_args stays under the threshold, as on the first run (idempotence)
            'import json\nfrom argparse import ArgumentParser\n\nimport torch\n'
            'from dftracer.python import dftracer\n\n\ndef get_args():\n    parser = ArgumentParser()\n'
            "    parser.add_argument('--epochs', type=int, default=5)\n"
            "    parser.add_argument('--lr', type=float, default=0.1)\n"
            "    parser.add_argument('--batch_size', type=int, default=32)\n    args = parser.parse_args()\n"
            '    if dftracer.get_instance().logger is not None:\n        try:\n'
            '            for _dft_key, _dft_value in vars(args).items():\n'
            '                dftracer.get_instance().log_metadata_event(\n'
            '                    json.dumps(f"args.{_dft_key}")[1:-1], json.dumps(str(_dft_value)[:1024])[1:-1])\n'
            '        except Exception:\n            pass\n    return args\n\n\ndef main():\n'
            '    args = get_args()\n    w = torch.zeros(1, requires_grad=True)\n'
            '    for _ in range(args.epochs):\n        (w * args.lr).sum().backward()\n\n\n'
            "if __name__ == '__main__':\n    main()\n",
            'import json\nfrom argparse import ArgumentParser\n\nimport torch\n'
            'from dftracer.python import dftracer, dft_fn\ndlp = dft_fn("train", name="train")\n\n\n'
            'def get_args():\n    parser = ArgumentParser()\n'
            "    parser.add_argument('--epochs', type=int, default=5)\n"
            "    parser.add_argument('--lr', type=float, default=0.1)\n"
            "    parser.add_argument('--batch_size', type=int, default=32)\n    args = parser.parse_args()\n"
            '    if dftracer.get_instance().logger is not None:\n        try:\n'
            '            for _dft_key, _dft_value in vars(args).items():\n'
            '                dftracer.get_instance().log_metadata_event(\n'
            '                    json.dumps(f"args.{_dft_key}")[1:-1], json.dumps(str(_dft_value)[:1024])[1:-1])\n'
            '        except Exception:\n            pass\n    return args\n\n\n@dlp.log\ndef main():\n'
            '    args = get_args()\n    w = torch.zeros(1, requires_grad=True)\n'
            '    for _ in range(args.epochs):\n        (w * args.lr).sum().backward()\n\n\n'
            "if __name__ == '__main__':\n    main()\n",
        ),
        Case(
            # a function the program hands to torch.compile (timm's Kron optimizer, fullgraph=True) gets
            # no generic region: ML-R23 would flag it, and the compiled graph would break
            'import torch\n\n\ndef _balance(qs):\n    norms = torch.stack([q.norm(float("inf")) for q in qs])\n'
            '    mean = norms.prod() ** (1 / len(qs))\n    norms = mean / norms\n'
            '    for i, q in enumerate(qs):\n        q.mul_(norms[i])\n    for i, q in enumerate(qs):\n'
            '        q.add_(1)\n    for i, q in enumerate(qs):\n        q.sub_(1)\n    return qs\n\n\n'
            'class Kron:\n    def __init__(self, compile_fns=True):\n'
            '        self._balance = torch.compile(_balance, fullgraph=True) if compile_fns else _balance\n\n'
            '    def step(self, qs):\n        return self._balance(qs)\n\n\ndef main():\n    opt = Kron()\n'
            '    qs = [torch.ones(2, requires_grad=False)]\n    for _ in range(3):\n        opt.step(qs)\n'
            '        torch.ones(1, requires_grad=True).sum().backward()\n\n\nif __name__ == "__main__":\n'
            '    main()\n',
            'from dftracer.python import dft_fn\nimport torch\ndlp = dft_fn("train", name="train")\n\n\n'
            'def _balance(qs):\n    norms = torch.stack([q.norm(float("inf")) for q in qs])\n'
            '    mean = norms.prod() ** (1 / len(qs))\n    norms = mean / norms\n'
            '    for i, q in enumerate(qs):\n        q.mul_(norms[i])\n    for i, q in enumerate(qs):\n'
            '        q.add_(1)\n    for i, q in enumerate(qs):\n        q.sub_(1)\n    return qs\n\n\n'
            'class Kron:\n    def __init__(self, compile_fns=True):\n'
            '        self._balance = torch.compile(_balance, fullgraph=True) if compile_fns else _balance\n\n'
            '    def step(self, qs):\n        return self._balance(qs)\n\n\n@dlp.log\ndef main():\n'
            '    opt = Kron()\n    qs = [torch.ones(2, requires_grad=False)]\n    for _ in range(3):\n'
            '        opt.step(qs)\n        torch.ones(1, requires_grad=True).sum().backward()\n\n\n'
            'if __name__ == "__main__":\n    main()\n',
        ),
    ]

    def run(self, ctx) -> None:
        graph = ctx.analysis("callgraph")
        costs = ctx.analysis("cost")
        programs = ctx.analysis("programs")
        safety = ctx.analysis("log_safety")
        compilers = ctx.analysis("compiled")
        reach: set[str] = set()
        for program in programs.instrumented():
            reach |= programs.reach(program.entry)
        if not reach:  # a snippet annotated as a program, with no entry of its own
            reach = set(graph.functions)
        reach |= run_by_loaders(graph, reach)
        claimed = _claimed_by_other_rules(ctx)
        seams = interface_methods(graph) if self.options.interfaces else {}
        annotated: dict[str, bool] = {}
        chosen: dict[str, list[tuple[FileSummary, FunctionSummary, str]]] = {}
        for function_id in sorted(reach):
            if function_id not in graph.functions:
                continue
            fs, fn = graph.functions[function_id]
            if fs.relpath not in annotated:
                annotated[fs.relpath] = _uses_dftracer(fs)
            if annotated[fs.relpath] or (fs.relpath, fn.stmt) in claimed or _has_any_region(fs, fn):
                continue
            if _unsuitable(graph, function_id, fs, fn) or not safety.safe(function_id):
                continue  # ML-R22 asks log_safety the same question of every dft_fn decorator
            if compilers.compiler_of(function_id) is not None:
                continue  # torch.compile'd (timm's Kron optimizer): ML-R23 asks the same analysis
            cost = costs.of(function_id)
            runs = f"runs {'per ' + cost.hot if cost.hot != 'once' else 'per epoch or less'}"
            seam = seams.get(function_id)
            if seam and not _trivial(fn) and (cost.hot != "sample" or seam.reads_files):
                why = f"generic region: implements {seam.base}'s interface, {runs}"
            else:
                least = {"once": self.options.threshold, "step": self.options.step_threshold,
                         "sample": self.options.sample_threshold}[cost.hot]
                if least <= 0 or cost.score < least:
                    continue
                why = f"generic region: {cost.describe()}, {runs}"
            chosen.setdefault(fs.relpath, []).append((fs, fn, why))
        for relpath, items in chosen.items():
            self._annotate_file(ctx, graph, relpath, items)

    def _annotate_file(self, ctx, graph, relpath: str, items) -> None:
        fs = items[0][0]
        names = ctx.names(relpath)
        cat = names.generic_cat(_module_name(fs))
        logger = _existing_logger(graph, fs)
        first_top = None
        for _, fn, why in items:
            if fn.is_async:
                ctx.add_edit(relpath, WrapBody(self.id, fn.line, why, fn.stmt,
                                               with_item=names.generic_region(cat, fn.qualname)))
                continue
            kind = "log_init" if fn.name == "__init__" else \
                "log_static" if any(d.rsplit(".", 1)[-1] == "staticmethod" for d in fn.decorators) else "log"
            ctx.add_edit(relpath, Decorate(self.id, fn.line, why, fn.stmt,
                                           names.generic_decorator(kind, logger), rank=99))
            top = fn.stmt[:1]
            if first_top is None or top < first_top:
                first_top = top
        if first_top is not None and logger is None:
            first_top = _logger_place(fs, first_top)
            ctx.add_edit(relpath, InsertBefore(self.id, top_level_line(fs, first_top),
                                               f"one generic logger for {relpath}", first_top,
                                               names.module_logger(cat), take_comments=False))


@attrs.frozen
class Seam:
    """A method that implements an abstract interface of the project."""

    #: the abstract base's qualified name
    base: str
    #: whether some implementation of the interface calls file I/O
    reads_files: bool


def interface_methods(graph) -> dict[str, Seam]:
    """function id -> :class:`Seam`, for the constructors and the implementations of the
    abstract methods of every project class that declares some (``@abstractmethod``), in the
    class and in all its subclasses."""
    out: dict[str, Seam] = {}
    for class_id, (fs, cs) in graph.classes.items():
        abstract = {name for name, qual in cs.methods.items() if _is_abstract(fs, qual)}
        if not abstract:
            continue
        members = [class_id, *graph.subclasses(class_id)]
        if any(_inside_a_model(graph, cid) for cid in members):
            continue
        ids = [f"{graph.classes[cid][0].relpath}::{graph.classes[cid][1].methods[name]}"
               for cid in members if cid in graph.classes
               for name in (*sorted(abstract), "__init__") if name in graph.classes[cid][1].methods]
        ids = [fid for fid in ids if fid in graph.functions]
        reads = any(does_io(graph, fid) for fid in ids)
        for fid in ids:
            out.setdefault(fid, Seam(cs.qualname, reads))
    return out


def _inside_a_model(graph, class_id: str) -> bool:
    """A model's part: a module class (an attention, a router), or a class a module builds
    (Megatron's MoE token dispatcher, made in the MoE layer's constructor). Its methods run
    per layer and per micro-batch, which the call graph cannot count (a model's calls go
    through attributes set from configuration): the compute regions time the model, and a
    generic region on each of its parts would write an event per layer."""
    if class_id not in graph.classes or graph.is_module_class(class_id):
        return class_id in graph.classes
    for builder in graph.instantiated_in.get(class_id, ()):
        owner = graph.class_of_method(builder) if builder in graph.functions else None
        if owner is not None and owner in graph.classes and graph.is_module_class(owner):
            return True
    return False


def _is_abstract(fs: FileSummary, qualname: str) -> bool:
    fn = fs.function(qualname)
    return fn is not None and any(d.rsplit(".", 1)[-1] == "abstractmethod" for d in fn.decorators)


def _trivial(fn: FunctionSummary) -> bool:
    """A body with nothing to time: ``pass``, ``return x``, ``raise NotImplementedError``
    (an abstract method's placeholder, an accessor). A constructor that only runs its base's
    is not: the base's work is the object's."""
    return fn.n_stmts <= 1 and all(c.callee == "NotImplementedError" for c in fn.calls)


def _logger_place(fs: FileSummary, first_decorated: tuple) -> tuple:
    """Where the module's logger goes: before the first top-level ``def`` or ``class`` after
    the imports (DLIO's ``dlp = Profile(...)`` under its imports), not between two classes
    deep in the file; never after the first function it decorates."""
    anchor = fs.import_anchor or 0
    tops = [fn.stmt[:1] for fn in fs.functions if len(fn.stmt) == 1] + \
           [cs.stmt[:1] for cs in fs.classes if len(cs.stmt) == 1]
    tops = [t for t in tops if t and t[0][0] == "body" and t[0][1] >= anchor]
    return min([*tops, first_decorated], key=lambda t: t[0][1])


def _module_name(fs: FileSummary) -> str:
    parts = [p for p in fs.module.split(".") if p and p != "__init__"]
    return parts[-1] if parts else "main"


def _existing_logger(graph, fs: FileSummary) -> str | None:
    """The name of a module-level ``X = dft_fn(...)`` the file already has."""
    module = fs.function(MODULE_SCOPE)
    if module is None:
        return None
    for a in module.assigns:
        if a.value and a.value.endswith("()") and recognize(fs, a.value[:-2]) == "dft_fn" and "." not in a.target:
            return a.target
    return None


def _uses_dftracer(fs: FileSummary) -> bool:
    """Whether the file, as read, already has dftracer regions (by hand, or from an earlier
    run): then its regions are someone's choice, and ML-R19 leaves the file alone. Starting
    and stopping the tracer (``initialize_log``, ``finalize``, the ``DFTRACER_ENABLE``
    flag) chooses no region: DLIO's configuration module does only that."""
    if any(_chooses_regions(recognize(fs, m)) for m in fs.mentions):
        return True
    return any(recognize(fs, t.split("(", 1)[0]) is not None for fn in fs.functions for t in (*fn.decorators, *fn.withs))


def _chooses_regions(path: str | None) -> bool:
    return path is not None and path.split(".", 1)[0] not in ("dftracer", "env")


def _has_any_region(fs: FileSummary, fn: FunctionSummary) -> bool:
    """Any dftracer decorator (an ``ai`` node, ``dft_fn``'s, a module logger's) or body region."""
    loggers = {a.target for a in (fs.function(MODULE_SCOPE).assigns if fs.function(MODULE_SCOPE) else ())
               if a.value and recognize(fs, a.value.rstrip("()")) == "dft_fn"}
    for text in (*fn.decorators, *fn.withs):
        head = text.split("(", 1)[0]
        if recognize(fs, head) is not None or head.split(".", 1)[0] in loggers:
            return True
    return False


def _claimed_by_other_rules(ctx) -> set[tuple[str, tuple]]:
    """Functions another rule is putting a region on in this run."""
    out = set()
    for relpath, edit_set in ctx.edit_sets.items():
        for e in edit_set.edits:
            if isinstance(e, Decorate):
                out.add((relpath, e.func))
            elif isinstance(e, WrapBody):
                out.add((relpath, e.owner))
    return out


def _defined_in_loop(fs: FileSummary, fn: FunctionSummary) -> bool:
    """A ``def`` in a module-level loop (a ``__main__`` block's ``for i in range(steps): def
    closure(): ...``, LBFGS's shape): a new function every iteration, decorated anew each time,
    and the caller's work (forward and backward inside ``optimizer.step(closure)``), not a
    function of its own."""
    if fn.cls or "<locals>" in fn.qualname:
        return False
    module = fs.function(MODULE_SCOPE)
    return module is not None and any(
        len(fn.stmt) > len(loop.stmt) and fn.stmt[:len(loop.stmt)] == loop.stmt for loop in module.loops)


def _unsuitable(graph, function_id: str, fs: FileSummary, fn: FunctionSummary) -> bool:
    if fn.is_module or "<locals>" in fn.qualname or fn.is_generator or _defined_in_loop(fs, fn):
        return True
    if fn.name.startswith("__") and fn.name.endswith("__") and fn.name not in DUNDERS:
        return True
    if needs_body_region(fn) and not fn.is_async:  # properties
        return True
    if fn.stmt[:1] and fs.import_anchor and fn.stmt[0][1] < fs.import_anchor:
        return True  # defined before the imports dftpass adds
    if any(d.split("(", 1)[0].rsplit(".", 1)[-1] in COMPILED_DECORATORS for d in fn.decorators):
        return True
    if fn.cls:
        class_id = f"{fs.relpath}::{fn.cls}"
        if fn.name == "__init__" and class_id in graph.classes and graph.is_module_class(class_id) \
                and not is_top_level_model(graph, class_id):
            return True  # a model's block: built by its model, whose construction is the region
    return False
