"""The dftracer regions on a function: written already, or planned in this run.

The check rules (ML-R22, ML-R23) judge both alike: a hand annotation that breaks a rule is
reported like a planned one, so they run after every rule that places regions.
"""

from __future__ import annotations

from typing import Iterator

from dftpass.core.edits import Decorate, WrapBody
from dftpass.core.emitter import recognize
from dftpass.core.summary import MODULE_SCOPE, FileSummary, FunctionSummary

#: the transform rules (the check rules run after those present)
RULES_THAT_PLACE = tuple(f"ML-R{i}" for i in (*range(1, 15), *range(17, 22), 25, 26, 27, 28, 29) if i not in (11,))


def module_loggers(fs: FileSummary) -> set[str]:
    """Names of the file's module-level ``X = dft_fn(...)`` loggers."""
    module = fs.function(MODULE_SCOPE)
    return {a.target for a in (module.assigns if module else ())
            if a.value and "." not in a.target and recognize(fs, a.value.rstrip("()").split("(", 1)[0]) == "dft_fn"}


def region_of(fs: FileSummary, text: str, loggers: set[str]) -> str | None:
    """The dftracer construct a decorator or ``with`` item is (``compute.forward``,
    ``dft_fn.log``, ``dlp.log``), or None."""
    head = text.split("(", 1)[0]
    found = recognize(fs, head)
    if found is not None:
        return found or "ai"
    if head.split(".", 1)[0] in loggers:
        return "dft_fn." + head.split(".", 1)[1] if "." in head else "dft_fn"
    return None


def regions_on(ctx, fs: FileSummary, fn: FunctionSummary) -> Iterator[str]:
    """Describes each dftracer region on ``fn``: ``"@ai.compute (written)"``, ``"@ai.data.item
    (planned by ML-R9)"``, ``"with ai.x (written)"``."""
    loggers = module_loggers(fs)
    for d in fn.decorators:
        if region_of(fs, d, loggers):
            yield f"@{d} (written)"
    edit_set = ctx.edit_sets.get(fs.relpath)
    for e in (edit_set.edits if edit_set else ()):
        if isinstance(e, Decorate) and e.func == fn.stmt:
            yield f"@{e.code} (planned by {e.rule})"
        elif isinstance(e, WrapBody) and e.owner == fn.stmt and e.with_item:
            yield f"with {e.with_item} (planned by {e.rule})"
