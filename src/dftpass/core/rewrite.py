"""The one libcst transform per file that applies a file's queued edits.

:func:`transform` resolves the statement paths of the edits (:mod:`dftpass.core.edits`) in
a libcst module, applies every edit in one transform and adds the imports once (after the
module docstring and ``from __future__`` imports, merged into an existing ``from
dftracer.python import``). :func:`dftpass.core.apply.apply_edits` gives it the pieces of
the file that hold edits (:mod:`dftpass.core.pieces`), or else the whole file, and checks
that the result compiles. Anything that goes wrong leaves the file untouched and says why.
Comments and formatting outside the edited spots are kept byte for byte.
"""

from __future__ import annotations

from typing import Sequence, Union

import libcst as cst

from dftpass.core.edits import (AddArgument, Decorate, Edit, Enumerate, InsertAfter, InsertBefore, WrapBody,
                                WrapIter, WrapStmt, WrapValue, edit_target)
from dftpass.core.emitter import API_MODULE, IMPORT_PRELUDE, IMPORT_PRELUDE_COMMENT
from dftpass.core.summary import StmtPath


class EditError(Exception):
    """The edits could not be applied; the file is left as it was."""


# --------------------------------------------------------------------------------------
# resolving statement paths in a libcst tree
# --------------------------------------------------------------------------------------

Entry = tuple[cst.CSTNode, Union[int, None]]  # (statement node, index of small statement | None)


class _Elif:
    """ast puts ``elif`` in ``orelse`` as a one-statement list; libcst nests the ``If``."""

    def __init__(self, node: cst.If) -> None:
        self.node = node


def _entries(block, cache: dict[int, list[Entry]] | None = None) -> list[Entry]:
    """The statements of a block, a simple statement line's parts each on its own (cached by
    block: a file with thousands of edits resolves thousands of paths through one module).
    An ``elif`` is not cached: its :class:`_Elif` is made anew for each path, and the id of one
    that is gone can be another's, whose statements the cache would then give (Megatron's
    ``checkpointing.py``: "path ... does not exist", and the file was left unannotated)."""
    if cache is not None and not isinstance(block, _Elif):
        found = cache.get(id(block))
        if found is None:
            found = cache[id(block)] = _entries(block)
        return found
    if isinstance(block, _Elif):
        return [(block.node, None)]
    if isinstance(block, cst.SimpleStatementSuite):
        return [(block, k) for k in range(len(block.body))]
    out: list[Entry] = []
    for stmt in block.body:
        if isinstance(stmt, cst.SimpleStatementLine):
            out.extend((stmt, k) for k in range(len(stmt.body)))
        else:
            out.append((stmt, None))
    return out


def _child_block(node: cst.CSTNode, field: str):
    """(block, the node whose ``.body`` is that block)."""
    if field == "body":
        return node.body, node
    if field == "orelse":
        orelse = node.orelse
        return (_Elif(orelse), None) if isinstance(orelse, cst.If) else (orelse.body, orelse)
    if field == "finalbody":
        return node.finalbody.body, node.finalbody
    name, _, k = field.partition(".")
    if name == "handlers":
        return node.handlers[int(k)].body, node.handlers[int(k)]
    if name == "cases":
        return node.cases[int(k)].body, node.cases[int(k)]
    raise EditError(f"unknown block {field!r}")


def resolve(module: cst.Module, path: StmtPath, chain: set[int] | None = None,
            cache: dict[int, list[Entry]] | None = None) -> tuple[Entry, list[cst.CSTNode]]:
    """The statement at ``path``, and the nodes on the way whose body is a one-line suite.
    ``chain`` collects the ids of every node from the module down to the statement."""
    block = module
    entry: Entry | None = None
    suites: list[cst.CSTNode] = []
    for i, (field, index) in enumerate(path):
        if i:
            owner = entry[0]
            if entry[1] is not None:
                raise EditError(f"path {path} goes into a simple statement")
            block, holder = _child_block(owner, field)
            if isinstance(block, cst.SimpleStatementSuite):
                suites.append(holder)
            if chain is not None:
                chain.update(id(n) for n in (holder, block if not isinstance(block, _Elif) else None) if n is not None)
        entries = _entries(block, cache)
        if index >= len(entries):
            raise EditError(f"path {path} does not exist in the file")
        entry = entries[index]
        if chain is not None:
            chain.add(id(entry[0]))
    if entry is None:
        raise EditError("empty path")
    return entry, suites


