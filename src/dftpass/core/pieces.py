"""Regenerate only the statements that hold an edit.

libcst's parse and code generation were the whole cost of applying edits (63% of ``plan``
over Megatron-LM's ``megatron/``, docs/performance.md), and they were the whole file's: a
decorator on one method of a 5,000-line module re-parsed and re-printed all of it. Here the
file is cut along the stdlib parser's line ranges (a fraction of libcst's cost), and libcst
sees only *pieces*: runs of whole statements of one block that hold an edit. The results
are spliced into the original bytes.

* A statement whose edits are all inside its body is not a piece: the cut goes down into
  the body (a method of a class, a statement of a method). A nested piece is parsed under
  one ``class _:`` line per enclosing block, each indented like the statement it stands
  for, so its blocks are indented as in the file; the stand-in lines are cut off after.
* A new decorator is a line of text above ``def`` (after the decorators already there): no
  libcst at all for the commonest edit.
* Code inserted above a compound statement, and the imports above the statement after the
  import block, need only that statement's kind and the lines above it: a two-line stand-in
  of the same kind takes its place in the piece (its *hole*), and its own text, with the
  pieces inside it, goes back in after.

Why the splice is exact: a statement starts its own line and owns nothing after its last
line but, for a compound statement, the comments indented under it (a piece then reaches to
the next statement); the comments above a statement are its own (a piece whose edit puts
code above them takes the statement before it too); the transform of a piece is the same
code as the whole file's (:func:`dftpass.core.rewrite.transform`) with the statement paths
shifted; and what would make a piece differ from the whole file is given to it: the file's
first indentation (new blocks are indented like it) and line ending. Where a cut cannot be
made exactly (an encoding other than UTF-8, a byte-order mark, indentation that varies
within the file, edits above a block's first statement), :func:`apply_in_pieces` returns
None and the caller transforms the whole file. tests/core/test_pieces.py holds the whole-
file transform as the oracle, on edge cases and on every fixture app.
"""

from __future__ import annotations

import ast
import codecs
import re
from typing import Callable

import attrs
import libcst as cst

from dftpass.core.edits import Decorate, Edit, EditSet, InsertBefore, WrapStmt, edit_target
from dftpass.core.emitter import API_MODULE
from dftpass.core.linebytes import keep_original_bytes
from dftpass.core.rewrite import transform

_CODING = re.compile(rb"^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)")
_UTF8 = {"utf-8", "utf8", "utf_8", "u8"}


@attrs.frozen
class Unit:
    """One top-level statement of the file as libcst sees it (several small statements on one
    line are one unit): the ast indices it holds and its 1-based line range."""

    first: int
    last: int
    start: int
    end: int


def _utf8(source: bytes) -> bool:
    if source.startswith(codecs.BOM_UTF8):
        return False
    for line in source.splitlines()[:2]:
        match = _CODING.match(line)
        if match:
            return match.group(1).decode("ascii", "replace").lower() in _UTF8
    return True


def units(block: list[ast.stmt]) -> list[Unit]:
    """The statements of a block as libcst sees them: several on one line are one."""
    out: list[Unit] = []
    for i, stmt in enumerate(block):
        start = min([stmt.lineno, *(d.lineno for d in getattr(stmt, "decorator_list", ()))])
        if out and start <= out[-1].end:
            out[-1] = attrs.evolve(out[-1], last=i, end=max(out[-1].end, stmt.end_lineno))
        else:
            out.append(Unit(i, i, start, stmt.end_lineno))
    return out


def first_indent(tree: ast.Module, lines: list[bytes]) -> str | None:
    """The indentation of the file's first indented block (what libcst takes as the module's
    default): the first block, in source order, whose first statement starts its own line.
    Blocks on the header's line hold only simple statements, so the search stops at the
    first compound statement with a block of lines (walking the whole tree cost 5.7 s of
    Megatron's 14 s apply stage)."""
    for stmt in tree.body:
        for block in _blocks(stmt):
            first = block[0]
            text = lines[first.lineno - 1]
            indent = text[:len(text) - len(text.lstrip(b" \t"))]
            if indent and len(indent) == first.col_offset:
                return indent.decode("ascii")
    return None


