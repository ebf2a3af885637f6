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
    "log": ("_dft_log", "_dft_log_"),
}
_API_SYMBOLS = ("ai", "dftracer", "dft_fn")
_STDLIB = ("os", "atexit")


def _existing(fs: FileSummary, symbol: str) -> str | None:
    """The local name under which the file already has ``symbol``, if it has it."""
    target = f"{API_MODULE}.{symbol}" if symbol in _API_SYMBOLS else symbol
    for local, qualified in fs.imports.items():
        if qualified == target and local in fs.top_imports:
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
        """Initialize tracing once, only when it is on, and finalize at exit.

        ``initialize_log`` leaves a ``dft.log`` in the working directory: always with tracing
        off (so it is not called then), and with tracing on unless it is given the trace
        prefix (so it is given ``DFTRACER_LOG_FILE``, which it would read anyway, and the
        file lands beside the traces)."""
        log, dft, os_, atexit = self._name("log"), self._name("dftracer"), self._name("os"), self._name("atexit")
        return [
            f"{log} = (\n"
            f"    {dft}.initialize_log(logfile={os_}.environ.get(\"{ENV_LOG_FILE}\"), data_dir=None, process_id=-1)\n"
            f"    if {os_}.environ.get(\"{ENV_ENABLE}\") == \"1\"\n"
            f"    else {dft}.get_instance()\n"
            f")\n",
            f"{atexit}.register({log}.finalize)\n",
        ]

    def lifecycle_finally(self) -> list[str]:
        return [f"{self._name('log')}.finalize()\n"]

    # -- imports ------------------------------------------------------------------------
    def imports_needed(self) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
        """(dftracer names to import as (name, alias), stdlib modules as (module, alias)),
        leaving out what the file already imports."""
        api = [(s, self._chosen[s]) for s in _API_SYMBOLS if s in self.used and not _existing(self.fs, s)]
        std = [(s, self._chosen[s]) for s in sorted(_STDLIB) if s in self.used and not _existing(self.fs, s)]
        return api, std


# -- recognising what is already there ------------------------------------------------------


def aliases(fs: FileSummary) -> dict[str, str]:
    """Local names bound to dftracer symbols in ``fs``: local -> symbol ("ai", "dftracer", ...)."""
    out = {}
    for local, qualified in fs.imports.items():
        if qualified.startswith(API_MODULE + "."):
            out[local] = qualified[len(API_MODULE) + 1:]
    return out


def recognize(fs: FileSummary, text: str | None) -> str | None:
    """The dftracer construct a dotted text refers to, as a path below ``ai``:
    ``ai.dataloader.fetch.iter`` -> ``dataloader.fetch.iter``; ``ai`` -> ``""``;
    ``dftracer.initialize_log`` -> ``dftracer.initialize_log``. None if it is not dftracer's."""
    if not text:
        return None
    head, _, rest = text.partition(".")
    symbol = aliases(fs).get(head)
    if symbol is None:
        return None
    if symbol == "ai":
        return rest
    return f"{symbol}.{rest}" if rest else symbol


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
