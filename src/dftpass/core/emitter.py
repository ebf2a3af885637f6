"""The one module that spells dftracer's API.

Every import, node path, lifecycle statement and environment variable of dftracer that
dftpass writes into a user's code or sets for a traced run is spelled here, and nowhere
else. Passes ask for *meanings* ("the batch-loop wrapper", "the optimizer-step region") and
get code strings back; a dftracer API change is a change to this file alone.

The node tree below is checked against the installed ``dftracer.python`` by
``tests/core/test_emitter.py``: every path we can emit exists there (``comm.bcast`` does,
``comm.broadcast`` does not).
"""

from __future__ import annotations

import re

import functools
import weakref

import attrs

from dftpass.core.summary import FileSummary

#: the Python API package
API_MODULE = "dftracer.python"
#: every module a project may import dftracer's Python API from: today's, dftracer 1.x's,
#: and the dlio-profiler era's (hand-annotated projects use all three)
API_MODULES = (API_MODULE, "dftracer.logger", "dlio_profiler.logger")
#: older names of the API symbols
_OLD_SYMBOLS = {"dlio_logger": "dftracer", "fn_interceptor": "dft_fn",
                # dftracer.python.torch: its profiler hook (the symbol is not the module's name:
                # a file's "torch" is PyTorch)
                "torch": "profiling"}
#: the name a symbol is imported by, where it is not the symbol (``from dftracer.python import torch``)
_IMPORT_NAMES = {"profiling": "torch"}

#: every ``ai`` node dftpass may emit: path below ``ai`` -> (trace cat, event name)
NODES: dict[str, tuple[str, str]] = {
    "": ("ai_root", "ai_root"),
    "pipeline.epoch": ("pipeline", "epoch"),
    "pipeline.train": ("pipeline", "train"),
    "pipeline.evaluate": ("pipeline", "evaluate"),
    "pipeline.test": ("pipeline", "test"),
    "compute": ("compute", "compute"),
    "compute.forward": ("compute", "forward"),
    "compute.backward": ("compute", "backward"),
    "compute.step": ("compute", "step"),
    "data.item": ("data", "item"),
    "data.preprocess": ("data", "preprocess"),
    "dataloader.fetch": ("dataloader", "fetch"),
    "device.transfer": ("device", "transfer"),
    "checkpoint.capture": ("checkpoint", "capture"),
    "checkpoint.restart": ("checkpoint", "restart"),
    "other.log": ("other", "other.log"),
    **{f"comm.{op}": ("comm", op) for op in (
        "send", "receive", "barrier", "bcast", "reduce", "all_reduce", "gather",
        "all_gather", "scatter", "reduce_scatter", "all_to_all")},
    **{f"{area}.io.{op}": (area, f"{area}.io.{op}")
       for area in ("data", "checkpoint", "other") for op in ("open", "read", "write", "close")},
}

#: dftracer.python's package ``__init__`` imports its Dynamo backend module, which imports
#: ``torch._dynamo``: 1.5 s on every process of a torch program (each spawn worker too),
#: tracing on or off. A program that does not use that backend gets this one statement
#: before dftpass's dftracer import: an empty module stands in for the backend's while the
#: package is imported, so the import costs milliseconds, and is taken out again at once (its
#: ``__spec__`` is None, a real module's is not), so that a later ``import
#: dftracer.python.dynamo`` gets the real module (docs/decisions.md, "dftracer's import cost").
DYNAMO_MODULE = "dftracer.python.dynamo"
DYNAMO_NAMES = ("create_backend",)
IMPORT_PRELUDE = ('(lambda m, n: [m.setdefault(n, __import__("types").ModuleType(n)), __import__("dftracer.python"), '
                  f'm[n].__spec__ or m.pop(n)])(__import__("sys").modules, "{DYNAMO_MODULE}")')
#: the prelude as dftpass wrote it before it took the stand-in out again (``strip`` knows both)
LEGACY_IMPORT_PRELUDE = (f'__import__("sys").modules.setdefault("{DYNAMO_MODULE}", '
                         f'__import__("types").ModuleType("{DYNAMO_MODULE}"))')
IMPORT_PRELUDE_COMMENT = "# dftpass: dftracer without its torch._dynamo import (1.5 s)"


def plans_dynamo_backend(api_imports) -> bool:
    """Whether the dftracer names a file is to import include the Dynamo backend's module."""
    return any(name == "create_backend" for name, _ in api_imports)


def uses_dynamo_backend(fs: FileSummary) -> bool:
    """Whether a file uses dftracer's Dynamo backend (then no file gets the prelude)."""
    return any(q.startswith(DYNAMO_MODULE) or q.rsplit(".", 1)[-1] in DYNAMO_NAMES and q.startswith("dftracer")
               for q in fs.imports.values()) or any(DYNAMO_MODULE in m for m in fs.mentions)


