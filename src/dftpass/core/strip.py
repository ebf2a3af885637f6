"""Taking out what dftpass put in: the exact way back (``dftpass strip``).

Each edit dftpass applies has an inverse here, found again by its *shape* and by what
``.dftpass/annotations.json`` says dftpass wrote in that scope (:mod:`dftpass.core.provenance`),
so a tree edited by hand after annotation strips too, and a hand annotation of the same node
elsewhere is left alone:

=====================  ========================================================================
edit                   its inverse
=====================  ========================================================================
``Decorate``           the decorator goes
``WrapBody``           the prologue statements go, ``try``/``finally`` and ``with`` unwrap
``WrapIter``           ``ai.x.iter(it, ...)`` becomes ``it``
``WrapValue``          ``x = ai.x.iter(v, ...)`` becomes ``x = v``
``Enumerate``          ``for _dft_step, (x, y) in enumerate(it)`` becomes ``for x, y in it``
``WrapStmt``           ``with ai.x:`` around one statement unwraps, its tail statements go; comments
                       go back to it
``InsertBefore/After`` the statement goes (in a ``;`` line, the part); its comments go to the next
imports                the names dftpass imported go, and the blank lines it moved come back
=====================  ========================================================================

``strip_all`` removes every dftracer region however it was written (decorators, ``with``,
``iter``, ``start``/``stop``/``update`` statements, ``dft_fn`` logging decorators) and
dftracer imports nothing uses any more; a hand-written ``initialize_log``/``finalize`` is
kept and reported (removing it could leave a name undefined).

The result must compile, and every line strip did not touch keeps its bytes
(:func:`dftpass.core.linebytes.keep_original_bytes`); otherwise the file is left as it was.
"""

from __future__ import annotations

import re
from collections import Counter
from typing import Sequence

import attrs
import libcst as cst

from dftpass.core.emitter import (IMPORT_PRELUDE, LEGACY_IMPORT_PRELUDE, RUNTIME_FINALIZE_CHILD, RUNTIME_INITIALIZE,
                                   RUNTIME_LOG_PARAMETERS, RUNTIME_WORKER_INIT, is_emitted_name, recognize,
                                   runtime_call)
from dftpass.core.linebytes import keep_original_bytes
from dftpass.core.summary import MODULE_SCOPE, FileSummary

_CODE = cst.Module([])
#: names only dftpass binds: its step index (``--all`` strips such an ``enumerate``)
_OWN_NAMES = re.compile(r"^_dft_step_?$")
#: the profiler object ML-R28 binds
_OWN_PROFILER = re.compile(r"^_dft_prof_?$")
#: a callback dftpass adds to a framework's ``callbacks=`` list (``--all`` takes it out):
#: ``_dft_runtime.KerasCallback()``, or the class older versions defined in the file
_OWN_CALLBACK = re.compile(r"^(_dft_runtime_?\.\w*Callback|_Dft\w*Callback_?)\(\)$")
#: the module of those callbacks, as dftpass imports it
_RUNTIME_IMPORT = re.compile(r"^import dftpass\.runtime as (_dft_runtime_?)$")
#: names only dftpass binds to a value it measures or waits for (``--all`` gives the
#: statement back)
_BOUND_NAMES = re.compile(r"^_dft_(read|result)_?$")


def _code(node: cst.CSTNode) -> str:
    return _CODE.code_for_node(node).strip()


def _bound_name(stmt: cst.BaseStatement) -> str | None:
    """NAME of a line that is only ``NAME = EXPR``."""
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Assign) \
            and len(stmt.body[0].targets) == 1 and isinstance(stmt.body[0].targets[0].target, cst.Name):
        return stmt.body[0].targets[0].target.value
    return None


def _with_item_code(item: cst.WithItem) -> str:
    """``X`` or ``X as name``, as an edit records a ``with`` item."""
    code = _code(item.item)
    return f"{code} as {_code(item.asname.name)}" if item.asname is not None else code


def _returned_name(stmt: cst.BaseStatement) -> str | None:
    """NAME of a line that is only ``return NAME``."""
    if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and isinstance(stmt.body[0], cst.Return) \
            and isinstance(stmt.body[0].value, cst.Name):
        return stmt.body[0].value.value
    return None


def _small_code(small: cst.BaseSmallStatement) -> str:
    """A small statement's code without the ``;`` that may follow it on its line."""
    return _code(small.with_changes(semicolon=cst.MaybeSentinel.DEFAULT))