def _blocks(stmt: ast.stmt):
    """The statement's blocks in source order."""
    yield from (b for b in (getattr(stmt, "body", None),) if isinstance(b, list) and b)
    for handler in getattr(stmt, "handlers", ()):
        yield handler.body
    for case in getattr(stmt, "cases", ()):
        yield case.body
    yield from (b for b in (getattr(stmt, "orelse", None), getattr(stmt, "finalbody", None))
                if isinstance(b, list) and b and isinstance(b[0], ast.stmt))


def _dftracer_import_unit(tree: ast.Module, spans: list[Unit]) -> int | None:
    """The unit whose first statement is the first ``from dftracer.python import names``
    (the import :class:`dftpass.core.rewrite._Apply` adds names to)."""
    for k, unit in enumerate(spans):
        stmt = tree.body[unit.first]
        if isinstance(stmt, ast.ImportFrom) and not stmt.level and stmt.module == API_MODULE and \
                not any(a.name == "*" for a in stmt.names):
            return k
    return None


def _stretches(edited: set[int], before: set[int], head: set[int]) -> list[tuple[int, int, bool]]:
    """Runs of units to regenerate, as (first unit, last unit, holds the imports), none
    sharing a unit. A unit in ``before`` is regenerated with the one before it (the blank
    lines and comments between them are its own in libcst's tree, and an edit puts code
    above them). The imports' run reaches back over every edited unit before it: an edit
    there can add statements, and the import position counts statements of the whole run."""
    intervals = [(k, k, False) for k in edited] + [(k - 1, k, False) for k in before if k > 0]
    if head:
        lo = min([*head, *(k for k in edited if k < min(head))])
        intervals.append((lo, max(head), True))
    runs: list[tuple[int, int, bool]] = []
    for lo, hi, imports in sorted(intervals):
        if runs and lo <= runs[-1][1]:
            last = runs[-1]
            runs[-1] = (last[0], max(last[1], hi), last[2] or imports)
        else:
            runs.append((lo, hi, imports))
    return runs


@attrs.frozen
class Piece:
    """Lines ``start``..``end`` (1-based) of the file, regenerated: whole statements of one
    block, the first of which is entry ``first`` of that block (``depth`` blocks down)."""

    start: int
    end: int
    depth: int
    first: int
    edits: tuple[Edit, ...]
    imports: bool = False
    #: ``class _:`` lines, one per block the piece is nested in, each indented like the
    #: statement it stands for: the piece's blocks get the indentation they have in the file
    header: bytes = b""
    #: the piece holds a block of its own (its indentation is then read, not given)
    has_block: bool = False
    #: the last statement's lines (first, last) left out: a one-line stand-in of its kind
    #: takes its place, for an edit that only puts code above it or the imports' blank lines
    #: (a class of 2,000 lines under the inserted logger); what is inside it is assembled
    #: from its own pieces
    hole: tuple[int, int] | None = None
    placeholder: bytes = b""
    #: lines inserted as they are, before ``start`` (``end == start - 1``): new decorators
    text: bytes | None = None


_BODIED = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef, ast.If, ast.For, ast.AsyncFor, ast.While,
           ast.With, ast.AsyncWith, ast.Try, *((ast.TryStar,) if hasattr(ast, "TryStar") else ()))
_DEFS = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)


class _CannotCut(Exception):
    pass


def _indent(stmt: ast.stmt, lines: list[bytes]) -> bytes:
    return lines[stmt.lineno - 1][:stmt.col_offset]


def _starts_line(stmt: ast.stmt, lines: list[bytes]) -> bool:
    text = lines[stmt.lineno - 1]
    return len(text) - len(text.lstrip(b" \t")) == stmt.col_offset


def _ending(line: bytes) -> bytes:
    return line[len(line.rstrip(b"\r\n")):]


