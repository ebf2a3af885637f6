"""Where a region around a whole function goes: a decorator, or a ``with`` inside the body.

The dftracer decorator is a plain wrapper, so it is correct only on an ordinary function,
and only innermost (next to ``def``): above ``@property``/``@staticmethod``/``@functools.cache``
it would wrap the descriptor or cache object instead of the function. A decorator on an
``async def`` or a generator would time only the creation of the coroutine or generator;
those get a ``with`` region inside the body instead, as do properties (so the property
object stays what ``@property`` made) and functions that dftracer's wrapper would break.
"""

from __future__ import annotations

import attrs

from dftpass.core.edits import Decorate, Edit, EditSet, InsertAfter, InsertBefore, WrapBody, WrapStmt, edit_target
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


# -- statement regions: ``start()``/``stop()`` where a ``with`` would re-indent -----------------

def _within(path: StmtPath, block: StmtPath) -> bool:
    return path[:len(block)] == block


def _in_try_body(path: StmtPath, try_stmt: StmtPath) -> bool:
    """Whether ``path`` lies in the body of the ``try`` at ``try_stmt`` (not its handlers)."""
    return len(path) > len(try_stmt) and _within(path, try_stmt) and path[len(try_stmt)][0] == "body"


def _span(edit: WrapStmt) -> list[StmtPath]:
    """The statements a WrapStmt wraps: ``stmt`` and, with ``through``, the later ones of its block."""
    if edit.through is None:
        return [edit.stmt]
    parent, (field, first), last = edit.stmt[:-1], edit.stmt[-1], edit.through[-1][1]
    return [parent + ((field, i),) for i in range(first, last + 1)]


def merge_adjacent_regions(edit_set: EditSet) -> None:
    """Two regions of one node on consecutive statements of a block become one region over
    both, as an expert writes them (``x = x.to(d)`` and ``y = y.to(d)``, three all-gathers in
    a row): one event instead of two, two lines of diff instead of four. Not where the first
    region updates its node after its statement (a size: the second's would overwrite it), a
    value is bound, or anything else lands on the statements."""
    counts: dict[StmtPath, int] = {}
    for e in edit_set.edits:
        for path in (_span(e) if isinstance(e, WrapStmt) else [edit_target(e)]):
            counts[path] = counts.get(path, 0) + 1
    merged: dict[int, WrapStmt] = {}  # id of a region -> the region it was merged into
    regions = [e for e in edit_set.edits if isinstance(e, WrapStmt) and not e.bind and "(" not in e.with_item
               and all(counts[p] == 1 for p in _span(e))]
    at = {e.stmt: e for e in regions}
    mergeable = {id(e) for e in regions}
    out: list[Edit] = []
    for e in edit_set.edits:
        if id(e) in merged:
            continue
        if id(e) in mergeable:
            current = e
            while not current.tail:
                last = _span(current)[-1]
                following = at.get(last[:-1] + ((last[-1][0], last[-1][1] + 1),))
                if following is None or following.with_item != current.with_item or id(following) in merged:
                    break
                merged[id(following)] = following
                current = attrs.evolve(current, through=_span(following)[-1], tail=following.tail)
            e = current
        out.append(e)
    edit_set.edits[:] = out


def lean_statement_regions(edit_set: EditSet, fs: FileSummary) -> None:
    """A statement region dftpass planned as ``with X:`` becomes ``X.start()`` before the
    statements and ``X.stop()`` after them (the tail in between) when nothing leaves the span
    early: no ``return``, ``break``, ``continue``, ``raise`` or ``yield`` inside it, not in the
    body of a ``try`` that catches by design (``fn.caught``), not in an ``async`` function.
    The diff is then the two lines a hand annotation adds (DLIO's authors write it so), not a
    re-indented block; a ``start()`` whose ``stop()`` an unforeseen exception skips loses
    that one event (docs/decisions.md). The summary reads the pair as a region (``withs``),
    so a second run finds it. Left as a ``with``: a named value (``bind``), an item that is
    a call, and a span another edit also lands on (but lines inserted above its first
    statement or below its last, which stay outside the pair)."""
    # what else lands on the statements: lines inserted above the first statement (a step's
    # ``update``, an outer region's ``start()``) stay above the ``start()``, and lines inserted
    # below the last (an outer region's ``stop()``) stay below the ``stop()``
    targets: dict[StmtPath, int] = {}
    above: set[StmtPath] = set()
    below: set[StmtPath] = set()
    for e in edit_set.edits:
        if isinstance(e, (InsertBefore, InsertAfter)):
            (above if isinstance(e, InsertBefore) else below).add(e.stmt)
            continue
        for path in (_span(e) if isinstance(e, WrapStmt) else [edit_target(e)]):
            targets[path] = targets.get(path, 0) + 1
    out: list[Edit] = []
    starts: list[Edit] = []
    stops: list[Edit] = []
    for e in edit_set.edits:
        if not isinstance(e, WrapStmt) or e.bind or "(" in e.with_item:
            out.append(e)
            continue
        span = _span(e)
        fn = fs.function_at(e.stmt)
        if fn is None or fn.is_async or any(targets.get(p, 0) > 1 for p in span) or any(
                p in above for p in span[1:]) or any(p in below for p in span[:-1]) or any(
                _within(x, p) for p in span for x in (*fn.exits, *fn.yield_stmts)) or any(
                _in_try_body(p, t) for p in span for t in fn.caught):
            out.append(e)
            continue
        starts.append(InsertBefore(e.rule, e.line, e.why, span[0], f"{e.with_item}.start()"))
        stops.append(InsertAfter(e.rule, e.line, e.why, span[-1], "".join(f"{t}\n" for t in e.tail)
                                 + f"{e.with_item}.stop()"))
    # the rewrite keeps the list's order among the lines inserted at one statement: the new
    # ``start()`` last above it, the new ``stop()`` first below it (regions nest)
    out = stops + out + starts
    edit_set.edits[:] = out