def _norm(code: str) -> str:
    return code.strip()


@attrs.define
class Stripped:
    new: bytes | None
    removed: int = 0
    #: hand-written lifecycle calls kept (``--all``): (line text, why)
    kept: list[str] = attrs.field(factory=list)
    error: str | None = None


class _Strip(cst.CSTTransformer):
    def __init__(self, records: Sequence[dict], fs: FileSummary | None, strip_all: bool,
                 exported: frozenset[str] = frozenset()) -> None:
        self.fs = fs
        self.strip_all = strip_all
        #: names of this module other project files import: an import that binds one stays
        #: (DLIO's ``utility.py`` imports ``dft_fn as Profile`` for 40 other modules)
        self.exported = exported
        self.want: Counter = Counter()
        #: (scope, on) -> recorded lifecycles: (prologue statement codes, finally codes, with item)
        self.lifecycles: dict[tuple[str, str], list[tuple[list[str], list[str], str | None]]] = {}
        self.separate: set[tuple[str, str]] = set()
        self.api: list[tuple[str, str]] = []
        self.std: list[tuple[str, str]] = []
        for rec in records:
            for e in rec.get("edits", ()):
                self.want.update(self._keys(e))
                if e["edit"] == "WrapBody" and e.get("prologue"):
                    self.lifecycles.setdefault((e["scope"], e["on"]), []).append(
                        ([c for part in e["prologue"] for c in _statements(part)],
                         [c for part in e["final"] for c in _statements(part)], e.get("item")))
                if e.get("separate"):
                    self.separate.add((e["scope"], _norm(e["code"]).splitlines()[0]))
            self.api += [tuple(x) for x in rec.get("imports", {}).get("api", ())]
            self.std += [tuple(x) for x in rec.get("imports", {}).get("std", ())]
        self.scopes: list[tuple[str, str]] = []  # (kind, qualname)
        self._with_bodies: set[int] = set()
        self.removed = 0
        #: id of a kept statement -> the first removed statement whose place it took (their
        #: blank lines came to it): what ``rewrite._separate`` saw after the import block
        self.took_place_of: dict[int, cst.BaseStatement] = {}
        self.kept: list[str] = []
        self.parens: dict[tuple[str, str], int] = Counter()
        for rec in records:
            for e in rec.get("edits", ()):
                if e["edit"] == "Enumerate" and not e.get("parens"):
                    self.parens[(e["scope"], e["index"])] += 1

    # -- what was recorded ----------------------------------------------------------------
    @staticmethod
    def _keys(e: dict) -> list[tuple]:
        kind, scope = e["edit"], e["scope"]
        if kind == "Decorate":
            return [("decorator", scope, _norm(e["code"]))]
        if kind == "WrapBody":
            return [] if e.get("prologue") else [(f"{e['on']}-with", scope, e.get("item"))]
        if kind in ("WrapIter", "WrapValue"):  # a wrapped iterable, of a loop or of an assignment
            return [("iter", scope, e["callee"])]
        if kind == "Enumerate":
            return [("enumerate", scope, e["index"])]
        if kind == "WrapStmt":  # the tail statements go first (their block is left first), then the with
            return [("with", scope, e["item"]), *(("stmt", scope, _norm(part)) for code in e.get("tail", ())
                                                 for part in _parts(code)),
                    *((("bind", scope, e["bind"]),) if e.get("bind") else ())]
        if kind in ("InsertBefore", "InsertAfter"):
            return [("stmt", scope, _norm(part)) for part in _parts(e["code"])]
        if kind == "AddArgument":
            if not e.get("listed", True):
                return [("keyword", scope, e["callee"], e["keyword"], _norm(e["item"]))]
            return [("argument", scope, e["callee"], e["keyword"], _norm(e["item"]), bool(e.get("new")))]
        return []

    def _take(self, key: tuple, dftracer_construct: bool = False) -> bool:
        if self.want[key] > 0:
            self.want[key] -= 1
            self.removed += 1
            return True
        if self.strip_all and dftracer_construct:
            self.removed += 1
            return True
        return False

    def _is_region(self, text: str) -> bool:
        """A dftracer ``ai`` node or a ``dft_fn`` logger in this file (``--all``): a logger's
        decorators, the logger itself (``dlp.iter(...)``), a logger made in place as a
        ``with`` item (``with dft_fn(cat, name=...):``)."""
        if not self.strip_all or self.fs is None:
            return False
        if text.endswith(")") and "(" in text and recognize(self.fs, text.split("(", 1)[0]) == "dft_fn":
            return True
        found = recognize(self.fs, text)
        if found is not None and not found.startswith(("dftracer", "dft_fn", "module")):
            return True
        head, _, rest = text.partition(".")
        return (not rest or rest.split(".")[0] in ("log", "log_init", "log_static")) and self._is_fn_object(head)

    def _is_fn_object(self, name: str) -> bool:
        """``dlp`` in ``dlp = dft_fn("train")`` at the top of the module."""
        if self.fs is None:
            return False
        return any(a.target == name and a.value and (recognize(self.fs, a.value[:-2]) or "").startswith("dft_fn")
                   for a in self.fs.module_scope.assigns if a.value and a.value.endswith("()"))

    # -- scopes ---------------------------------------------------------------------------
    def _scope(self) -> str:
        for kind, qual in reversed(self.scopes):
            if kind == "function":
                return qual
        return MODULE_SCOPE

    def _qualify(self, name: str, kind: str) -> str:
        if not self.scopes:
            return name
        outer_kind, outer = self.scopes[-1]
        return f"{outer}.<locals>.{name}" if outer_kind == "function" else f"{outer}.{name}"

    def visit_ClassDef(self, node) -> bool:
        self.scopes.append(("class", self._qualify(node.name.value, "class")))
        return True

    def leave_ClassDef(self, original_node, updated_node):
        self.scopes.pop()
        return updated_node

    def visit_FunctionDef(self, node) -> bool:
        self.scopes.append(("function", self._qualify(node.name.value, "function")))
        return True

    # -- functions: decorators, body regions, lifecycles ----------------------------------
    def leave_FunctionDef(self, original_node, updated_node):
        qual = self.scopes.pop()[1]
        decorators = [d for d in updated_node.decorators
                      if not self._take(("decorator", qual, _code(d.decorator)), self._is_region(_code(d.decorator)))]
        body = updated_node.body
        if isinstance(body, cst.IndentedBlock):
            stmts = list(body.body)
            head = stmts[:1] if stmts and _is_docstring(stmts[0]) else []
            rest = self._unwrap_body(stmts[len(head):], qual, "function")
            body = body.with_changes(body=head + rest)
        return updated_node.with_changes(decorators=decorators, body=body)

    def _unwrap_body(self, stmts: list[cst.BaseStatement], scope: str, on: str) -> list[cst.BaseStatement]:
        """A lifecycle (prologue + try/finally [+ with]) or a body region (one ``with``)."""
        lifecycle = self._lifecycle(stmts, scope, on)
        if lifecycle is not None:
            return lifecycle
        if len(stmts) == 1 and isinstance(stmts[0], cst.With) and len(stmts[0].items) == 1:
            item = _code(stmts[0].items[0].item)
            if self._take((f"{on}-with", scope, item), self._is_region(item)):
                return list(stmts[0].body.body)
        return stmts

    def _lifecycle(self, stmts: list[cst.BaseStatement], scope: str, on: str) -> list[cst.BaseStatement] | None:
        """dftpass's lifecycle: its prologue statements, then ``try: [with ai:] BODY finally:
        ...`` (as recorded; with ``--all``, any such block that binds dftpass's ``_dft_log``)."""
        codes = [_code(x) for x in stmts]
        candidates = list(self.lifecycles.get((scope, on), ()))
        if self.strip_all:
            k = 0
            while k < len(stmts) and "_dft_log" in codes[k] and not isinstance(stmts[k], cst.Try):
                k += 1
            last = stmts[k] if k < len(stmts) else None
            if k and isinstance(last, cst.Try) and last.finalbody is not None and "_dft_log" in _code(last.finalbody):
                candidates.append((codes[:k], [_code(x) for x in last.finalbody.body.body], "any"))
        for prologue, final, item in candidates:
            n = len(prologue)
            if codes[:n] != prologue or len(stmts) != n + 1 or not isinstance(stmts[n], cst.Try):
                continue
            trial: cst.Try = stmts[n]
            if trial.handlers or trial.orelse or trial.finalbody is None or \
                    [_code(x) for x in trial.finalbody.body.body] != final:
                continue
            inner = list(trial.body.body)
            wrapped = len(inner) == 1 and isinstance(inner[0], cst.With) and len(inner[0].items) == 1 and (
                _code(inner[0].items[0].item) == item or (item == "any" and self._is_region(
                    _code(inner[0].items[0].item))))
            if item not in (None, "any") and not wrapped:
                continue
            if (prologue, final, item) in self.lifecycles.get((scope, on), []):
                self.lifecycles[(scope, on)].remove((prologue, final, item))
            self.removed += 1
            return list(inner[0].body.body) if wrapped else inner
        return None

    # -- if __name__ == "__main__" and while loops ---------------------------------------------
    def leave_If(self, original_node, updated_node):
        if isinstance(updated_node.body, cst.IndentedBlock):
            stmts = self._unwrap_body(list(updated_node.body.body), self._scope(), "guard")
            updated_node = updated_node.with_changes(body=updated_node.body.with_changes(body=stmts))
        return updated_node

    def leave_While(self, original_node, updated_node):
        if isinstance(updated_node.body, cst.IndentedBlock):
            stmts = self._unwrap_body(list(updated_node.body.body), self._scope(), "loop")
            updated_node = updated_node.with_changes(body=updated_node.body.with_changes(body=stmts))
        return updated_node

    # -- for loops: enumerate, iter wrappers ------------------------------------------------------
    def leave_For(self, original_node, updated_node):
        scope = self._scope()
        target, it = updated_node.target, updated_node.iter
        if isinstance(target, cst.Tuple) and len(target.elements) == 2 and not target.lpar \
                and isinstance(target.elements[0].value, cst.Name) and isinstance(it, cst.Call) \
                and _code(it.func) == "enumerate" and len(it.args) == 1:
            index = target.elements[0].value.value
            if self._take(("enumerate", scope, index), bool(_OWN_NAMES.search(index))):
                inner = target.elements[1].value
                if self.parens[(scope, index)] > 0 and isinstance(inner, cst.Tuple) and inner.lpar:
                    self.parens[(scope, index)] -= 1
                    inner = inner.with_changes(lpar=[], rpar=[])
                target, it = inner, it.args[0].value
        return updated_node.with_changes(target=target, iter=self._unwrap_iter(it, scope))

    def leave_Assign(self, original_node, updated_node):
        return updated_node.with_changes(value=self._unwrap_iter(updated_node.value, self._scope()))

    def leave_AnnAssign(self, original_node, updated_node):
        if updated_node.value is None:
            return updated_node
        return updated_node.with_changes(value=self._unwrap_iter(updated_node.value, self._scope()))

    def _unwrap_iter(self, expr: cst.BaseExpression, scope: str) -> cst.BaseExpression:
        if not isinstance(expr, cst.Call) or not expr.args:
            return expr
        callee = _code(expr.func)
        if callee.endswith(".iter") and self._take(("iter", scope, callee), self._is_region(callee[:-5])):
            return self._unwrap_iter(expr.args[0].value, scope)
        first = expr.args[0].with_changes(value=self._unwrap_iter(expr.args[0].value, scope))
        return expr.with_changes(args=[first, *expr.args[1:]])

    # -- statement lists: wrapped statements, inserted statements ---------------------------------
    def visit_With(self, node) -> bool:
        # only a region dftpass wrapped keeps its binding until the region is unwrapped; the
        # body of the program's own ``with`` (``with lock:``) is where a ``return`` comes back
        # (Megatron's safe_globals.py kept ``_dft_read = numpy.load(...)`` there)
        if len(node.items) == 1:
            item = _code(node.items[0].item)
            if self.want[("with", self._scope(), item)] > 0 or self._is_region(item):
                self._with_bodies.add(id(node.body))
        return True

    def leave_IndentedBlock(self, original_node, updated_node):
        # a ``with`` body is unbound in the block around it, where the region is unwrapped and
        # the ``return NAME`` that may follow it is in sight
        unbind = id(original_node) not in self._with_bodies
        return updated_node.with_changes(body=self._block(list(updated_node.body), unbind))

    def _block(self, stmts: list[cst.BaseStatement], unbind: bool = True) -> list[cst.BaseStatement]:
        scope = self._scope()
        out: list[cst.BaseStatement] = []
        carried: Sequence[cst.EmptyLine] = ()  # leading lines of removed statements
        replace = False  # a separate block's lines replace the single blank line it left
        first_removed: cst.BaseStatement | None = None
        for stmt in stmts:
            if isinstance(stmt, cst.With) and len(stmt.items) == 1 and len(stmt.body.body) >= 1 and \
                    self._take(("with", scope, _with_item_code(stmt.items[0])), self._is_region(_code(stmt.items[0].item))
                               or self._is_profiler(stmt.items[0])):
                inner = list(stmt.body.body)
                inner[0] = inner[0].with_changes(leading_lines=[*stmt.leading_lines, *inner[0].leading_lines])
                stmts_to_add = inner
            elif not isinstance(stmt, cst.SimpleStatementLine) and self._take(
                    ("stmt", scope, _code(stmt.with_changes(leading_lines=()))), self._is_guarded_update(stmt)):
                if (scope, _code(stmt).splitlines()[0]) in self.separate:
                    replace = True
                carried = [*carried, *stmt.leading_lines]
                first_removed = first_removed or stmt
                continue
            elif isinstance(stmt, cst.SimpleStatementLine):
                kept = [s for s in stmt.body
                        if not self._take(("stmt", scope, _small_code(s)), self._is_call_region(s))]
                if (scope, _small_code(stmt.body[0])) in self.separate and len(kept) < len(stmt.body):
                    replace = True
                if not kept:
                    carried = [*carried, *stmt.leading_lines]
                    first_removed = first_removed or stmt
                    continue
                if len(kept) < len(stmt.body):
                    kept[-1] = kept[-1].with_changes(semicolon=cst.MaybeSentinel.DEFAULT)
                    stmt = stmt.with_changes(body=kept)
                stmts_to_add = [stmt]
            else:
                stmts_to_add = [stmt]
            if carried or replace:
                first = stmts_to_add[0]
                lines = list(carried) if replace else [*carried, *first.leading_lines]
                stmts_to_add[0] = first.with_changes(leading_lines=lines)
                if first_removed is not None:
                    self.took_place_of[id(stmts_to_add[0])] = first_removed
                carried, replace, first_removed = (), False, None
            out.extend(stmts_to_add)
        return self._unbind(out, scope) if unbind else out

    def _unbind(self, stmts: list[cst.BaseStatement], scope: str) -> list[cst.BaseStatement]:
        """``NAME = EXPR`` (then ``return NAME``), NAME bound by dftpass to a value its region
        measures or waits for (the region already unwrapped): back to ``return EXPR``, or to
        the expression statement ``EXPR``."""
        out: list[cst.BaseStatement] = []
        for k, stmt in enumerate(stmts):
            name = _bound_name(stmt)
            if name is None or not self._take(("bind", scope, name), bool(_BOUND_NAMES.search(name))):
                out.append(stmt)
                continue
            value = stmt.body[0].value
            if k + 1 < len(stmts) and _returned_name(stmts[k + 1]) == name:
                space = stmt.body[0].targets[0].whitespace_after_equal
                out.append(stmt.with_changes(body=[cst.Return(value=value, whitespace_after_return=space)]))
                stmts[k + 1] = None  # the ``return NAME`` goes with it
            else:
                out.append(stmt.with_changes(body=[cst.Expr(value=value)]))
        return [s for s in out if s is not None]

    def _is_backend(self, arg: cst.Arg) -> bool:
        """``backend=<dftracer's create_backend(...)>`` (``--all``)."""
        return self.strip_all and self.fs is not None and isinstance(arg.value, cst.Call) and \
            arg.keyword.value == "backend" and recognize(self.fs, _code(arg.value.func)) == "create_backend"

    def _is_profiler(self, item: cst.WithItem) -> bool:
        """``torch.profiler.profile(..., on_trace_ready=<dftracer's handler>) as _dft_prof`` (``--all``)."""
        if not self.strip_all or self.fs is None or not isinstance(item.item, cst.Call):
            return False
        return any(arg.keyword is not None and arg.keyword.value == "on_trace_ready"
                   and recognize(self.fs, _code(arg.value)) == "profiling.trace_handler" for arg in item.item.args)

    def _is_guarded_update(self, stmt: cst.BaseStatement) -> bool:
        """``if <dftracer's DFTRACER_ENABLE>:`` holding only dftracer updates (``--all``)."""
        if not self.strip_all or not isinstance(stmt, cst.If) or stmt.orelse is not None or self.fs is None:
            return False
        test = stmt.test
        if isinstance(test, cst.BooleanOperation) and isinstance(test.operator, cst.And):
            test = test.left  # ``if env.DFTRACER_ENABLE and step % k == 0:`` (the tracing budget)
        if recognize(self.fs, _code(test)) != "env.DFTRACER_ENABLE":
            return False
        body = stmt.body.body if isinstance(stmt.body, cst.IndentedBlock) else [stmt.body]
        return all(isinstance(line, (cst.SimpleStatementLine, cst.SimpleStatementSuite))
                   and all(self._is_call_region(s) for s in line.body) for line in body)

    def _is_runtime_statement(self, small: cst.BaseSmallStatement) -> bool:
        """What dftpass writes through its runtime (``--all``): ``_dft_log =
        _dft_runtime.initialize(...)``, ``_dft_runtime.log_parameters(...)``,
        ``_dft_runtime.finalize_child(...)``, ``x.worker_init_fn = _dft_runtime.worker_init(
        x.worker_init_fn)``."""
        if not self.strip_all or self.fs is None:
            return False
        if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
            return runtime_call(self.fs, _code(small.value.func)) in (RUNTIME_LOG_PARAMETERS, RUNTIME_FINALIZE_CHILD)
        if isinstance(small, cst.Assign) and len(small.targets) == 1 and isinstance(small.value, cst.Call):
            name = runtime_call(self.fs, _code(small.value.func))
            target = _code(small.targets[0].target)
            if name == RUNTIME_INITIALIZE:
                return is_emitted_name(target, "log")
            if name == RUNTIME_WORKER_INIT and target.endswith(".worker_init_fn"):
                return [_code(a.value) for a in small.value.args] == [target]
        return False

    def _is_call_region(self, small: cst.BaseSmallStatement) -> bool:
        """``ai.x.start()``, ``ai.x.stop()``, ``ai.update(...)`` and the runtime's statements (``--all``)."""
        if self._is_runtime_statement(small):
            return True
        if not self.strip_all or not isinstance(small, cst.Expr) or not isinstance(small.value, cst.Call):
            return False
        callee = _code(small.value.func)
        node, _, method = callee.rpartition(".")
        if method == "step" and _OWN_PROFILER.match(node):
            return True  # the profiler ML-R28 opened (its ``with`` goes too)
        args = small.value.args
        if method == "append" and node.rpartition(".")[2] == "callbacks" and len(args) == 1 \
                and _OWN_CALLBACK.match(_code(args[0].value)):
            return True  # ``trainer.callbacks.append(_dft_runtime.LightningCallback())`` (ML-R12)
        return (method in ("start", "stop") and self._is_region(node)) or (
            method == "update" and self.fs is not None and recognize(self.fs, callee) is not None
            and not (recognize(self.fs, callee) or "").startswith(("dftracer", "dft_fn"))) or (
            method == "update" and self._is_fn_object(node))  # ``dlp.update(image_size=...)``

    # -- calls: an item added to a keyword argument's list (``callbacks=[..., cb()]``) -------------
    def leave_Call(self, original_node, updated_node):
        args = list(updated_node.args)
        callee = _code(updated_node.func)
        for i, arg in enumerate(args):
            if arg.keyword is not None and self._take(("keyword", self._scope(), callee, arg.keyword.value,
                                                       _code(arg.value)), self._is_backend(arg)):
                kept = args[:i] + args[i + 1:]  # a keyword dftpass gave the call (``backend=``)
                if i == len(args) - 1 and kept:
                    kept[-1] = kept[-1].with_changes(comma=arg.comma)
                return updated_node.with_changes(args=kept)
            if arg.keyword is None or not isinstance(arg.value, cst.List) or not arg.value.elements:
                continue
            elements = list(arg.value.elements)
            item = _code(elements[-1].value)
            key = (self._scope(), callee, arg.keyword.value, item)
            own = self.strip_all and bool(_OWN_CALLBACK.match(item))
            wrapped = len(elements) == 2 and isinstance(elements[0], cst.StarredElement) \
                and isinstance(elements[0].value, cst.BooleanOperation) and isinstance(elements[0].value.operator, cst.Or) \
                and isinstance(elements[0].value.right, cst.List) and not elements[0].value.right.elements
            if len(elements) == 1 and self._take(("argument", *key, True), own):
                kept = args[:i] + args[i + 1:]  # dftpass added the keyword
                if i == len(args) - 1 and kept:
                    kept[-1] = kept[-1].with_changes(comma=arg.comma)
                return updated_node.with_changes(args=kept)
            if not self._take(("argument", *key, False), own):
                continue
            if wrapped:  # ``[*(value or []), cb()]`` -> ``value``
                value = elements[0].value.left
                if isinstance(value, (cst.BooleanOperation, cst.IfExp)):
                    value = value.with_changes(lpar=[], rpar=[])
            else:
                rest = elements[:-1]
                if rest:
                    rest[-1] = rest[-1].with_changes(comma=elements[-1].comma)
                value = arg.value.with_changes(elements=rest)
            args[i] = arg.with_changes(value=value)
            return updated_node.with_changes(args=args)
        return updated_node

    # -- the module: statements, then imports ----------------------------------------------------
    def leave_Module(self, original_node, updated_node):
        body = self._block(list(updated_node.body))
        if self.strip_all:
            body = self._unused_loggers(body)
        return updated_node.with_changes(body=self._imports(body, updated_node))

    def _unused_loggers(self, body: list[cst.BaseStatement]) -> list[cst.BaseStatement]:
        """``dlp = dft_fn(...)`` at the top of the module, once no region of it is left and
        no other module imports it (``--all``)."""
        used = _names_used([s for s in body if _bound_name(s) is None or not self._is_fn_object(_bound_name(s))])
        out, carried = [], []
        for stmt in body:
            name = _bound_name(stmt)
            if name and self._is_fn_object(name) and name not in used and name not in self.exported:
                # its comments go to the next statement, its blank lines go with it
                carried += [line for line in stmt.leading_lines if line.comment is not None]
                self.removed += 1
                continue
            if carried:
                stmt = stmt.with_changes(leading_lines=[*carried, *stmt.leading_lines])
                carried = []
            out.append(stmt)
        return out

    def _imports(self, body: list[cst.BaseStatement], module: cst.Module) -> list[cst.BaseStatement]:
        """The imports dftpass added go; the statement after the block it inserted gets back
        the blank lines the block took, less the ones dftpass put after its imports."""
        std = Counter(f"import {m}" + (f" as {a}" if a != m else "") for m, a in self.std)
        api = {alias for _, alias in self.api}
        if self.strip_all:
            api |= {local for local, _ in _api_locals(body)}
        # the names the code uses (not in strings or comments: a docstring that says
        # "dftracer" does not keep dftracer's import), and those other modules import from it
        used = _names_used([s for s in body if not _is_import_line(s)]) | self.exported
        out: list[cst.BaseStatement] = []
        block: list[cst.BaseStatement] = []  # removed statements of dftpass's import block
        for stmt in body:
            small = stmt.body[0] if isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 else None
            if _is_prelude(stmt):
                block.append(stmt)
                continue
            if small is not None and std[_code(small)] > 0:
                std[_code(small)] -= 1
                block.append(stmt)
                continue
            runtime = _RUNTIME_IMPORT.match(_code(small)) if self.strip_all and small is not None else None
            if runtime and runtime.group(1) not in used:
                block.append(stmt)  # the callbacks' module, once no callback is left
                continue
            if self.strip_all and isinstance(small, cst.ImportFrom) and not _is_api_import(small) and \
                    not isinstance(small.names, cst.ImportStar) and self.fs is not None:
                # ``from .utility import Profile``: a dftracer name another module re-exports
                unused = {_alias(n) for n in small.names
                          if _alias(n) not in used and recognize(self.fs, _alias(n)) is not None}
                if unused:
                    names = [n for n in small.names if _alias(n) not in unused]
                    if not names:
                        block.append(stmt)
                        continue
                    last = names[-1]
                    if isinstance(last.comma, cst.Comma) and _code(last.comma) == "," and not small.lpar:
                        names[-1] = last.with_changes(comma=cst.MaybeSentinel.DEFAULT)
                    stmt = stmt.with_changes(body=[small.with_changes(names=names)])
                    small = stmt.body[0]
            if isinstance(small, cst.ImportFrom) and _is_api_import(small):
                # a name dftpass imported goes once nothing uses it (a region the user wrote
                # after annotation keeps it)
                names = [n for n in small.names if not (_alias(n) in api and _alias(n) not in used)]
                if not names:
                    block.append(stmt)
                    continue
                if len(names) < len(small.names):
                    last = names[-1]
                    if isinstance(last.comma, cst.Comma) and _code(last.comma) == "," and not small.lpar:
                        names[-1] = last.with_changes(comma=cst.MaybeSentinel.DEFAULT)
                    stmt = stmt.with_changes(body=[small.with_changes(names=names)])
            if block:
                stmt = _after_import_block(stmt, block[0].leading_lines, self.took_place_of.get(id(stmt), stmt))
                block = []
            out.append(stmt)
        return out


