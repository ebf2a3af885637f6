"""Which dftracer is installed, and whether dftpass is tested with it.

The range lives in one place, the ``trace`` extra of pyproject.toml; this module reads it
back from the installed package's metadata. Outside it the trace format, the environment
variables or their defaults may differ (dftracer's newer line aggregates short events by
default), so ``dftpass detect`` warns, and ``run.json`` records the version each run used.
"""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, requires, version

from dftpass.core import emitter


def installed() -> str | None:
    """The installed dftracer's version, or None."""
    try:
        return version(emitter.PIP_PACKAGE)
    except PackageNotFoundError:
        return None


def tested_range() -> str | None:
    """The specifier of dftpass's ``trace`` extra (``>=2.2.0,<2.3``), or None when dftpass is
    not installed with metadata (run from a source tree)."""
    from packaging.requirements import Requirement

    try:
        wanted = requires("dftpass") or []
    except PackageNotFoundError:
        return None
    for text in wanted:
        req = Requirement(text)
        if req.name == emitter.PIP_PACKAGE and req.marker is not None and req.marker.evaluate({"extra": "trace"}):
            return str(req.specifier) or None
    return None


def check(have: str | None = None, want: str | None = None) -> dict:
    """``installed``, ``tested`` (the range), ``ok`` (None when either is unknown) and a
    ``warning`` in words when the installed dftracer is outside the range."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    have = installed() if have is None else have
    want = tested_range() if want is None else want
    out = {"installed": have, "tested": want, "ok": None, "warning": None}
    if have is None:
        out["warning"] = f"{emitter.PIP_PACKAGE} is not installed: `dftpass install` installs it"
        return out
    if want is None:
        return out
    try:
        out["ok"] = Version(have) in SpecifierSet(want)
    except InvalidVersion:
        out["ok"] = False
    if not out["ok"]:
        out["warning"] = (f"{emitter.PIP_PACKAGE} {have} is outside the versions dftpass is tested with ({want}): "
                          "its trace format, its environment variables or their defaults (aggregation) may differ; "
                          f"pip install '{emitter.PIP_PACKAGE}{want}'")
    return out