def _suite_owner_if_compound(node: cst.CSTNode) -> bool:
    return isinstance(getattr(node, "body", None), cst.SimpleStatementSuite)


class _ExpandSuites(cst.CSTTransformer):
    """``if x: a(); b()`` -> an indented block, where an edit must go inside the suite."""

    def __init__(self, owners: set[int]) -> None:
        self.owners = owners

    def on_leave(self, original_node, updated_node):
        if id(original_node) in self.owners and isinstance(getattr(updated_node, "body", None),
                                                           cst.SimpleStatementSuite):
            suite = updated_node.body
            lines = [cst.SimpleStatementLine(body=[_strip_semicolon(s)]) for s in suite.body]
            if lines:
                lines[-1] = lines[-1].with_changes(trailing_whitespace=suite.trailing_whitespace)
            return updated_node.with_changes(body=cst.IndentedBlock(body=lines))
        return updated_node


def _strip_semicolon(small: cst.BaseSmallStatement) -> cst.BaseSmallStatement:
    return small.with_changes(semicolon=cst.MaybeSentinel.DEFAULT)


# --------------------------------------------------------------------------------------
# the transform
# --------------------------------------------------------------------------------------


def _stmt(code: str) -> cst.BaseStatement:
    return cst.parse_statement(code if code.endswith("\n") else code + "\n")


def _small(code: str) -> cst.BaseSmallStatement:
    """The one small statement of ``code`` (``ai.compute.step.start()``)."""
    line = _stmt(code)
    if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
        raise EditError(f"not one simple statement: {code!r}")
    return line.body[0]


def _is_small(code: str) -> bool:
    """``code`` is one simple statement (it can join a ``;`` line)."""
    try:
        _small(code)
    except (EditError, cst.ParserSyntaxError):
        return False
    return True


def _stmts(code: str) -> list[cst.BaseStatement]:
    """One or more statements (a lifecycle block is several)."""
    return list(cst.parse_module(code if code.endswith("\n") else code + "\n").body)


def _expr(code: str) -> cst.BaseExpression:
    return cst.parse_expression(code)


def _is_docstring(stmt: cst.BaseStatement) -> bool:
    return (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
            and isinstance(stmt.body[0], cst.Expr)
            and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString)))


def _with(item: str, body: Sequence[cst.BaseStatement]) -> cst.With:
    """``with ITEM:`` around ``body``; ``ITEM`` may bind a name (``profile(...) as _dft_prof``)."""
    expr, sep, name = item.rpartition(" as ")
    if sep and name.isidentifier():
        with_item = cst.WithItem(item=_expr(expr), asname=cst.AsName(name=cst.Name(name)))
    else:
        with_item = cst.WithItem(item=_expr(item))
    return cst.With(items=[with_item], body=cst.IndentedBlock(body=list(body)))


def _bind_return(line: cst.BaseStatement, name: str) -> tuple[cst.BaseStatement, cst.BaseStatement | None]:
    """``return EXPR  # c`` -> (``name = EXPR  # c``, ``return name``), ``EXPR`` -> (``name =
    EXPR``, None): the value is named inside the region, so what runs after the statement
    there can measure it (or wait for it)."""
    small = line.body[0] if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1 else None
    if isinstance(small, cst.Expr):
        return line.with_changes(body=[cst.Assign(targets=[cst.AssignTarget(cst.Name(name))],
                                                  value=small.value)]), None
    if not isinstance(small, cst.Return) or small.value is None:
        raise EditError(f"not a return of a value: {cst.Module([]).code_for_node(line).strip()!r}")
    # the space after ``return`` becomes the one after ``=`` (``return(x)`` -> ``name =(x)``),
    # so that strip gives the line back byte for byte
    target = cst.AssignTarget(cst.Name(name), whitespace_after_equal=small.whitespace_after_return) \
        if isinstance(small.whitespace_after_return, cst.SimpleWhitespace) else cst.AssignTarget(cst.Name(name))
    assign = line.with_changes(body=[cst.Assign(targets=[target], value=small.value)])
    return assign, cst.SimpleStatementLine(body=[cst.Return(value=cst.Name(name))])