def _is_prelude(stmt: cst.BaseStatement) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1 and _code(stmt.body[0]) in (IMPORT_PRELUDE, LEGACY_IMPORT_PRELUDE)


def _after_import_block(stmt: cst.BaseStatement, taken: Sequence[cst.EmptyLine],
                        followed: cst.BaseStatement) -> cst.BaseStatement:
    """Undo ``rewrite._separate``: the inserted block took the statement's blank lines, and a
    statement that is not an import got one blank line (two before a ``def``/``class``).
    ``followed``: the statement that followed the block when it was inserted, which is not
    ``stmt`` where strip removed it (ML-R19's module logger, whose blank line came to the
    ``def`` below it: transformers' ``gguf_config_mapping.py`` lost one blank line)."""
    lines = list(stmt.leading_lines)
    if not _is_import_line(followed):
        wanted = 2 if isinstance(followed, (cst.FunctionDef, cst.ClassDef)) else 1
        if len(lines) >= wanted and all(line.comment is None for line in lines[:wanted]):
            lines = lines[wanted:]
    return stmt.with_changes(leading_lines=[*taken, *lines])


def _statements(code: str) -> list[str]:
    return [_code(s) for s in cst.parse_module(code if code.endswith("\n") else code + "\n").body]


def _parts(code: str) -> list[str]:
    """The statements of inserted code as strip meets them: each part of a ``;`` line on
    its own (``ai.compute.update(...); ai.device.update(...)``), compound ones whole."""
    out = []
    for stmt in cst.parse_module(code if code.endswith("\n") else code + "\n").body:
        if isinstance(stmt, cst.SimpleStatementLine):
            out.extend(_small_code(s) for s in stmt.body)
        else:
            out.append(_code(stmt))
    return out


