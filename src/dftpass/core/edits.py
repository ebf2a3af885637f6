"""Edits: the small, declarative changes passes queue on a file.

Passes never touch code. They queue edits on a file's :class:`EditSet`, located by
*statement paths* from the file's summary (:mod:`dftpass.core.summary`):

* :class:`Decorate` a function (the new decorator goes innermost, next to ``def``);
* :class:`WrapBody` of a function, ``if`` block or ``while`` loop: prologue statements, then
  the rest of the body inside ``with ITEM:`` and/or ``try: ... finally: ...``;
* :class:`WrapIter` the iterable of a ``for`` loop (or an expression inside it);
* :class:`Enumerate` a ``for`` loop (``for x in it`` -> ``for i, x in enumerate(it)``);
* :class:`WrapStmt` one statement (or a run of statements of one block) in ``with ITEM:``;
* :class:`WrapValue` the value of an assignment (``it = gen()`` -> ``it = ai.x.iter(gen())``);
* :class:`InsertBefore` / :class:`InsertAfter` a statement.

Edits are plain data (they pickle to worker processes); :mod:`dftpass.core.rewrite`
applies them with libcst.
"""

from __future__ import annotations

import attrs

from dftpass.core.summary import StmtPath


@attrs.frozen
class Edit:
    rule: str
    line: int
    why: str


@attrs.frozen
class Decorate(Edit):
    func: StmtPath
    code: str
    rank: int = 0


@attrs.frozen
class WrapBody(Edit):
    owner: StmtPath
    with_item: str | None = None
    prologue: tuple[str, ...] = ()
    finally_: tuple[str, ...] = ()


@attrs.frozen
class WrapIter(Edit):
    loop: StmtPath
    callee: str
    depth: int = 0
    extra: str = ""


@attrs.frozen
class Enumerate(Edit):
    loop: StmtPath
    index: str


@attrs.frozen
class WrapStmt(Edit):
    stmt: StmtPath
    with_item: str
    #: statements that go inside the region, after the statement: what must run before the
    #: region's event is written (``X.update(image_size=...)`` of what the statement read)
    tail: tuple[str, ...] = ()
    #: name the statement's value for the tail: ``return EXPR`` becomes ``bind = EXPR`` in the
    #: region (then the tail) and ``return bind`` after it; an expression statement ``EXPR``
    #: becomes ``bind = EXPR`` (the tail waits for it: ``jax.block_until_ready(bind)``)
    bind: str = ""
    #: the last statement of a run that goes inside the region with ``stmt`` (a later statement
    #: of the same block; None: ``stmt`` alone): the tracing budget's one compute region per
    #: step, forward through optimizer step. A ``with`` closes on ``continue``, ``return`` and
    #: exceptions, where a ``start()`` left without its ``stop()`` loses that step's event
    #: (docs/decisions.md)
    through: StmtPath | None = None


@attrs.frozen
class WrapValue(Edit):
    """``NAME = VALUE`` becomes ``NAME = CALLEE(VALUE EXTRA)``: the iterator a loop draws from
    with ``next()`` in the middle of an expression (``update(next(batches))``) is wrapped where
    it is made, so that every ``next()`` is timed without splitting the statement."""

    stmt: StmtPath
    callee: str
    extra: str = ""


@attrs.frozen
class AddArgument(Edit):
    """Append ``item`` to the list a call's ``keyword`` argument gives (``callbacks=[...]``):
    the keyword is added (``new``) or its list extended; a value that is not a list literal
    becomes ``[*(value or []), item]``. With ``listed=False`` the keyword (absent: ``new``)
    gets ``item`` itself as its value (``backend=...``)."""

    stmt: StmtPath
    #: the call's function as written (``model.fit``): the first such call in the statement
    callee: str
    keyword: str
    item: str
    new: bool = False
    listed: bool = True


@attrs.frozen
class InsertBefore(Edit):
    stmt: StmtPath
    code: str
    #: move the comments above the statement to above the inserted code (True when the
    #: inserted code opens a region around the statement, like ``X.start()``)
    take_comments: bool = True
    #: a block of its own (a script's lifecycle): blank lines and comments above the
    #: statement go above the block, and one blank line separates it from the statement
    separate: bool = False


@attrs.frozen
class InsertAfter(Edit):
    stmt: StmtPath
    code: str


def edit_target(edit: Edit) -> StmtPath:  # noqa: D103
    for field in ("func", "owner", "loop", "stmt"):
        if hasattr(edit, field):
            return getattr(edit, field)
    raise TypeError(edit)  # pragma: no cover


def _region_key(edit: Edit) -> tuple | None:
    """What makes two edits the same region: the node around the same statement, or the same
    decorator on the same function."""
    if isinstance(edit, WrapStmt):
        return ("stmt", edit.stmt, edit.with_item)
    if isinstance(edit, Decorate):
        return ("decorate", edit.func, edit.code)
    if isinstance(edit, (WrapIter, WrapValue)):
        return ("iter", edit.loop if isinstance(edit, WrapIter) else edit.stmt, edit.callee)
    return None


@attrs.define
class EditSet:
    """The edits queued for one file, and the imports they need."""

    relpath: str
    edits: list[Edit] = attrs.field(factory=list)
    _seen: set[Edit] = attrs.field(factory=set)
    #: region key -> the rule whose edit holds it
    _regions: dict[tuple, str] = attrs.field(factory=dict)
    #: dftracer names to import, as (name, alias); stdlib modules as (module, alias)
    api_imports: list[tuple[str, str]] = attrs.field(factory=list)
    std_imports: list[tuple[str, str]] = attrs.field(factory=list)
    #: put :data:`dftpass.core.emitter.IMPORT_PRELUDE` before a new dftracer import line
    import_prelude: bool = False
    #: the file starts tracing (a rule plans dftracer's initialization in it): the one place
    #: of a process where the prelude goes, since it runs before anything imports dftracer
    starts_tracing: bool = False

    def add(self, edit: Edit) -> bool:
        """Queue ``edit``; an identical edit queued before is not queued again, and neither is
        a second region of the same node on the same statement or function (by another rule:
        the node would nest in itself, and dftracer keeps only the inner event). The rule
        that runs first wins (rules order themselves with ``after``); :meth:`holder` says
        which, for the finding that names both."""
        key = _region_key(edit)
        if edit in self._seen or (key is not None and key in self._regions):
            return False
        self._seen.add(edit)
        if key is not None:
            self._regions[key] = edit.rule
        self.edits.append(edit)
        return True

    def __contains__(self, edit: Edit) -> bool:
        return edit in self._seen

    def discard_rule(self, rule: str) -> int:
        """Drop every edit ``rule`` queued (a rule that raised half-way); how many."""
        kept = [e for e in self.edits if e.rule != rule]
        dropped = len(self.edits) - len(kept)
        if dropped:
            self.edits = kept
            self._seen = set(kept)
            self._regions = {k: r for k, r in self._regions.items() if r != rule}
        return dropped

    def holder(self, edit: Edit) -> str | None:
        """The rule whose edit already holds the region ``edit`` would place, if another's."""
        key = _region_key(edit)
        rule = self._regions.get(key) if key is not None else None
        return rule if rule is not None and rule != edit.rule else None

    def __bool__(self) -> bool:
        return bool(self.edits)