def _placeholder(stmt: ast.stmt, lines: list[bytes], newline: bytes, indent: bytes) -> bytes:
    """A two-line compound statement of the kind the transform looks at (a definition, or
    another compound statement: :func:`dftpass.core.rewrite._separate`), with an indented
    body (a one-line body would be expanded by an edit above it)."""
    head = b"def _dftpass_placeholder_():" if isinstance(stmt, _DEFS) else b"if _dftpass_placeholder_:"
    return _indent(stmt, lines) + head + newline + _indent(stmt, lines) + indent + b"pass" + newline


class _Cutter:
    """Cuts one file into pieces (see the module's docstring)."""

    def __init__(self, tree: ast.Module, lines: list[bytes], newline: bytes, indent: str | None) -> None:
        self.tree = tree
        self.lines = lines
        self.newline = newline
        self.indent = (indent or "    ").encode("ascii")
        self.pieces: list[Piece] = []

    # -- one block -------------------------------------------------------------------
    def block(self, block: list[ast.stmt], edits, depth: int, header: bytes, limit: int,
              head: Callable[[list[Unit]], set[int]] | None = None) -> bool:
        """Add the pieces of one block's edits; False when the block must be regenerated
        whole with the statement that holds it. ``limit``: the last line before the next
        statement after the block (comments up to there may be the block's)."""
        spans = units(block)
        unit_of = {i: k for k, unit in enumerate(spans) for i in range(unit.first, unit.last + 1)}
        own: dict[int, list[Edit]] = {}
        nested: dict[int, list[Edit]] = {}
        for edit in edits:
            path = edit_target(edit)
            if len(path) <= depth or path[depth][0] != "body" or path[depth][1] not in unit_of:
                raise _CannotCut(f"path {path} does not exist in the file")
            k = unit_of[path[depth][1]]
            (own if len(path) == depth + 1 else nested).setdefault(k, []).append(edit)
        for k, unit_edits in list(own.items()):
            decorations = [e for e in unit_edits if isinstance(e, Decorate)]
            rest = [e for e in unit_edits if not isinstance(e, Decorate)]
            if decorations and all(isinstance(e, InsertBefore) for e in rest) and \
                    isinstance(block[spans[k].first], _DEFS):
                self._decorate(block[spans[k].first], decorations)
                own[k] = rest
                if not rest:
                    del own[k]
        before = {k for k, es in own.items()
                  if any(isinstance(e, InsertBefore) and not (e.take_comments or e.separate) for e in es)}
        if depth and 0 in before:
            return False  # the comments above the block's first statement follow the block's header
        imports = head(spans) if head else set()
        for lo, hi, with_imports in _stretches(set(own) | set(nested), before, imports):
            # a compound statement's last block owns the comments indented under it after
            # its last line: they go with it, up to the next statement
            upto = spans[hi + 1].start - 1 if hi + 1 < len(spans) else limit
            self._run(block, spans, own, nested, lo, hi, depth, header, with_imports, upto,
                      hollow=with_imports and hi == max(imports) or hi in own)
        return True

    def _run(self, block, spans, own, nested, lo, hi, depth, header, with_imports, upto, hollow) -> None:
        last = spans[hi]
        edits = [e for k in range(lo, hi + 1) for e in (*own.get(k, ()), *nested.get(k, ()))]
        start = 1 if with_imports and lo == 0 else spans[lo].start
        if lo == hi and not with_imports and hi not in own and \
                self._inside(block, last, nested[hi], depth, header, upto):
            return
        last_stmt = block[last.first]
        if hollow and last.first == last.last and isinstance(last_stmt, _BODIED) \
                and all(isinstance(e, InsertBefore) for e in own.get(hi, ())) and \
                (hi not in nested or self._inside(block, last, nested[hi], depth, header, upto)):
            kept = [e for k in range(lo, hi) for e in (*own.get(k, ()), *nested.get(k, ()))] + own.get(hi, [])
            # the hole reaches to the next statement, as a piece of this statement would
            self.pieces.append(Piece(start, upto, depth, spans[lo].first, tuple(kept), with_imports, header,
                                     True, (last.start, upto),
                                     _placeholder(last_stmt, self.lines, self._ending_at(last_stmt.lineno), self.indent)))
            return
        end = upto if isinstance(block[last.last], _BODIED) else last.end
        self.pieces.append(Piece(start, end, depth, spans[lo].first, tuple(edits), with_imports, header,
                                 bool(header) or _has_block(block, spans[lo], last)))

    def _inside(self, block, unit: Unit, edits: list[Edit], depth: int, header: bytes, limit: int) -> bool:
        """Add the pieces inside one compound statement's body when every edit goes there."""
        stmt = block[unit.first]
        if unit.first != unit.last or not isinstance(stmt, _BODIED) or not _starts_line(stmt.body[0], self.lines):
            return False
        if any(edit_target(e)[depth + 1][0] != "body" for e in edits):
            return False
        following = _next_clause(stmt)
        if following is not None:
            # the body ends where the next clause (``else:``, ``except``) begins: its pieces
            # stop at its last line, which is exact when nothing but the clause's own line
            # lies between (a comment or blank line there may be the body's)
            between = self.lines[stmt.body[-1].end_lineno:following - 1]
            if any(not _CLAUSE.match(line) for line in between):
                return False
            limit = stmt.body[-1].end_lineno
        mark = len(self.pieces)
        header += _indent(stmt, self.lines) + b"class _:" + self._ending_at(stmt.lineno)
        if self.block(stmt.body, edits, depth + 1, header, limit):
            return True
        del self.pieces[mark:]
        return False

    def _ending_at(self, line: int) -> bytes:
        """The line ending of a line of the file (stand-in lines take their neighbours': a
        file may mix endings, and each region keeps its own)."""
        return _ending(self.lines[line - 1]) or self.newline

    def _decorate(self, stmt: ast.stmt, decorations: list[Decorate]) -> None:
        """New decorators go innermost, next to ``def``: after the last decorator's line."""
        at = stmt.decorator_list[-1].end_lineno + 1 if stmt.decorator_list else stmt.lineno
        ending = _ending(self.lines[at - 2]) if at > 1 else self.newline
        indent = _indent(stmt, self.lines)
        text = b"".join(indent + b"@" + e.code.encode("utf-8") + (ending or self.newline)
                        for e in sorted(decorations, key=lambda e: e.rank))
        self.pieces.append(Piece(at, at - 1, 0, 0, (), text=text))