#: nodes derived from a node of :data:`NODES` (``X.derive(name=...)``): a distinct singleton
#: with the base's cat, so it nests inside or around the base (which is not re-entrant)
#: without losing events. (base path, derived name) -> (trace cat, event name)
DERIVED: dict[tuple[str, str], tuple[str, str]] = {
    ("data.preprocess", "collate"): ("data", "preprocess.collate"),
}

#: the decorators of a ``dft_fn`` logger dftpass emits (event name = the function's qualname)
GENERIC_DECORATORS = ("log", "log_init", "log_static")
#: the arguments ``dft_fn.log`` reads from a function's parameters and from ``self``'s
#: attributes, and converts to numbers: a value that is not one raises in the user's call
#: (dftracer-api.md, hazards), so a function that has them gets no ``dft_fn`` decorator
DFT_FN_MAGIC_NAMES = ("epoch", "step", "image_idx", "image_size")

#: the suffixes ``X.iter(...)`` adds to an event name: time waiting for the next element,
#: and time spent in the loop body
ITER_SUFFIX = ".iter"
BLOCK_SUFFIX = ".block"

#: nodes whose ``init`` child dftpass emits, as the decorator of a constructor
#: (``@ai.checkpoint.init`` on a checkpointing class's ``__init__``): path -> (trace cat, event
#: name). ``init`` is a child of the node with the node's cat and the name ``<name>.init``
INIT_SUFFIX = ".init"
INIT_NODES: dict[str, tuple[str, str]] = {"checkpoint": ("checkpoint", "checkpoint" + INIT_SUFFIX)}

#: the tracer's method that writes a custom metadata line (``CM``), and the longest value
#: (characters, before escaping) :meth:`FileNames.metadata` writes in one line
METADATA_METHOD = "log_metadata_event"
METADATA_VALUE_MAX = 1024

#: how decorators of several dftpass regions on one function nest (outermost first)
_NESTING = ("", "pipeline", "checkpoint", "compute", "data", "dataloader", "device", "comm", "other")


def nesting_rank(node: str) -> int:
    head = node.split(".", 1)[0]
    return _NESTING.index(head) if head in _NESTING else len(_NESTING)


def event(node: str, suffix: str = "") -> tuple[str, str]:
    """(cat, name) of the trace event a node writes (``suffix`` is ITER/BLOCK for ``.iter``)."""
    cat, name = NODES[node]
    return cat, name + suffix


# -- image_size: the bytes an I/O region moved ---------------------------------------------

#: how ``image_size`` is measured from the object an I/O statement read or wrote, by what the
#: object is (``{v}``: the name that holds it), for the kinds known where the region is
#: placed. Always the object in memory after the operation, never the file
#: (``os.path.getsize``) or the path. Each expression is cheap (no copy: ``len(img.tobytes())``
#: would copy a whole image) and cannot raise for the objects it is chosen for.
IMAGE_SIZE: dict[str, str] = {
    # what is always a numpy array (np.fromfile, imageio.imread)
    "ndarray": "{v}.nbytes",
    # a pyarrow Table (the bytes of its buffers)
    "table": "{v}.nbytes",
    # what is always a torch tensor (torchvision.io.read_image)
    "tensor": "{v}.element_size() * {v}.nelement()",
    # bytes or str from a file's read()
    "bytes": "len({v})",
    # a decoded PIL image: one byte per band and pixel (exact for the usual 1/L/P/RGB/RGBA/CMYK
    # modes, an under-count for 16-bit and float ones)
    "image": "{v}.width * {v}.height * len({v}.getbands())",
    # a pandas DataFrame (its columns, without following object pointers)
    "frame": "int({v}.memory_usage(index=True).sum())",
    # model state as torch.save writes it and torch.load returns it: the tensors anywhere in
    # nested dicts, lists and tuples (a state dict, an optimizer's, a checkpoint dict of both);
    # anything else counts 0 and nothing raises. ``{torch}``: the file's name for torch
    "state": "sum(t.element_size() * t.nelement() for t in {torch}.utils._pytree.tree_flatten({v})[0] "
             "if {torch}.is_tensor(t))",
    # a flat dict of arrays or tensors (safetensors' save_file / load_file)
    "tensors": 'sum(getattr(t, "nbytes", 0) for t in {v}.values())',
    # a torch module (its class is known) without calling its state_dict() (no hooks, no FSDP
    # gather): the bytes of its parameters and buffers
    "module": "sum(t.element_size() * t.nelement() for t in [*{v}.parameters(), *{v}.buffers()])",
    # a torch optimizer (known to be one), without calling its state_dict(): its state's tensors
    "optimizer": "sum(t.element_size() * t.nelement() for t in {torch}.utils._pytree.tree_flatten("
                 "list({v}.state.values()))[0] if {torch}.is_tensor(t))",
}
#: kinds whose type the annotation cannot know (np.load: an array or an NpzFile; cv2.imread:
#: an array or None; a write's buffer; a file object's position; a module or an optimizer not
#: known to be one): measured by ``dftpass.runtime.nbytes`` (one call, never ``-1``)
RUNTIME_SIZED = frozenset({"maybe_array", "any", "position", "object"})
#: nothing in memory says it (a parsed configuration not bound to a name): no ``image_size``
UNSIZED = "unknown"


