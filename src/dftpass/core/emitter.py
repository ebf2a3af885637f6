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

import attrs

from dftpass.core.summary import FileSummary

#: the Python API package
API_MODULE = "dftracer.python"
#: every module a project may import dftracer's Python API from: today's, dftracer 1.x's,
#: and the dlio-profiler era's (hand-annotated projects use all three)
API_MODULES = (API_MODULE, "dftracer.logger", "dlio_profiler.logger")
#: older names of the API symbols
_OLD_SYMBOLS = {"dlio_logger": "dftracer", "fn_interceptor": "dft_fn"}

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

#: the suffixes ``X.iter(...)`` adds to an event name: time waiting for the next element,
#: and time spent in the loop body
ITER_SUFFIX = ".iter"
BLOCK_SUFFIX = ".block"

#: how decorators of several dftpass regions on one function nest (outermost first)
_NESTING = ("", "pipeline", "checkpoint", "compute", "data", "dataloader", "device", "comm", "other")


def nesting_rank(node: str) -> int:
    head = node.split(".", 1)[0]
    return _NESTING.index(head) if head in _NESTING else len(_NESTING)


def event(node: str, suffix: str = "") -> tuple[str, str]:
    """(cat, name) of the trace event a node writes (``suffix`` is ITER/BLOCK for ``.iter``)."""
    cat, name = NODES[node]
    return cat, name + suffix


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
#: selective aggregation: hot events folded into ``ph`` 3 records (count, dur_sum, ...)
ENV_AGGREGATION = "DFTRACER_ENABLE_AGGREGATION"
ENV_AGGREGATION_TYPE = "DFTRACER_AGGREGATION_TYPE"
AGGREGATION_SELECTIVE = "SELECTIVE"

#: the install-time switches of a source build (read by CMake, not at run time)
BUILD_FLAG_HIP = "DFTRACER_ENABLE_HIP_TRACING"
BUILD_FLAG_MPI = "DFTRACER_ENABLE_MPI"
BUILD_FLAG_HDF5 = "DFTRACER_ENABLE_HDF5"
PIP_PACKAGE = "dftracer"


def traced_env(log_prefix: str, data_dir: str | None = None) -> dict[str, str]:
    """The environment that switches tracing on for one run (``1`` is the only value that enables)."""
    env = {ENV_ENABLE: "1", ENV_METADATA: "1", ENV_LOG_FILE: log_prefix}
    if data_dir:
        env[ENV_DATA_DIR] = data_dir
    return env


# -- names in one file --------------------------------------------------------------------