class _ExtendCall(cst.CSTTransformer):
    """Appends an item to the list of a keyword argument of the first call of ``callee``."""

    def __init__(self, edit: AddArgument) -> None:
        self.edit = edit
        self.done = False

    def leave_Call(self, original_node, updated_node):
        if self.done or cst.Module([]).code_for_node(updated_node.func) != self.edit.callee:
            return updated_node
        self.done = True
        e = self.edit
        item = _expr(e.item)
        args = list(updated_node.args)
        for i, arg in enumerate(args):
            if e.listed and arg.keyword is not None and arg.keyword.value == e.keyword:
                value = arg.value
                if isinstance(value, cst.List):
                    value = value.with_changes(elements=_appended(list(value.elements), cst.Element(item)))
                else:  # ``callbacks=cbs``: a list of the callbacks it gives, and ours
                    either = cst.BooleanOperation(value.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
                                                  if isinstance(value, (cst.BooleanOperation, cst.IfExp)) else value,
                                                  cst.Or(), cst.List([]))
                    value = cst.List([cst.StarredElement(either.with_changes(lpar=[cst.LeftParen()],
                                                                                 rpar=[cst.RightParen()])),
                                      cst.Element(item)])
                args[i] = arg.with_changes(value=value)
                return updated_node.with_changes(args=args)
        if not e.listed and any(a.keyword is not None and a.keyword.value == e.keyword for a in args):
            raise EditError(f"{e.callee}() has {e.keyword}= already (line {e.line})")
        new = cst.Arg(value=cst.List([cst.Element(item)]) if e.listed else item, keyword=cst.Name(e.keyword),
                      equal=cst.AssignEqual(whitespace_before=cst.SimpleWhitespace(""),
                                            whitespace_after=cst.SimpleWhitespace("")))
        return updated_node.with_changes(args=_appended(args, new))


def _appended(items: list, new):
    """``items`` + ``new``: the last item's comma (a trailing one, or none) moves to ``new``,
    and the last item gets the separator the others use (``", "`` when there is none)."""
    if not items:
        return [new]
    last = items[-1]
    separator = items[-2].comma if len(items) > 1 and isinstance(items[-2].comma, cst.Comma) else \
        cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    return [*items[:-1], last.with_changes(comma=separator), new.with_changes(comma=last.comma)]


def _add_argument(stmt: cst.BaseStatement, edit: AddArgument) -> cst.BaseStatement:
    extend = _ExtendCall(edit)
    out = stmt.visit(extend)
    if not extend.done:
        raise EditError(f"no call of {edit.callee}() at line {edit.line}")
    return out


def _move_leading_lines(src: cst.BaseStatement, dst: cst.BaseStatement) -> tuple[cst.BaseStatement, cst.BaseStatement]:
    """Comments above ``src`` go above ``dst`` (the new outermost statement)."""
    lines = getattr(src, "leading_lines", ())
    if not lines:
        return src, dst
    return src.with_changes(leading_lines=()), dst.with_changes(leading_lines=lines)