def image_size(value: str, kind: str, torch: str = "torch") -> str:
    """The expression that measures ``image_size`` of ``value`` (a name or ``self.x``), an
    object of a statically known ``kind`` (a key of :data:`IMAGE_SIZE`); ``torch`` is the
    file's name for the torch module. :meth:`FileNames.image_size` also takes the others."""
    return IMAGE_SIZE[kind].format(v=value, torch=torch)


# -- runtime environment (what `dftpass trace` sets) -------------------------------------

#: every dftracer environment variable starts with this
ENV_PREFIX = "DFTRACER_"
ENV_ENABLE = "DFTRACER_ENABLE"
ENV_METADATA = "DFTRACER_INC_METADATA"
ENV_LOG_FILE = "DFTRACER_LOG_FILE"
ENV_DATA_DIR = "DFTRACER_DATA_DIR"
ENV_INIT = "DFTRACER_INIT"
ENV_TIME_METRIC = "DFTRACER_TIME_METRIC"
ENV_COMPRESSION = "DFTRACER_TRACE_COMPRESSION"
#: keeps dftracer's POSIX interception out of the process
ENV_DISABLE_POSIX = "DFTRACER_DISABLE_POSIX"
#: selective aggregation: hot events folded into ``ph`` 3 records (count, dur_sum, ...)
ENV_AGGREGATION = "DFTRACER_ENABLE_AGGREGATION"
ENV_AGGREGATION_TYPE = "DFTRACER_AGGREGATION_TYPE"
AGGREGATION_SELECTIVE = "SELECTIVE"

#: the install-time switches of a source build (read by CMake, not at run time)
BUILD_FLAG_HIP = "DFTRACER_ENABLE_HIP_TRACING"
BUILD_FLAG_MPI = "DFTRACER_ENABLE_MPI"
BUILD_FLAG_HDF5 = "DFTRACER_ENABLE_HDF5"
PIP_PACKAGE = "dftracer"


def traced_env(log_prefix: str, data_dir: str | None = None, posix: bool = True,
               aggregate: bool = False) -> dict[str, str]:
    """The environment that switches tracing on for one run (``1`` is the only value that enables).

    Aggregation is always set, one way or the other (``aggregate``): dftracer's newer line
    turns it on by default for short events, so the same annotated program would trace
    differently with another install (docs/decisions.md). On, it is selective: hot events are
    folded into ``ph`` 3 records (counts and sums kept, single events gone).

    ``posix=False`` keeps dftracer's POSIX interception out of the process
    (``DFTRACER_DISABLE_POSIX=1``): bound at ``initialize_log``, it makes tensorstore's file
    locks fail (``Failed to lock file: Bad address``), so every orbax checkpoint of a traced
    JAX program failed. It is not the default: forked DataLoader workers then leave empty
    trace files (their finalize goes through the interception)."""
    env = {ENV_ENABLE: "1", ENV_METADATA: "1", ENV_LOG_FILE: log_prefix, ENV_AGGREGATION: "1" if aggregate else "0"}
    if aggregate:
        env[ENV_AGGREGATION_TYPE] = AGGREGATION_SELECTIVE
    if data_dir:
        env[ENV_DATA_DIR] = data_dir
    if not posix:
        env[ENV_DISABLE_POSIX] = "1"
    return env


#: libraries whose file I/O fails under dftracer's POSIX interception (see :func:`traced_env`)
POSIX_HAZARDS = ("tensorstore", "orbax")


# -- names in one file --------------------------------------------------------------------

#: local names dftpass introduces, with fallbacks when the file already uses the name
_CANDIDATES = {
    "ai": ("ai", "dft_ai", "_dft_ai"),
    "dftracer": ("dftracer", "_dftracer"),
    "dft_fn": ("dft_fn", "_dft_fn"),
    # dftracer's own settings module: ``DFTRACER_ENABLE``, read once at its import
    "env": ("_dft_env",),
    # its torch.compile backend (ML-R29; the package's ``dynamo`` is an object, not the module)
    # and its torch.profiler hook (ML-R28)
    "create_backend": ("_dft_create_backend",),
    "profiling": ("_dft_profiling",),
    "os": ("os", "_dft_os"),
    "atexit": ("atexit", "_dft_atexit"),
    "signal": ("signal", "_dft_signal"),
    "multiprocessing": ("multiprocessing", "_dft_multiprocessing"),
    "json": ("json", "_dft_json"),
    "log": ("_dft_log", "_dft_log_"),
    "dlp": ("dlp", "_dlp", "_dft_dlp"),
    "worker_init": ("_dft_worker_init", "_dft_worker_init_"),
    "functools": ("functools", "_dft_functools"),
    # framework modules the emitted code calls (``jax.block_until_ready``, a callback's base)
    "jax": ("jax", "_dft_jax"),
    "torch": ("torch", "_dft_torch"),
    "lightning.pytorch": ("_dft_lightning",),
    "pytorch_lightning": ("pytorch_lightning", "_dft_pytorch_lightning"),
    "keras": ("keras", "_dft_keras"),
    "tensorflow": ("tf", "_dft_tf"),
    # the framework callbacks an annotated program builds (dftpass.runtime)
    "dftpass.runtime": ("_dft_runtime",),
}
#: the API's symbols besides ``ai``: the logger and the function decorator. :func:`recognize`
#: returns paths that start with one of them for their uses
OTHER_SYMBOLS = ("dftracer", "dft_fn", "env", "create_backend", "profiling")
_API_SYMBOLS = ("ai", *OTHER_SYMBOLS)
#: names dftpass defines (not imports) in a file
_OWN_NAMES = ("log", "dlp", "worker_init")
_STDLIB = ("os", "atexit", "signal", "multiprocessing", "json", "functools")