_CLAUSE = re.compile(rb"^[ \t]*(else|finally|except\b.*|elif\b.*)[ \t]*:[ \t]*\r?\n?$")


def _next_clause(stmt: ast.stmt) -> int | None:
    """The first line of what follows the statement's body inside it: the first handler's
    ``except`` line, or the first statement of ``else`` / ``finally``; None when nothing does."""
    handlers = getattr(stmt, "handlers", None)
    if handlers:
        return handlers[0].lineno
    for field in ("orelse", "finalbody"):
        block = getattr(stmt, field, None)
        if block:
            return block[0].lineno
    return None


def _has_block(block: list[ast.stmt], lo: Unit, hi: Unit) -> bool:
    return any(isinstance(getattr(block[i], "body", None), list) or isinstance(block[i], ast.Match)
               for i in range(lo.first, hi.last + 1))


def _shifted(edit: Edit, piece: Piece) -> Edit:
    """``edit`` with its path in the piece's own module (``class _:`` around a nested one)."""
    path = edit_target(edit)
    field, index = path[piece.depth]
    moved = (*((("body", 0),) * piece.depth), (field, index - piece.first), *path[piece.depth + 1:])
    for name in ("func", "owner", "loop", "stmt"):
        if hasattr(edit, name):
            return attrs.evolve(edit, **{name: moved})
    raise TypeError(edit)  # pragma: no cover