class _Apply(cst.CSTTransformer):
    def __init__(self, module: cst.Module, edits: Sequence[Edit], names_api, names_std,
                 import_anchor: int, prelude: bool = False) -> None:
        self.prelude = prelude
        self.by_node: dict[int, list[Edit]] = {}
        self.small: dict[int, dict[int | None, list[Edit]]] = {}
        #: the nodes on the way to an edit: the transform visits only these, and leaves every
        #: other subtree as it is (a full visit cost as much again as parsing, on big files)
        self.keep: set[int] = {id(module)}
        cache: dict[int, list[Entry]] = {}
        #: id of the statement that ends a region over several statements -> those regions
        self.span_ends: dict[int, list[WrapStmt]] = {}
        for edit in edits:
            (node, k), _ = resolve(module, edit_target(edit), self.keep, cache)
            if isinstance(edit, WrapStmt) and edit.through:
                (last, _), _ = resolve(module, edit.through, self.keep, cache)
                if edit.through[:-1] != edit.stmt[:-1] or edit.through[-1][0] != edit.stmt[-1][0] or \
                        edit.through[-1][1] <= edit.stmt[-1][1]:
                    raise EditError(f"a region at line {edit.line} must end on a later statement of its block")
                self.span_ends.setdefault(id(last), []).append(edit)
            if isinstance(edit, (WrapStmt, InsertBefore, InsertAfter, AddArgument, WrapValue)):
                self.small.setdefault(id(node), {}).setdefault(k, []).append(edit)
            else:
                if k is not None:
                    raise EditError(f"{type(edit).__name__} on a simple statement at line {edit.line}")
                self.by_node.setdefault(id(node), []).append(edit)
        self.api = names_api
        self.std = names_std
        self.anchor_entry = _entries(module)[import_anchor - 1][0] if import_anchor else None

    # -- blocks ------------------------------------------------------------------------
    def _rewrite_block(self, original: Sequence[cst.BaseStatement],
                       updated: Sequence[cst.BaseStatement]) -> list[cst.BaseStatement]:
        out: list[cst.BaseStatement] = []
        #: regions over several statements: the edit, and where its statements start in ``out``
        open_spans: dict[WrapStmt, int] = {}
        for orig, upd in zip(original, updated):
            edits = self.small.get(id(orig))
            spans = [e for group in (edits or {}).values() for e in group if isinstance(e, WrapStmt) and e.through]
            if spans:  # the whole line goes in (``a = model(x); b = 1``: the second part with it)
                edits = {k: [e for e in group if e not in spans] for k, group in edits.items()}
                open_spans.update((e, len(out)) for e in spans)
            self._rewrite_one(orig, upd, edits, out)
            for e in self.span_ends.get(id(orig), ()):
                if e not in open_spans:
                    raise EditError(f"the region at line {e.line} ends before it starts")
                start = open_spans.pop(e)
                # the tail (``X.update(image_size=...)``) runs inside the region, after its run
                inner = out[start:] + [s for code in e.tail for s in _stmts(code)]
                inner[0], outer = _move_leading_lines(inner[0], _with(e.with_item, []))
                out[start:] = [outer.with_changes(body=cst.IndentedBlock(body=inner))]
        if open_spans:
            raise EditError(f"the region at line {next(iter(open_spans)).line} does not end in its block")
        return out

    def _rewrite_one(self, orig: cst.BaseStatement, upd: cst.BaseStatement, edits: dict | None,
                     out: list[cst.BaseStatement]) -> None:
        """Append one statement of a block to ``out``, with the edits made on it."""
        if not edits or not any(edits.values()):
            out.append(upd)
        elif isinstance(orig, cst.SimpleStatementLine) and len(orig.body) > 1 and all(
                isinstance(e, (InsertBefore, InsertAfter)) and _is_small(e.code)
                for group in edits.values() for e in group):
            out.append(self._insert_in_line(upd, edits))
        elif isinstance(orig, cst.SimpleStatementLine):
            out.extend(self._split_line(upd, edits))
        else:
            out.extend(self._around(upd, edits.get(None, [])))

    def _insert_in_line(self, line: cst.SimpleStatementLine, edits: dict) -> cst.SimpleStatementLine:
        """``opt.step(); opt.zero_grad()``: start/stop go into the same line, next to the
        statement they surround (the line stays one line, and ``strip`` can give it back)."""
        semicolon = cst.Semicolon(whitespace_after=cst.SimpleWhitespace(" "))
        smalls: list[cst.BaseSmallStatement] = []
        for k, small in enumerate(line.body):
            group = edits.get(k, [])
            smalls += [_small(e.code) for e in group if isinstance(e, InsertBefore)]
            smalls.append(small)
            smalls += [_small(e.code) for e in group if isinstance(e, InsertAfter)]
        smalls = [x.with_changes(semicolon=semicolon) for x in smalls[:-1]] + [_strip_semicolon(smalls[-1])]
        return line.with_changes(body=smalls)

    def _split_line(self, line: cst.SimpleStatementLine, edits: dict) -> list[cst.BaseStatement]:
        """Give each edited small statement its own line, then edit around it."""
        groups: list[tuple[list[cst.BaseSmallStatement], list[Edit]]] = []
        for k, small in enumerate(line.body):
            if k in edits:
                groups.append(([small], edits[k]))
            elif groups and all(isinstance(e, InsertBefore) for e in groups[-1][1]):
                groups[-1][0].append(small)  # what goes above the line leaves the line whole
            else:
                groups.append(([small], []))
        out: list[cst.BaseStatement] = []
        for g, (smalls, group_edits) in enumerate(groups):
            smalls = [*smalls[:-1], _strip_semicolon(smalls[-1])]
            new_line = cst.SimpleStatementLine(body=smalls)
            if g == 0:
                new_line = new_line.with_changes(leading_lines=line.leading_lines)
            if g == len(groups) - 1:
                new_line = new_line.with_changes(trailing_whitespace=line.trailing_whitespace)
            out.extend(self._around(new_line, group_edits))
        return out

    def _around(self, stmt: cst.BaseStatement, edits: Sequence[Edit]) -> list[cst.BaseStatement]:
        node = stmt
        after_region: list[cst.BaseStatement] = []  # ``return bind`` of a bound WrapStmt
        for e in edits:
            if isinstance(e, AddArgument):
                node = _add_argument(node, e)
            elif isinstance(e, WrapValue):
                node = _wrap_value(node, e)
        for e in edits:
            if isinstance(e, WrapStmt):
                returned = None
                if e.bind:
                    node, returned = _bind_return(node, e.bind)
                inner, outer = _move_leading_lines(node, _with(e.with_item, []))
                tail = [s for code in e.tail for s in _stmts(code)]
                node = outer.with_changes(body=cst.IndentedBlock(body=[inner, *tail]))
                if returned is not None:
                    after_region.append(returned)
        # statements that open a region around this one (``X.start()``) go right before it;
        # free-standing ones (``ai.update(...)``) go above them
        inserts = sorted((e for e in edits if isinstance(e, InsertBefore)), key=lambda e: e.take_comments)
        before = [s for e in inserts for s in _stmts(e.code)]
        after = [s for e in edits if isinstance(e, InsertAfter) for s in _stmts(e.code)]
        if before and any(e.take_comments or e.separate for e in inserts):
            node, before[0] = _move_leading_lines(node, before[0])
        if before and any(e.separate for e in inserts):
            node = node.with_changes(leading_lines=[cst.EmptyLine()])
        return [*before, node, *after_region, *after]

    def on_visit(self, node) -> bool:
        return id(node) in self.keep

    def leave_IndentedBlock(self, original_node, updated_node):
        if not any(id(s) in self.small for s in original_node.body):
            return updated_node
        return updated_node.with_changes(body=self._rewrite_block(original_node.body, updated_node.body))

    # -- compound statements ----------------------------------------------------------
    def leave_FunctionDef(self, original_node, updated_node):
        edits = self.by_node.get(id(original_node), [])
        decorators = sorted((e for e in edits if isinstance(e, Decorate)), key=lambda e: e.rank)
        if decorators:
            new = [cst.Decorator(decorator=_expr(e.code)) for e in decorators]
            updated_node = updated_node.with_changes(decorators=[*updated_node.decorators, *new])
        for e in edits:
            if isinstance(e, WrapBody):
                updated_node = _wrap_body(updated_node, e, keep_docstring=True)
        return updated_node

    def leave_If(self, original_node, updated_node):
        for e in self.by_node.get(id(original_node), []):
            if isinstance(e, WrapBody):
                updated_node = _wrap_body(updated_node, e, keep_docstring=False)
        return updated_node

    leave_While = leave_If

    def leave_For(self, original_node, updated_node):
        edits = self.by_node.get(id(original_node), [])
        for e in edits:
            if isinstance(e, WrapIter):
                updated_node = updated_node.with_changes(iter=_wrap_at(updated_node.iter, e))
        for e in edits:
            if isinstance(e, Enumerate):
                target = updated_node.target
                if isinstance(target, cst.Tuple) and not target.lpar:
                    target = target.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
                new_target = cst.Tuple(elements=[cst.Element(cst.Name(e.index)), cst.Element(target)],
                                       lpar=[], rpar=[])
                new_iter = cst.Call(func=cst.Name("enumerate"), args=[cst.Arg(updated_node.iter)])
                updated_node = updated_node.with_changes(target=new_target, iter=new_iter)
        return updated_node

    # -- the module: top-level statements and imports -----------------------------------
    def leave_Module(self, original_node, updated_node):
        body = self._rewrite_block(original_node.body, updated_node.body)
        body = self._add_imports(original_node, body)
        return updated_node.with_changes(body=body)

    def _add_imports(self, original: cst.Module, body: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
        if not self.api and not self.std:
            return body
        api = list(self.api)
        if api:
            for i, stmt in enumerate(body):
                imp = _dftracer_import(stmt)
                if imp is not None:
                    names = list(imp.names) if not isinstance(imp.names, cst.ImportStar) else []
                    if names and not isinstance(names[-1].comma, cst.Comma):
                        names[-1] = names[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
                    for k, (name, alias) in enumerate(api):
                        last = k == len(api) - 1
                        names.append(cst.ImportAlias(
                            name=cst.Name(name),
                            asname=cst.AsName(name=cst.Name(alias)) if alias != name else None,
                            comma=cst.MaybeSentinel.DEFAULT if last else cst.Comma(
                                whitespace_after=cst.SimpleWhitespace(" ")),
                        ))
                    body[i] = stmt.with_changes(body=[imp.with_changes(names=names), *stmt.body[1:]])
                    api = []
                    break
        new: list[cst.BaseStatement] = []
        if self.prelude and (api or self.std):
            # first, so that it runs before anything imports dftracer (the runtime's
            # initialize() does, when the file imports no dftracer name itself)
            new.append(_stmt(f"{IMPORT_PRELUDE}  {IMPORT_PRELUDE_COMMENT}"))
        for module, alias in self.std:
            new.append(_stmt(f"import {module}" + (f" as {alias}" if alias != module else "")))
        if api:
            names = ", ".join(n if a == n else f"{n} as {a}" for n, a in api)
            new.append(_stmt(f"from {API_MODULE} import {names}"))
        if not new:
            return body
        if self.anchor_entry is None:
            position = 0
        else:
            position = next(i for i, s in enumerate(original.body) if s is self.anchor_entry) + 1
        if position < len(body):
            body[position], new[0] = _separate(body[position], new[0])
        return [*body[:position], *new, *body[position:]]


def _is_import(stmt: cst.BaseStatement) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], (cst.Import, cst.ImportFrom))