#: local names dftpass introduces, with fallbacks when the file already uses the name
_CANDIDATES = {
    "ai": ("ai", "dft_ai", "_dft_ai"),
    "dftracer": ("dftracer", "_dftracer"),
    "dft_fn": ("dft_fn", "_dft_fn"),
    "os": ("os", "_dft_os"),
    "atexit": ("atexit", "_dft_atexit"),
    "signal": ("signal", "_dft_signal"),
    "multiprocessing": ("multiprocessing", "_dft_multiprocessing"),
    "log": ("_dft_log", "_dft_log_"),
}
#: the API's symbols besides ``ai``: the logger and the function decorator. :func:`recognize`
#: returns paths that start with one of them for their uses
OTHER_SYMBOLS = ("dftracer", "dft_fn")
_API_SYMBOLS = ("ai", *OTHER_SYMBOLS)
_STDLIB = ("os", "atexit", "signal", "multiprocessing")


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

    def _name(self, symbol: str) -> str:
        if symbol not in self._chosen:
            existing = _existing(self.fs, symbol) if symbol != "log" else None
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

    def iter_callee(self, path: str) -> str:
        return f"{self.node(path)}.iter"

    def start(self, path: str) -> str:
        return f"{self.node(path)}.start()"

    def stop(self, path: str) -> str:
        return f"{self.node(path)}.stop()"

    def update(self, **values: str | None) -> str:
        args = ", ".join(f"{k}={v}" for k, v in values.items() if v)
        return f"{self._name('ai')}.update({args})"

    def lifecycle_prologue(self) -> list[str]:
        """Initialize tracing once per process, only when it is on, and finalize at exit.

        ``initialize_log`` leaves a ``dft.log`` in the working directory: always with tracing
        off (so it is not called then), and with tracing on unless it is given the trace
        prefix (so it is given ``DFTRACER_LOG_FILE``, which it would read anyway, and the
        file lands beside the traces). A process that already traces (a forked child, a
        function that is both a console script and called from a ``__main__`` block) is
        not initialized again. dftracer's import replaces the SIGINT handler with one that
        calls ``sys.exit(2)``; the program gets Python's own back, so its ``except
        KeyboardInterrupt:`` still runs (the trace is finalized on the way out all the same)."""
        log, dft, os_, atexit, sig = (self._name("log"), self._name("dftracer"), self._name("os"),
                                      self._name("atexit"), self._name("signal"))
        return [
            f"{log} = {dft}.get_instance()\n",
            f"if {os_}.environ.get(\"{ENV_ENABLE}\") == \"1\" and {log}.logger is None:\n"
            f"    {log} = {dft}.initialize_log(logfile={os_}.environ.get(\"{ENV_LOG_FILE}\"), data_dir=None, "
            f"process_id=-1)\n"
            f"    if getattr({sig}.getsignal({sig}.SIGINT), \"__module__\", \"\").startswith(\"{_RUNTIME_PACKAGE}\"):\n"
            f"        {sig}.signal({sig}.SIGINT, {sig}.default_int_handler)\n",
            f"{atexit}.register({log}.finalize)\n",
        ]

    def script_prologue(self) -> list[str]:
        """The lifecycle of a module-level script (no function to wrap): initialize, then
        open the root region; ``atexit`` closes it, then finalizes (last registered runs first)."""
        root, atexit = self.node(""), self._name("atexit")
        return [*self.lifecycle_prologue(), f"{root}.start()\n", f"{atexit}.register({root}.stop)\n"]

    def lifecycle_finally(self) -> list[str]:
        """The end of a ``__main__`` block: the program's end."""
        return [f"{self._name('log')}.finalize()\n"]

    def function_lifecycle_finally(self) -> list[str]:
        """The end of a function that initializes (a console-script or process target). In the
        main process ``atexit`` finalizes: the function may run again, and a finalized tracer
        must not be written to. A child process may end without ``atexit`` (a forked one ends
        with ``os._exit``), so there it finalizes now."""
        mp = self._name("multiprocessing")
        return [f"if {mp}.parent_process() is not None:\n    {self._name('log')}.finalize()\n"]

    # -- imports ------------------------------------------------------------------------
    def imports_needed(self) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        """(dftracer names to import as (name, alias), stdlib modules as (module, alias)),
        leaving out what the file already imports."""
        api = [(s, self._chosen[s]) for s in _API_SYMBOLS if s in self.used and not _existing(self.fs, s)]
        std = [(s, self._chosen[s]) for s in sorted(_STDLIB) if s in self.used and not _existing(self.fs, s)]
        return api, std


# -- recognising what is already there ------------------------------------------------------


#: the package whose functions are dftracer's own (its signal handler lives there)
_RUNTIME_PACKAGE = "dftracer"


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


def aliases(fs: FileSummary) -> dict[str, str]:
    """Local names bound to dftracer symbols in ``fs``: local -> symbol ("ai", "dftracer", ...),
    through the file's own imports and through project modules that re-export them."""
    out = dict(fs.reexported_api)
    for local, qualified in fs.imports.items():
        symbol = api_symbol(qualified)
        if symbol is not None:
            out[local] = symbol
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
    return recognize(fs, callee) == "dftracer.initialize_log"


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
