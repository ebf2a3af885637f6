"""The built-in plugin: registers dftpass's own passes through the public hooks.

It is loaded like any third-party plugin (entry point ``dftpass = builtin``), and always,
even when entry-point auto-loading is switched off. Its passes are found, not listed:
:func:`discover`.
"""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import dftpass.plugins
from dftpass.core.hookspecs import hookimpl
from dftpass.core.passes import Pass
from dftpass.plugins.library import builtin_knowledge


def discover(package=dftpass.plugins) -> list[type[Pass]]:
    """Every pass defined in a module of one of the package's areas (``plugins/compute/``,
    ``plugins/analyses/``...): a rule file dropped into an area is found with no other file
    touched. An area whose ``__init__`` implements ``dftpass_passes`` is a plugin of its own
    (the framework plugins: registered through their entry points, as a third party's are)
    and is left to that. The order passes run in comes from their ``requires`` and ``after``
    alone (:meth:`dftpass.core.manager.PassManager.order`), never from this list."""
    found: list[type[Pass]] = []
    for area in sorted(pkgutil.iter_modules(package.__path__), key=lambda m: m.name):
        if not area.ispkg:
            continue
        area_module = importlib.import_module(f"{package.__name__}.{area.name}")
        if hasattr(area_module, "dftpass_passes"):
            continue
        for info in sorted(pkgutil.iter_modules(area_module.__path__), key=lambda m: m.name):
            module = importlib.import_module(f"{area_module.__name__}.{info.name}")
            found.extend(cls for _, cls in inspect.getmembers(module, inspect.isclass)
                         if issubclass(cls, Pass) and cls.__module__ == module.__name__ and "id" in cls.__dict__)
    return found


PASSES = discover()


@hookimpl
def dftpass_passes():
    return PASSES


@hookimpl
def dftpass_knowledge():
    """dftpass's own library facts: plugins/library.toml."""
    return builtin_knowledge()
