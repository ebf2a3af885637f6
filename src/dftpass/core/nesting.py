"""No region nests in itself, whatever the forms that open it (issue 41).

dftracer's nodes are not re-entrant: a region of a node opened while another region of the
same node is open loses the outer event (only the inner one is written). Rules avoid that
for their own regions, but two rules (a built-in one and a plugin's) can put the same node on
one statement in two different forms: ML-R18's ``ai.checkpoint.capture.start()`` /
``.stop()`` pair and a plugin's ``with ai.checkpoint.capture:`` around the same
``torch.save``. :class:`RegionIndex` sees every form an edit can take, as the statements the
region covers:

=====================  =================================================================
form                   covers
=====================  =================================================================
decorator              the function (``Decorate``)
``with`` body          the function's body (``WrapBody``)
``with`` statement     the statement, through ``through`` (``WrapStmt``)
``start()/stop()``     the statement ``start()`` goes before (``InsertBefore``)
a runtime callback     the framework's ``fit`` calls it is handed to (the statement that
                       hands it over, and the ``fit`` calls after it in that block)
``.iter(...)``         nothing: an ``.iter`` keeps its times in the generator (dftracer 2.2,
                       ``ai_common.iter``), not on the node, so it loses no event inside or
                       around another region of its node (a validation loop wrapped inside
                       a training loop's body keeps both)
=====================  =================================================================

The forms above the last keep the open region's start on the node object (a decorator is
``with node:`` around the call, ``start()`` is ``__enter__``), which is what a second
opening of the node overwrites.

:meth:`RegionIndex.refuse` says, for a new edit, which region of the same node it would
open inside of (or around); the run context then drops it with a finding naming both rules.
"""

from __future__ import annotations

from typing import NamedTuple

from dftpass.core.edits import AddArgument, Decorate, Edit, InsertAfter, InsertBefore, WrapBody, WrapIter, WrapStmt, WrapValue
from dftpass.core.emitter import CALLBACK_NODES, hands_callback, region_node as node_of
from dftpass.core.summary import StmtPath

#: the form :meth:`RegionIndex.refuse` answers for the ``stop()`` of a refused ``start()``
#: (refused with it, and said once, with the start)
STOP_OF_REFUSED = "the stop of a refused start"


class Span(NamedTuple):
    """Statements ``lo``..``hi`` (``hi`` None: to the block's end) of the block ``field`` of
    the compound statement ``parent`` (``()``: the module)."""

    parent: StmtPath
    field: str
    lo: int
    hi: int | None

    @classmethod
    def of(cls, stmt: StmtPath, through: StmtPath | None = None, to_end: bool = False) -> "Span":
        field, index = stmt[-1]
        hi = None if to_end else (through[-1][1] if through else index)
        return cls(stmt[:-1], field, index, hi)

    def first(self) -> StmtPath:
        return self.parent + ((self.field, self.lo),)

    def covers(self, path: StmtPath) -> bool:
        """``path`` is one of the statements, or inside one."""
        n = len(self.parent)
        if len(path) <= n or path[:n] != self.parent or path[n][0] != self.field:
            return False
        return self.lo <= path[n][1] and (self.hi is None or path[n][1] <= self.hi)

    def meets(self, other: "Span") -> bool:
        """The two share a statement: one holds the other's first, or they overlap in one block."""
        if self.covers(other.first()) or other.covers(self.first()):
            return True
        if (self.parent, self.field) != (other.parent, other.field):
            return False
        return (self.hi is None or other.lo <= self.hi) and (other.hi is None or self.lo <= other.hi)


class Region(NamedTuple):
    node: str
    span: Span
    rule: str
    line: int
    form: str


def region_of(edit: Edit, ai: str) -> Region | None:
    """The region ``edit`` opens (None: it opens none, or is the closing half of one)."""
    def made(node: str | None, span: Span, form: str) -> Region | None:
        return Region(node, span, edit.rule, edit.line, form) if node is not None else None

    if isinstance(edit, Decorate):
        return made(node_of(edit.code, ai), Span.of(edit.func), "decorator")
    if isinstance(edit, WrapBody) and edit.with_item:
        return made(node_of(edit.with_item, ai), Span.of(edit.owner), "with (body)")
    if isinstance(edit, WrapStmt):
        return made(node_of(edit.with_item, ai), Span.of(edit.stmt, edit.through), "with")
    if isinstance(edit, (WrapIter, WrapValue)):
        return None  # stateless: see the module docstring
    if isinstance(edit, InsertBefore) and edit.code.strip().endswith(".start()"):
        return made(node_of(edit.code, ai), Span.of(edit.stmt), "start()/stop()")
    return None


def callback_of(edit: Edit) -> bool:
    """Whether the edit hands a runtime callback to a framework (``callbacks=[...Callback()]``,
    ``trainer.callbacks.append(...Callback())``)."""
    text = edit.item if isinstance(edit, AddArgument) else edit.code if isinstance(edit, InsertAfter) else ""
    return hands_callback(text)


class RegionIndex:
    """The regions the queued edits of one file open, by node."""

    def __init__(self) -> None:
        self._regions: dict[str, list[Region]] = {}
        #: starts refused: their ``stop()`` (the same statement, the same node) is refused too
        self._refused_starts: set[tuple[StmtPath, str]] = set()

    def refuse(self, edit: Edit, ai: str, fits=lambda stmt: [stmt]) -> Region | None:
        """The region of the same node ``edit`` would open inside of or around (None: none, and
        the edit's own region is now recorded). ``fits(stmt)``: the statements of a callback's
        ``fit`` calls, from the one that hands it over."""
        if isinstance(edit, InsertAfter) and edit.code.strip().endswith(".stop()"):
            node = node_of(edit.code, ai)
            if node is not None and (edit.stmt, node) in self._refused_starts:
                return Region(node, Span.of(edit.stmt), edit.rule, edit.line, STOP_OF_REFUSED)
            return None
        regions = []
        if callback_of(edit):
            regions = [Region(node, Span.of(stmt), edit.rule, edit.line, "runtime callback")
                       for stmt in fits(edit.stmt) for node in CALLBACK_NODES]
        else:
            region = region_of(edit, ai)
            regions = [region] if region is not None else []
        for region in regions:
            for other in self._regions.get(region.node, ()):
                if region.span.meets(other.span):
                    if isinstance(edit, InsertBefore):
                        self._refused_starts.add((edit.stmt, region.node))
                    return other
        for region in regions:
            self._regions.setdefault(region.node, []).append(region)
        return None

    def covering(self, node: str, stmt: StmtPath) -> Region | None:
        """The queued region of ``node`` that holds statement ``stmt`` (or is on it), if any."""
        return next((r for r in self._regions.get(node, ()) if r.span.covers(stmt)), None)

    def forget_rule(self, rule: str) -> None:
        """A rule that raised: its regions are dropped with its edits."""
        for node, regions in self._regions.items():
            self._regions[node] = [r for r in regions if r.rule != rule]