def _separate(following: cst.BaseStatement, first_new: cst.BaseStatement):
    """Blank lines that opened ``following`` now open the inserted imports; a statement that
    is not an import gets the blank lines a formatter would put after an import block."""
    lines = list(following.leading_lines)
    k = 0
    while k < len(lines) and lines[k].comment is None:
        k += 1
    first_new = first_new.with_changes(leading_lines=lines[:k])
    rest = lines[k:]
    if not _is_import(following):
        wanted = 2 if isinstance(following, (cst.FunctionDef, cst.ClassDef)) else 1
        rest = [cst.EmptyLine()] * wanted + rest
    return following.with_changes(leading_lines=rest), first_new


def _dftracer_import(stmt: cst.BaseStatement) -> cst.ImportFrom | None:
    if not isinstance(stmt, cst.SimpleStatementLine) or not stmt.body:
        return None
    first = stmt.body[0]
    if isinstance(first, cst.ImportFrom) and not first.relative and first.module is not None:
        if cst.Module([]).code_for_node(first.module) == API_MODULE and not isinstance(first.names, cst.ImportStar):
            return first
    return None


def _wrap_body(node, e: WrapBody, keep_docstring: bool):
    body = node.body
    if not isinstance(body, cst.IndentedBlock):  # pragma: no cover - suites are expanded first
        raise EditError("cannot wrap a one-line body")
    stmts = list(body.body)
    head: list[cst.BaseStatement] = []
    if keep_docstring and stmts and _is_docstring(stmts[0]):
        head, stmts = [stmts[0]], stmts[1:]
    inner: list[cst.BaseStatement] = stmts or [cst.SimpleStatementLine(body=[cst.Pass()])]
    if e.with_item:
        inner = [_with(e.with_item, inner)]
    if e.finally_:
        inner = [cst.Try(body=cst.IndentedBlock(body=inner),
                         finalbody=cst.Finally(body=cst.IndentedBlock(body=[_stmt(c) for c in e.finally_])))]
    prologue = [_stmt(c) for c in e.prologue]
    return node.with_changes(body=body.with_changes(body=[*head, *prologue, *inner]))