def _is_docstring(stmt: cst.BaseStatement) -> bool:
    return (isinstance(stmt, cst.SimpleStatementLine) and len(stmt.body) == 1
            and isinstance(stmt.body[0], cst.Expr)
            and isinstance(stmt.body[0].value, (cst.SimpleString, cst.ConcatenatedString)))


def _is_import_line(stmt: cst.BaseStatement) -> bool:
    return isinstance(stmt, cst.SimpleStatementLine) and isinstance(stmt.body[0], (cst.Import, cst.ImportFrom))


def _is_api_import(node: cst.ImportFrom) -> bool:
    from dftpass.core.emitter import API_MODULES

    return not node.relative and node.module is not None and _code(node.module) in API_MODULES and \
        not isinstance(node.names, cst.ImportStar)


def _alias(name: cst.ImportAlias) -> str:
    return name.asname.name.value if name.asname else _code(name.name)


def _api_locals(body: Sequence[cst.BaseStatement]) -> list[tuple[str, str]]:
    out = []
    for stmt in body:
        if isinstance(stmt, cst.SimpleStatementLine):
            for small in stmt.body:
                if isinstance(small, cst.ImportFrom) and _is_api_import(small):
                    out.extend((_alias(n), _code(n.name)) for n in small.names)
    return out


