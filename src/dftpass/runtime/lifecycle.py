"""The lifecycle an annotated program runs: start tracing once per process when it is on,
finalize on every way out, trace DataLoader workers, log the program's parameters.

dftpass writes one call of each in the program (``_dft_log = _dft_runtime.initialize()``,
``loader.worker_init_fn = _dft_runtime.worker_init(loader.worker_init_fn)``,
``_dft_runtime.log_parameters("args", args)``) instead of the dozen lines each used to be
(issue 30: lean diffs). dftracer is imported only when a function runs: the program's own
import prelude has run by then (``import dftpass.runtime`` imports nothing).
"""

from __future__ import annotations

import functools
import os

#: what switches tracing on, and where the trace goes (as ``dftpass trace`` sets them)
_ENABLE, _LOG_FILE = "DFTRACER_ENABLE", "DFTRACER_LOG_FILE"
#: the longest parameter value written (a long list is cut)
METADATA_VALUE_MAX = 1024


def initialize(root: bool = False, sample_every: int | None = None):
    """Initialize tracing in this process, once, and only when it is on; finalize at exit.

    ``initialize_log`` leaves a ``dft.log`` in the working directory unless it is given the
    trace prefix, so it is given ``DFTRACER_LOG_FILE``. A process that already traces (a
    forked child, a function that is both a console script and called from a ``__main__``
    block) is not initialized again. dftracer's import replaces the SIGINT handler with one
    that calls ``sys.exit(2)``: the program gets Python's own back, so its ``except
    KeyboardInterrupt:`` still runs. ``root``: also open the program's root region (a
    module-level script, which has no function to decorate), closed at exit before the
    finalize. ``sample_every``: trace the step regions of one step in k
    (:mod:`dftpass.runtime.sampling`; ``DFTPASS_SAMPLE_EVERY`` in the environment rules over
    it). Returns dftracer's tracer object."""
    import atexit
    import signal

    from dftracer.python import dftracer

    log = dftracer.get_instance()
    if os.environ.get(_ENABLE) == "1" and log.logger is None:
        log = dftracer.initialize_log(logfile=os.environ.get(_LOG_FILE), data_dir=None, process_id=-1)
        if getattr(signal.getsignal(signal.SIGINT), "__module__", "").startswith("dftracer"):
            signal.signal(signal.SIGINT, signal.default_int_handler)
    if log.logger is not None:
        from dftpass.runtime import sampling

        every = sampling.every_from_env(sample_every)
        if every > 1:
            sampling.install(every, log=log)
    atexit.register(log.finalize)
    if root:
        from dftracer.python import ai

        ai.start()
        atexit.register(ai.stop)  # atexit runs the last registered first: the root closes, then finalize
    return log


def finalize_child(log) -> None:
    """The end of a function that initializes (a console-script or process target): in a
    child process, which may end without ``atexit`` (a forked one ends with ``os._exit``),
    finalize now; in the main process ``atexit`` does it (the function may run again)."""
    import multiprocessing

    if multiprocessing.parent_process() is not None:
        log.finalize()


def _trace_worker(worker_id, chain=None) -> None:
    """Trace this DataLoader worker (a ``spawn`` or ``forkserver`` one does not trace yet; a
    forked one already does), then run the loader's own ``worker_init_fn``. The worker ends
    through ``multiprocessing``'s exit path, not ``atexit``: the finalize is a
    ``multiprocessing.util.Finalize``."""
    import multiprocessing.util

    from dftracer.python import dftracer

    log = dftracer.get_instance()
    if os.environ.get(_ENABLE) == "1" and log.logger is None:
        log = dftracer.initialize_log(logfile=os.environ.get(_LOG_FILE), data_dir=None, process_id=-1)
        multiprocessing.util.Finalize(None, log.finalize, exitpriority=0)
    if chain is not None:
        chain(worker_id)


def worker_init(chain=None):
    """A ``worker_init_fn`` that traces the worker and then calls ``chain`` (the loader's own,
    or None). It pickles for spawn workers: a partial of a function of this module."""
    return functools.partial(_trace_worker, chain=chain)


def log_parameters(prefix: str, value) -> None:
    """Write each top-level field of a parsed configuration as a dftracer metadata line (``CM``)
    under ``<prefix>.<field>``: a mapping's items (a dict, an omegaconf ``DictConfig``), else
    an object's attributes (an argparse namespace, a dataclass). Only while this process traces;
    the native ``log_metadata_event`` takes strings and writes them unescaped, so key and value
    are JSON-escaped; nothing raises into the program."""
    from dftracer.python import dftracer

    log = dftracer.get_instance()
    if log.logger is None:
        return
    import json

    try:
        items = value.items() if hasattr(value, "items") else vars(value).items()
        for key, field in items:
            log.log_metadata_event(json.dumps(f"{prefix}.{key}")[1:-1],
                                   json.dumps(str(field)[:METADATA_VALUE_MAX])[1:-1])
    except Exception:  # a field that fails to read or print ends this configuration's fields
        pass
