"""What an annotated program imports from dftpass when it runs: its lifecycle (``initialize``,
``finalize_child``, ``worker_init``, ``log_parameters``: one call each in the program), the
framework callbacks, and ``nbytes``, the size of what an I/O region moved when its type is
known only then.

Lightning and Keras run the epoch and batch loops themselves, so the regions of those loops
come from a callback. ML-R12 and ML-R13 add one line to the program that builds it::

    import dftpass.runtime as _dft_runtime
    ...
    trainer.callbacks.append(_dft_runtime.LightningCallback())
    model.fit(x, y, callbacks=[_dft_runtime.KerasCallback()])

This package imports nothing from the rest of dftpass and nothing beyond dftracer and the
framework the program already uses: a callback's class is made the first time the program
asks for it, deriving from the ``Callback`` of the package the program imports (their class
hierarchies are apart: a ``pytorch_lightning`` trainer refuses a ``lightning.pytorch``
callback). docs/decisions.md, "Framework callbacks live in dftpass.runtime", says why.
"""

from __future__ import annotations

import importlib

from dftpass.runtime.lifecycle import finalize_child, initialize, log_parameters, worker_init
from dftpass.runtime.sizes import nbytes

#: callback name -> (the package the program uses, the path of its Callback base in it, the
#: module of this package with the hooks)
CALLBACKS = {
    "LightningCallback": ("lightning.pytorch", "Callback", "lightning"),
    "PytorchLightningCallback": ("pytorch_lightning", "Callback", "lightning"),
    "KerasCallback": ("keras", "callbacks.Callback", "keras"),
    "TfKerasCallback": ("tensorflow", "keras.callbacks.Callback", "keras"),
}

__all__ = sorted([*CALLBACKS, "finalize_child", "initialize", "log_parameters", "nbytes", "worker_init"])


def __getattr__(name: str):
    """``dftpass.runtime.LightningCallback`` and the others, made on first use (PEP 562)."""
    if name not in CALLBACKS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    package, path, hooks_module = CALLBACKS[name]
    base = importlib.import_module(package)
    for part in path.split("."):
        base = getattr(base, part)
    hooks = importlib.import_module(f"{__name__}.{hooks_module}").Hooks
    # named and placed as an attribute of this module, so pickle (a spawned DDP worker, a
    # deep copy of the trainer) finds the class again by its name
    cls = type(name, (hooks, base), {"__module__": __name__, "__qualname__": name, "__doc__": hooks.__doc__})
    globals()[name] = cls
    return cls