def is_emitted_name(name: str, symbol: str) -> bool:
    """Whether ``name`` is one dftpass gives its own ``symbol`` ("log": the tracer object its
    lifecycle code initializes, "worker_init": its DataLoader workers' initializer)."""
    return any(name == c or name.startswith(c + "_") for c in _CANDIDATES[symbol])
#: other modules the emitted code may import (only where the program already uses them)
_MODULES = (*_STDLIB, "jax", "torch", "lightning.pytorch", "pytorch_lightning", "keras", "tensorflow",
            "dftpass.runtime")


def _existing(fs: FileSummary, symbol: str) -> str | None:
    """The local name under which the file already has ``symbol`` at its top level (its own
    import, or a project module's re-export), if it has it."""
    for local, qualified in fs.imports.items():
        if local not in fs.top_imports:
            continue
        found = api_symbol(qualified) if symbol in _API_SYMBOLS else (symbol if qualified == symbol else None)
        if found == symbol or (symbol in _API_SYMBOLS and fs.reexported_api.get(local) == symbol):
            return local
    return None


@attrs.define
class FileNames:
    """The names dftpass uses in one file, chosen not to collide with the file's own names.

    Asking for a name records that the file needs it; :meth:`imports_needed` then lists
    the imports to add. A file that already imports ``ai`` from dftracer keeps its alias.
    """

    fs: FileSummary
    used: set[str] = attrs.field(factory=set)
    _chosen: dict[str, str] = attrs.field(factory=dict)

    def alias(self, symbol: str) -> str:
        """The name ``symbol`` has in this file, without recording that the file needs it."""
        used = symbol in self.used
        name = self._name(symbol)
        if not used:
            self.used.discard(symbol)
        return name

    def _name(self, symbol: str) -> str:
        if symbol not in self._chosen:
            existing = _existing(self.fs, symbol) if symbol not in _OWN_NAMES else None
            if existing:
                self._chosen[symbol] = existing
            else:
                for cand in _CANDIDATES[symbol]:
                    if cand not in self.fs.bound_names:
                        self._chosen[symbol] = cand
                        break
                else:  # pragma: no cover - every fallback taken
                    self._chosen[symbol] = _CANDIDATES[symbol][-1] + "_"
        self.used.add(symbol)
        return self._chosen[symbol]

    # -- expressions --------------------------------------------------------------------
    def node(self, path: str) -> str:
        """``ai.compute.forward`` (or ``ai`` for the root), under this file's alias."""
        if path not in NODES:
            raise KeyError(f"not a dftracer ai node: {path!r}")
        ai = self._name("ai")
        return f"{ai}.{path}" if path else ai

    def decorator(self, path: str) -> str:
        return self.node(path)

    def init_decorator(self, path: str) -> str:
        """``ai.checkpoint.init``: the decorator of a constructor, a node of :data:`INIT_NODES`
        (its event: ``checkpoint.init``, cat ``checkpoint``)."""
        if path not in INIT_NODES:
            raise KeyError(f"not a dftracer node whose init dftpass emits: {path!r}")
        return f"{self._name('ai')}.{path}{INIT_SUFFIX}"

    def derived(self, path: str, name: str) -> str:
        """``ai.data.preprocess.derive(name="collate")``: a node of :data:`DERIVED`, usable as a
        decorator or ``with`` item like any node (``derive`` caches the child by name: ~0.3 µs
        after the first call, tracing on or off)."""
        if (path, name) not in DERIVED:
            raise KeyError(f"not a derived dftracer node dftpass emits: {path!r} / {name!r}")
        return f'{self.node(path)}.derive(name="{name}")'

    # -- generic regions (dft_fn) ------------------------------------------------------
    @staticmethod
    def generic_cat(module: str) -> str:
        """The cat of a module's generic events: the module's name (``engine``), with ``.py``
        added when that name is one of the categories dftracer or dftpass's analysis give a
        meaning to (a ``data.py``'s functions must not count as data loading)."""
        reserved = {cat for cat, _ in NODES.values()} | {*TRACE_SYSCALL_CATS, TRACE_META_CAT, "dynamo", "PP", "hip"}
        return f"{module}.py" if module in reserved or module.lower() in reserved else module

    def module_logger(self, cat: str) -> str:
        """The file's one generic logger, ``dlp = dft_fn("train", name="train")`` (the DLIO
        pattern): its events have cat ``cat``. ``name=`` spares the constructor the stack
        walk it does without one (78 µs, tracing on or off)."""
        return f'{self._name("dlp")} = {self._name("dft_fn")}("{cat}", name="{cat}")'

    def generic_decorator(self, kind: str = "log", logger: str | None = None) -> str:
        """``dlp.log`` (a function), ``dlp.log_init`` (a constructor), ``dlp.log_static`` (a
        static method, under ``@staticmethod``); ``logger`` is an existing logger's name."""
        if kind not in GENERIC_DECORATORS:
            raise KeyError(f"not a dft_fn decorator: {kind!r}")
        return f"{logger or self._name('dlp')}.{kind}"

    def generic_region(self, cat: str, name: str) -> str:
        """A ``with`` item for a region of its own (an ``async def`` body): a new ``dft_fn``
        per entry, so nested or concurrent regions never share one."""
        return f'{self._name("dft_fn")}("{cat}", name="{name}")'

    def threaded_region(self, path: str) -> str:
        """A ``with`` item that writes the event of node ``path`` (its cat and name) from a new
        ``dft_fn`` per entry: an ``ai`` node keeps its start time on one shared object, so two
        threads inside its region at once (tf.data's parallel map calls) would spoil both
        events; a region of its own per call cannot."""
        cat, name = event(path)
        return self.generic_region(cat, name)

    def iter_callee(self, path: str) -> str:
        return f"{self.node(path)}.iter"

    @staticmethod
    def iter_options(body: bool = True) -> str:
        """The arguments after the iterable of ``X.iter(it, ...)``: none, or no event for the
        loop's body (the tracing budget's second lever)."""
        return "" if body else ", include_block=False"

    def start(self, path: str) -> str:
        return f"{self.node(path)}.start()"

    def stop(self, path: str) -> str:
        return f"{self.node(path)}.stop()"

    def update(self, **values: str | None) -> str:
        args = ", ".join(f"{k}={v}" for k, v in values.items() if v)
        return f"{self._name('ai')}.update({args})"

    def subtree_update(self, subtrees: list[str], **values: str | None) -> str:
        """``ai.compute.update(step=s, epoch=e); ai.dataloader.update(...)``: the values on the
        subtrees whose events a training step writes, instead of the whole tree (``ai.update``
        walks every node: ~25 µs off and ~110 µs on per call, measured by bench/overhead.py;
        ``ai.compute.update``, four nodes: ~2 / ~12 µs). An empty list is ``ai.update``."""
        if not subtrees:
            return self.update(**values)
        for head in subtrees:
            if not any(n == head or n.startswith(head + ".") for n in NODES):
                raise KeyError(f"not a dftracer ai subtree: {head!r}")
        args = ", ".join(f"{k}={v}" for k, v in values.items() if v)
        ai = self._name("ai")
        return "; ".join(f"{ai}.{head}.update({args})" for head in subtrees)

    def when_tracing(self, code: str, every: str = "") -> str:
        """``if <tracing is on>: code``, for per-step statements whose work is wasted with
        tracing off: an ``update`` walks its nodes even then (ML-R8's, ~3-6 µs a step), the
        test costs ~0.05 µs. The flag is dftracer's own (``dftracer.python.env``, set once at
        its import, as the tracer itself reads it). ``every`` adds a condition after it (the
        tracing budget's ``step % k == 0``)."""
        condition = f"{self._name('env')}.{ENV_ENABLE}" + (f" and {every}" if every else "")
        return f"if {condition}:\n    {code}\n"

    def dynamo_backend(self, name: str) -> str:
        """``torch.compile``'s ``backend=``: dftracer's Dynamo backend, an event per FX op
        (cat ``dynamo``)."""
        return f'{self._name("create_backend")}(name="{name}")'

    def profiler_handler(self) -> str:
        """``torch.profiler.profile``'s ``on_trace_ready=``: dftracer's handler, which turns the
        profiler's events into dftracer events (cat ``PP``)."""
        return f"{self._name('profiling')}.trace_handler"

    def module(self, name: str) -> str:
        """The file's name for module ``name`` (one of :data:`_MODULES`), imported if needed."""
        if name not in _MODULES:
            raise KeyError(f"not a module dftpass's code imports: {name!r}")
        return self._name(name)

    def own(self, kind: str) -> str:
        """The name of something dftpass defines in the file (``lightning_callback``: a
        framework plugin's callback class), clear of the file's own names."""
        if kind not in _OWN_NAMES or kind in ("log", "dlp"):
            raise KeyError(f"not a definition dftpass emits: {kind!r}")
        first = _CANDIDATES[kind][0]
        if kind not in self._chosen and any(c.name == first and len(c.stmt) == 1 for c in self.fs.classes):
            self._chosen[kind] = first  # defined by an earlier run: the name is dftpass's own
        return self._name(kind)

    def image_size(self, value: str | None, kind: str, torch: str = "torch") -> str | None:
        """The ``image_size`` expression of ``value`` in this file: inline for a kind known
        statically (:data:`IMAGE_SIZE`), ``dftpass.runtime.nbytes(value)`` for one that is not
        (:data:`RUNTIME_SIZED`, imported if needed), None when nothing can be measured (no
        name holds the object, or :data:`UNSIZED`)."""
        if not value or kind == UNSIZED:
            return None
        if kind in RUNTIME_SIZED:
            return f"{self.module('dftpass.runtime')}.nbytes({value})"
        return image_size(value, kind, torch)

    def node_update(self, path: str, **values: str | None) -> str:
        """``ai.data.io.read.update(image_size=...)``: values that stick to the later events of
        one node (and of nodes derived from it), not of the whole tree as ``update`` does; a
        leaf's update costs ~0.4 µs with tracing off and ~1.4 µs on (``ai.update``: ~15 / ~65 µs)."""
        args = ", ".join(f"{k}={v}" for k, v in values.items() if v)
        return f"{self.node(path)}.update({args})"

    def metadata(self, fields: list[tuple[str, str, bool]]) -> str:
        """Log the fields of parsed configurations once, as custom metadata lines (``CM``):
        ``dftpass.runtime.log_parameters(prefix, value)`` per (expression, key prefix, is a
        mapping) of ``fields`` (the runtime reads a mapping's items or an object's attributes,
        only while this process traces, and never raises)."""
        rt = self.module("dftpass.runtime")
        return "".join(f'{rt}.{RUNTIME_LOG_PARAMETERS}("{prefix}", {value})\n' for value, prefix, _ in fields)

    # -- DataLoader workers (ML-R21) ----------------------------------------------------
    def worker_init_assignment(self, loader: str) -> str:
        """``loader.worker_init_fn = dftpass.runtime.worker_init(loader.worker_init_fn)``: a
        ``worker_init_fn`` that traces the worker, then runs the loader's own. It may be set
        after the loader is built (each iterator reads it), and it pickles for spawn workers."""
        return f"{loader}.worker_init_fn = {self.module('dftpass.runtime')}.{RUNTIME_WORKER_INIT}({loader}.worker_init_fn)"

    # -- the program's lifecycle (ML-R1) ---------------------------------------------------
    def lifecycle_prologue(self, sample_every: int = 1) -> list[str]:
        """Initialize tracing once per process, only when it is on, and finalize at exit
        (``dftpass.runtime.initialize``: the trace prefix given, so no ``dft.log`` is left
        behind; a process that traces already is not initialized again; the program's SIGINT
        handler given back). ``sample_every`` > 1: the step regions of one step in k
        (``dftpass.runtime.sampling``)."""
        return [f"{self._name('log')} = {self.module('dftpass.runtime')}.{RUNTIME_INITIALIZE}"
                f"({_sampling_argument(sample_every)})\n"]

    def script_prologue(self, sample_every: int = 1) -> list[str]:
        """The lifecycle of a module-level script (no function to wrap): initialize, then
        open the root region; ``atexit`` closes it, then finalizes."""
        arguments = ", ".join(a for a in ("root=True", _sampling_argument(sample_every)) if a)
        return [f"{self._name('log')} = {self.module('dftpass.runtime')}.{RUNTIME_INITIALIZE}({arguments})\n"]

    def lifecycle_finally(self) -> list[str]:
        """The end of a ``__main__`` block: the program's end."""
        return [f"{self._name('log')}.finalize()\n"]

    def function_lifecycle_finally(self) -> list[str]:
        """The end of a function that initializes (a console-script or process target): a
        child process finalizes now (it may end without ``atexit``), the main one at exit."""
        return [f"{self.module('dftpass.runtime')}.{RUNTIME_FINALIZE_CHILD}({self._name('log')})\n"]

    # -- imports ------------------------------------------------------------------------
    def imports_needed(self) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        """(dftracer names to import as (name, alias), stdlib modules as (module, alias)),
        leaving out what the file already imports."""
        api = [(_IMPORT_NAMES.get(s, s), self._chosen[s]) for s in _API_SYMBOLS
               if s in self.used and not _existing(self.fs, s)]
        std = [(s, self._chosen[s]) for s in sorted(_MODULES) if s in self.used and not _existing(self.fs, s)]
        return api, std


