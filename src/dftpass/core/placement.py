"""Where a region around a whole function goes: a decorator, or a ``with`` inside the body.

The dftracer decorator is a plain wrapper, so it is correct only on an ordinary function,
and only innermost (next to ``def``): above ``@property``/``@staticmethod``/``@functools.cache``
it would wrap the descriptor or cache object instead of the function. A decorator on an
``async def`` or a generator would time only the creation of the coroutine or generator;
those get a ``with`` region inside the body instead, as do properties (so the property
object stays what ``@property`` made) and functions that dftracer's wrapper would break.
"""

from __future__ import annotations

from dftpass.core.edits import Decorate, Edit, WrapBody
from dftpass.core.emitter import FileNames, is_node, nesting_rank
from dftpass.core.summary import FileSummary, FunctionSummary, StmtPath

#: decorators after which a dftracer decorator would not wrap a plain function
_DESCRIPTOR_DECORATORS = ("property", "cached_property", "setter", "getter", "deleter")


def needs_body_region(fn: FunctionSummary) -> str | None:
    """Why ``fn`` must get a body region instead of a decorator, or None."""
    if fn.is_async:
        return "async function: a decorator would time only the creation of the coroutine"
    if fn.is_generator:
        return "generator: a decorator would time only the creation of the generator"
    for d in fn.decorators:
        last = d.rstrip("()").rsplit(".", 1)[-1]
        if last in _DESCRIPTOR_DECORATORS:
            return f"@{d} function: the region goes inside the body"
    return None


def has_region(fs: FileSummary, fn: FunctionSummary, node: str) -> bool:
    """Whether ``fn`` already carries the region ``node`` (decorator or body ``with``)."""
    if any(is_node(fs, d, node) for d in fn.decorators):
        return True
    return any(is_node(fs, w, node) for w in fn.withs)


def function_region(names: FileNames, fn: FunctionSummary, node: str, rule: str, why: str) -> Edit:
    """The edit that puts region ``node`` around all of ``fn``."""
    if needs_body_region(fn):
        return WrapBody(rule, fn.line, why, fn.stmt, with_item=names.node(node))
    return Decorate(rule, fn.line, why, fn.stmt, names.decorator(node), rank=nesting_rank(node))


def top_level_line(fs: FileSummary, top: StmtPath) -> int:
    """The line of the top-level statement ``top`` (a def or class; 1 if it is neither):
    where a rule that adds a module-level definition before it reports the change."""
    for item in (*fs.functions, *fs.classes):
        if item.stmt[:1] == top:
            return item.line
    return 1
