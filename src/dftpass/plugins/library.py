"""dftpass's own library knowledge: ``library.toml``, as the built-in plugin serves it through
``dftpass_knowledge`` (the recognisers read every plugin's, merged: :class:`dftpass.plugins.
knowledge.Facts`). Facts are data so that a plugin extends them the same way, and a reader
finds them in one place."""

from __future__ import annotations

import copy
import functools
import tomllib
from importlib import resources


@functools.cache
def _read() -> dict:
    return tomllib.loads(resources.files("dftpass.plugins").joinpath("library.toml").read_text(encoding="utf-8"))


def builtin_knowledge() -> dict:
    """Every kind of fact in ``library.toml`` (a fresh copy: callers may not change the file's)."""
    return copy.deepcopy(_read())