def _sampling_argument(sample_every: int) -> str:
    """``sample_every=k`` of the runtime's ``initialize``, or nothing for every step."""
    return f"{RUNTIME_SAMPLE_EVERY}={int(sample_every)}" if sample_every > 1 else ""


# -- recognising what is already there ------------------------------------------------------


#: what dftpass's runtime package is called, and the functions of it that emitted code calls
RUNTIME_MODULE = "dftpass.runtime"
RUNTIME_INITIALIZE, RUNTIME_FINALIZE_CHILD = "initialize", "finalize_child"
RUNTIME_WORKER_INIT, RUNTIME_LOG_PARAMETERS = "worker_init", "log_parameters"
#: ``initialize``'s argument that samples the step regions (:mod:`dftpass.runtime.sampling`)
RUNTIME_SAMPLE_EVERY = "sample_every"

#: sampled step regions (``dftpass.runtime.sampling``, which spells them again, held to these by
#: tests/core/test_runtime.py): the environment that sets k at run time, the subtrees a step's
#: gate samples, the node whose batches are the steps, the prefix of the trace's metadata lines
SAMPLING_ENV_EVERY, SAMPLING_ENV_WARMUP = "DFTPASS_SAMPLE_EVERY", "DFTPASS_SAMPLE_WARMUP"
SAMPLED_SUBTREES = ("compute", "device", "comm", "data", "dataloader")
SAMPLING_CLOCK = "dataloader.fetch"
SAMPLING_META_PREFIX = "dftpass.sampling."