class _Names(cst.CSTVisitor):
    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_Name(self, node: cst.Name) -> None:
        self.names.add(node.value)

    def visit_Attribute(self, node: cst.Attribute) -> bool:
        node.value.visit(self)  # ``a.b``: ``a`` is a name in use, ``b`` is not
        return False


def _names_used(stmts: Sequence[cst.BaseStatement]) -> set[str]:
    """Every name the statements refer to (not the attributes after a dot)."""
    visitor = _Names()
    for stmt in stmts:
        stmt.visit(visitor)
    return visitor.names



def strip_source(source: bytes, records: Sequence[dict], fs: FileSummary | None = None,
                 strip_all: bool = False, exported: frozenset[str] = frozenset()) -> Stripped:
    """``source`` without what ``records`` say dftpass wrote (``strip_all``: without any
    dftracer region). ``exported``: the names of this module other project files import
    (their imports stay). Never raises for a problem in the file."""
    try:
        module = cst.parse_module(source)
        transformer = _Strip(records, fs, strip_all, exported)
        new = keep_original_bytes(source, module.visit(transformer).bytes)
        compile(new, "<strip>", "exec", dont_inherit=True)
    except Exception as exc:  # noqa: BLE001 - the user's file must survive
        return Stripped(None, error=f"cannot strip the file ({type(exc).__name__}: {exc}); left untouched")
    if new == source:
        return Stripped(source, 0)
    return Stripped(new, transformer.removed, transformer.kept)