def apply_in_pieces(source: bytes, edit_set: EditSet, import_anchor: int) -> bytes | None:
    """The edited file, regenerating only the statements that need it; None where the file
    cannot be cut (the caller then transforms the whole file). Raises what the transform
    raises (:class:`dftpass.core.rewrite.EditError`, libcst's errors)."""
    if not _utf8(source) or any(isinstance(e, WrapStmt) and e.through for e in edit_set.edits):
        return None  # a region over several statements: rare (one per training loop), done whole
    tree = ast.parse(source)
    if not tree.body:
        return None
    lines = source.splitlines(keepends=True)
    newline = next((_ending(line) for line in lines[:1]), b"") or b"\n"

    def head(spans: list[Unit]) -> set[int]:
        """The units the imports need: the dftracer import they join, or the statement they
        go after and the one they go above."""
        out: set[int] = set()
        if not (edit_set.api_imports or edit_set.std_imports):
            return out
        merged = _dftracer_import_unit(tree, spans) if edit_set.api_imports else None
        if merged is not None:
            out.add(merged)
        if edit_set.std_imports or merged is None:
            anchor = next(k for k, u in enumerate(spans) if u.first <= import_anchor - 1 <= u.last) \
                if import_anchor else -1
            out.update(k for k in (anchor, anchor + 1) if 0 <= k < len(spans))
            out.add(max(anchor, 0))
        return out

    indent = first_indent(tree, lines)
    cutter = _Cutter(tree, lines, newline, indent)
    try:
        cutter.block(tree.body, edit_set.edits, 0, b"", len(lines), head)
    except _CannotCut:
        return None
    # a piece with a hole comes before what is inside the hole, even where both start on one line
    pieces = sorted(cutter.pieces, key=lambda p: (p.start, -p.end))
    render = _Renderer(edit_set, import_anchor, lines, newline, indent)
    try:
        return _assemble(lines, pieces, 1, len(lines), render)
    except _CannotCut:
        return None


class _Renderer:
    def __init__(self, edit_set: EditSet, import_anchor: int, lines: list[bytes], newline: bytes,
                 indent: str | None) -> None:
        self.edit_set = edit_set
        self.anchor = import_anchor
        self.lines = lines
        self.newline = newline
        self.indent = indent

    def __call__(self, piece: Piece) -> bytes:

        if piece.text is not None:
            return piece.text
        body_end = piece.hole[0] - 1 if piece.hole else piece.end
        text = piece.header + b"".join(self.lines[piece.start - 1:body_end]) + piece.placeholder
        module = cst.parse_module(text)
        if piece.has_block and self.indent and module.default_indent != self.indent:
            raise _CannotCut("the file's indentation varies")
        # the piece's own line ending stays its default (a file may mix them: each region
        # keeps its own); its indentation is the file's
        if self.indent:
            module = module.with_changes(default_indent=self.indent)
        es = self.edit_set
        api, std = (es.api_imports, es.std_imports) if piece.imports else ([], [])
        anchor = self.anchor - piece.first if piece.imports and self.anchor else 0
        new = transform(module, [_shifted(e, piece) for e in piece.edits], api, std, anchor,
                        es.import_prelude and piece.imports)
        out = keep_original_bytes(text, new.bytes)
        if not out.startswith(piece.header) or not out.endswith(piece.placeholder):
            raise _CannotCut("a stand-in line moved")
        return out[len(piece.header):len(out) - len(piece.placeholder)]


def _assemble(lines: list[bytes], pieces: list[Piece], start: int, end: int, render) -> bytes:
    """Lines ``start``..``end`` with the pieces in them regenerated (a piece's hole is
    assembled from the pieces inside it)."""
    out: list[bytes] = []
    done = start - 1
    i = 0
    while i < len(pieces):
        piece = pieces[i]
        i += 1
        if piece.start <= done:
            raise _CannotCut("pieces overlap")
        out.append(b"".join(lines[done:piece.start - 1]))
        out.append(render(piece))
        if piece.hole:
            inner = []
            while i < len(pieces) and pieces[i].start <= piece.hole[1]:
                inner.append(pieces[i])
                i += 1
            out.append(_assemble(lines, inner, piece.hole[0], piece.hole[1], render))
        done = max(done, piece.end)
    out.append(b"".join(lines[done:end]))
    return b"".join(out)