#: the package whose functions are dftracer's own (its signal handler lives there)
_RUNTIME_PACKAGE = "dftracer"


@functools.lru_cache(maxsize=4096)
def api_symbol(qualified: str) -> str | None:
    """The API symbol a fully qualified import names (``dftracer.python.ai`` -> ``ai``,
    ``dlio_profiler.logger.fn_interceptor`` -> ``dft_fn``), ``module`` for the API module
    itself, None if it is not dftracer's."""
    for module in API_MODULES:
        if qualified == module:
            return "module"
        if qualified.startswith(module + "."):
            name = qualified[len(module) + 1:]
            return _OLD_SYMBOLS.get(name, name)
    return None


#: id(summary) -> (a weak reference to it, the sizes its aliases were computed from, the
#: aliases): :func:`recognize` asks for a file's aliases ~200,000 times on a large project
_ALIASES: dict[int, tuple[weakref.ref, tuple[int, int], dict[str, str]]] = {}


def aliases(fs: FileSummary) -> dict[str, str]:
    """Local names bound to dftracer symbols in ``fs``: local -> symbol ("ai", "dftracer", ...),
    through the file's own imports and through project modules that re-export them. Cached
    per summary until its imports or re-exports grow (the call graph adds re-exports)."""
    sizes = (len(fs.imports), len(fs.reexported_api))
    cached = _ALIASES.get(id(fs))
    if cached is not None and cached[0]() is fs and cached[1] == sizes:
        return cached[2]
    out = dict(fs.reexported_api)
    for local, qualified in fs.imports.items():
        symbol = api_symbol(qualified)
        if symbol is not None:
            out[local] = symbol
    key = id(fs)
    _ALIASES[key] = (weakref.ref(fs, lambda _, key=key: _ALIASES.pop(key, None)), sizes, out)
    return out