def _wrap_value(line: cst.BaseStatement, e: WrapValue) -> cst.BaseStatement:
    """``x = v`` -> ``x = CALLEE(v EXTRA)`` (the line holds that one assignment)."""
    small = line.body[0] if isinstance(line, cst.SimpleStatementLine) and len(line.body) == 1 else None
    if not isinstance(small, (cst.Assign, cst.AnnAssign)) or small.value is None:
        raise EditError(f"line {e.line}: WrapValue needs an assignment")
    wrapper = _expr(f"{e.callee}(__dftpass_inner__{e.extra})")
    args = list(wrapper.args)
    args[0] = args[0].with_changes(value=small.value)
    return line.with_changes(body=[small.with_changes(value=wrapper.with_changes(args=args))])


def _wrap_at(expr: cst.BaseExpression, e: WrapIter) -> cst.BaseExpression:
    if e.depth == 0:
        wrapper = _expr(f"{e.callee}(__dftpass_inner__{e.extra})")
        args = list(wrapper.args)
        args[0] = args[0].with_changes(value=expr)
        return wrapper.with_changes(args=args)
    if not isinstance(expr, cst.Call) or not expr.args:
        raise EditError(f"line {e.line}: the loop's iterable is not the expected call")
    args = list(expr.args)
    inner = WrapIter(e.rule, e.line, e.why, e.loop, e.callee, e.depth - 1, e.extra)
    args[0] = args[0].with_changes(value=_wrap_at(args[0].value, inner))
    return expr.with_changes(args=args)


# --------------------------------------------------------------------------------------
# entry point
# --------------------------------------------------------------------------------------


def transform(module: cst.Module, edits: Sequence[Edit], api_imports, std_imports, import_anchor: int,
              prelude: bool = False) -> cst.Module:
    """``module`` with ``edits`` applied and the imports added: one-line suites that an edit
    goes into are expanded first, then one transform visits the nodes on the way to an edit."""
    owners: set[int] = set()
    cache: dict[int, list[Entry]] = {}
    for edit in edits:
        (node, _), suites = resolve(module, edit_target(edit), cache=cache)
        owners.update(id(s) for s in suites)
        if isinstance(edit, WrapBody) and _suite_owner_if_compound(node):  # the edit goes into the body
            owners.add(id(node))
    if owners:
        module = module.visit(_ExpandSuites(owners))
    return module.visit(_Apply(module, edits, api_imports, std_imports, import_anchor, prelude))
