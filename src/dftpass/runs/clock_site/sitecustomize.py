"""dftpass's clock for untraced runs (``dftpass optimize``), loaded by the interpreter because
dftpass puts this folder first on ``PYTHONPATH`` of the runs it times, and only of those.

It writes one JSON line per Python process to ``$DFTPASS_CLOCK_FILE``: the seconds from the
interpreter's start to the end of the last import the main script makes at its top level
(``import torch`` and the rest: the start-up no change of the program touches), and from
there to the process's exit (the program's own time). It adds one Python call per import
statement and nothing per step. A ``sitecustomize`` of the environment, which this module
shadows, is imported after it.
"""

import builtins
import json
import os
import sys
import time

_START = time.perf_counter()
_state = {"imports_end": _START}
_import = builtins.__import__


def _timed_import(name, globals=None, locals=None, fromlist=(), level=0):
    module = _import(name, globals, locals, fromlist, level)
    if globals is not None and globals.get("__name__") == "__main__":
        frame = sys._getframe(1)
        if frame.f_code.co_name == "<module>":
            _state["imports_end"] = time.perf_counter()
    return module


def _write():
    end = time.perf_counter()
    path = os.environ.get("DFTPASS_CLOCK_FILE")
    if not path:
        return
    line = json.dumps({"pid": os.getpid(), "ppid": os.getppid(), "startup_s": round(_state["imports_end"] - _START, 6),
                       "program_s": round(end - _state["imports_end"], 6)})
    try:
        with open(path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
    except OSError:
        pass


if os.environ.get("DFTPASS_CLOCK_FILE"):
    import atexit

    builtins.__import__ = _timed_import
    atexit.register(_write)

# the environment's own sitecustomize, if there is one, still runs
_here = os.path.dirname(os.path.abspath(__file__))
_saved_path = list(sys.path)
try:
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != _here]
    _mine = sys.modules.pop("sitecustomize", None)
    try:
        import sitecustomize  # noqa: F401
    except ImportError:
        pass
    finally:
        if _mine is not None:
            sys.modules["sitecustomize"] = _mine
finally:
    sys.path[:] = _saved_path