def recognize(fs: FileSummary, text: str | None) -> str | None:
    """The dftracer construct a dotted text refers to, as a path below ``ai``:
    ``ai.dataloader.fetch.iter`` -> ``dataloader.fetch.iter``; ``ai`` -> ``""``;
    ``dftracer.initialize_log`` -> ``dftracer.initialize_log``. None if it is not dftracer's."""
    if not text:
        return None
    head, _, rest = text.partition(".")
    symbol = aliases(fs).get(head)
    if symbol == "module":  # import dftracer.python as dft; dft.ai.compute
        symbol, _, rest = rest.partition(".")
        symbol = _OLD_SYMBOLS.get(symbol, symbol)
    if not symbol:
        return None
    if symbol == "ai":
        return rest
    return f"{symbol}.{rest}" if rest else symbol


def is_ai_path(node: str | None) -> bool:
    """Whether a path :func:`recognize` returned is below ``ai`` (not the logger's, not ``dft_fn``)."""
    return node is not None and not node.startswith(OTHER_SYMBOLS)


def is_node(fs: FileSummary, text: str | None, path: str, method: str = "") -> bool:
    """Whether ``text`` is node ``path`` (optionally followed by ``.method``) in ``fs``."""
    found = recognize(fs, text)
    if found is None:
        return False
    want = ".".join(p for p in (path, method) if p)
    return found == want


def is_initialize(fs: FileSummary, callee: str) -> bool:
    """``dftracer.initialize_log(...)``, or the runtime's ``initialize()`` dftpass writes."""
    return recognize(fs, callee) == "dftracer.initialize_log" or runtime_call(fs, callee) == RUNTIME_INITIALIZE


def runtime_call(fs: FileSummary, callee: str | None) -> str | None:
    """The name of the ``dftpass.runtime`` function ``callee`` calls in ``fs`` (``initialize``,
    ``log_parameters``, ``worker_init``, ``nbytes``...), or None."""
    if not callee or "." not in callee:
        return None
    head, _, name = callee.rpartition(".")
    return name if fs.imports.get(head) == RUNTIME_MODULE else None


def is_derived(fs: FileSummary, text: str | None, path: str) -> bool:
    """Whether ``text`` is ``path.derive(...)`` in ``fs``, whatever the derived name (the
    summaries' dotted texts drop a call's arguments: ``ai.data.preprocess.derive()``)."""
    return recognize(fs, text) == f"{path}.derive()"


def is_tracing_test(text: str | None) -> bool:
    """The test of an ``if`` that runs only while this process traces, as dftpass writes it
    (:meth:`FileNames.when_tracing`, :meth:`FileNames.metadata`): ``env.DFTRACER_ENABLE``,
    ``dftracer.get_instance().logger is not None``."""
    return bool(text) and (text.endswith(f".{ENV_ENABLE}") or text.endswith(".get_instance().logger"))


def is_metadata_call(callee: str) -> bool:
    """``x.log_metadata_event(...)`` on any tracer object (``dftracer.get_instance()``, a
    ``log`` that ``initialize_log`` returned): the method name is dftracer's alone."""
    return callee.rsplit(".", 1)[-1] == METADATA_METHOD and "." in callee


# -- names in the trace files dftracer writes (read by :mod:`dftpass.traces`) ----------------

#: cat of dftracer's own records: metadata lines (ph 4) and the ``start``/``end`` events
TRACE_META_CAT = "dftracer"
#: metadata line names: host hash, file hash, string hash, custom metadata (``log_metadata_event``)
TRACE_META_HOST, TRACE_META_FILE, TRACE_META_STRING, TRACE_META_CUSTOM = "HH", "FH", "SH", "CM"
#: the CM key that carries ``DFTRACER_TIME_METRIC``, and the units it may name
TRACE_TIME_METRIC_KEY = "time_metric"
TRACE_TIME_METRICS = ("NS", "US", "MS", "SEC")
#: the per-process ``start`` event (``args.ppid`` = parent pid)
TRACE_START_EVENT = "start"
#: cats of the intercepted C library calls
TRACE_SYSCALL_CATS = ("POSIX", "STDIO")
#: the last part of a trace file name, ``<prefix>-<16 hex>-<role>.pfw[.gz]``
TRACE_FILE_ROLES = ("app", "preload", "fork")
TRACE_SUFFIXES = (".pfw", ".pfw.gz")
#: event names of intercepted calls that move data (bytes moved = ``args.ret``) ...
TRACE_READ_OPS = ("read", "pread", "pread64", "readv", "preadv", "preadv2", "fread")
TRACE_WRITE_OPS = ("write", "pwrite", "pwrite64", "writev", "pwritev", "pwritev2", "fwrite")
#: ... and of those that only touch metadata (the "metadata ops" of an I/O summary)
TRACE_METADATA_OPS = (
    "open", "open64", "openat", "openat64", "creat", "creat64", "close", "fopen", "fopen64", "fclose",
    "stat", "stat64", "lstat", "lstat64", "fstat", "fstat64", "fstatat", "fstatat64", "statx",
    "__xstat", "__xstat64", "__lxstat", "__lxstat64", "__fxstat", "__fxstat64", "__fxstatat", "__fxstatat64",
    "lseek", "lseek64", "fseek", "fseeko", "ftell", "fsync", "fdatasync", "ftruncate", "truncate",
    "opendir", "closedir", "readdir", "readdir64", "mkdir", "rmdir", "unlink", "remove", "rename",
    "access", "faccessat", "fcntl", "dup", "dup2", "link", "symlink", "readlink", "chmod", "chown",
    "fchmod", "fchown", "utime", "chdir",
)


# -- regions as emitted text (core/nesting.py reads them) -----------------------------------
#: the nodes the ``dftpass.runtime`` callbacks open while a framework runs its loops
#: (dftpass.runtime.regions.PATHS; tests/core/test_nesting.py holds them equal)
CALLBACK_NODES = frozenset({"pipeline.epoch", "pipeline.evaluate", "dataloader.fetch", "compute",
                            "compute.backward", "compute.step", "checkpoint.io.write"})
_CALLBACK_CALL = re.compile(r"\.\w*Callback\(\)")
_REGION_METHOD = re.compile(r"\.(start|stop)\(\)$")
_DERIVED_NODE = re.compile(r'(.*)\.derive\(name="([^"]+)"\)$')


def hands_callback(code: str) -> bool:
    """Whether emitted code hands a framework one of ``dftpass.runtime``'s callbacks."""
    return bool(_CALLBACK_CALL.search(code))


def region_node(code: str, ai: str) -> str | None:
    """The node an emitted expression names, under the file's ``ai`` alias:
    ``ai.checkpoint.capture`` -> ``checkpoint.capture``; ``ai.dataloader.fetch.iter`` and
    ``....start()`` -> ``dataloader.fetch``; ``ai.data.preprocess.derive(name="collate")``
    -> ``data.preprocess#collate``; None for what is not under ``ai``."""
    text = code.strip()
    if not (text == ai or text.startswith(ai + ".")):
        return None
    path = text[len(ai) + 1:] if text != ai else ""
    derived = _DERIVED_NODE.match(path)
    if derived:
        return f"{derived.group(1)}#{derived.group(2)}"
    path = _REGION_METHOD.sub("", path)
    return path[:-len(".iter")] if path.endswith(".iter") else path

