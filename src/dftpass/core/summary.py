"""Per-file summaries: what the passes know about a file, extracted with the stdlib parser.

Parsing every file with libcst and resolving metadata costs ~10-100x ``ast.parse``
(docs/performance.md), so analysis never touches libcst. One walk over the ``ast`` of a file
produces a :class:`FileSummary`: its imports, classes, functions, and inside each function
the calls, loops, ``with`` items and simple assignments, each with the *statement path*
that locates it. The summary is plain data: it pickles cheaply from worker processes
(``--jobs``) and the AST is dropped as soon as the summary exists.

A statement path is a tuple of steps ``(field, index)`` from the module down to a
statement, in ``ast`` terms: ``(("body", 3), ("body", 0))`` is the first statement in the
body of the module's fourth statement. Fields are ``body``, ``orelse``, ``finalbody``,
``handlers.K`` (body of the K-th except clause) and ``cases.K`` (body of a match case).
:mod:`dftpass.core.edits` resolves the same paths in the libcst tree of the few files
that are rewritten.
"""

from __future__ import annotations

import ast
import builtins
import io
import sys
import tokenize
from typing import Iterator, NamedTuple

import attrs

Step = tuple[str, int]
StmtPath = tuple[Step, ...]

_STEPS: dict[tuple[str, int], Step] = {}


def step(field: str, index: int) -> Step:
    """The one ``(field, index)`` tuple of its kind: a large project's summaries hold a
    million steps, nearly all of them the same few hundred."""
    key = (field, index)
    return _STEPS.setdefault(key, key)

MODULE_SCOPE = "<module>"

#: builtins whose calls say nothing any pass asks about; a fifth of all calls in a large
#: codebase, left out of summaries (unless the file binds the name itself) to keep them small.
#: ``open``, ``print``, ``next`` and ``iter`` are kept: they are I/O and iteration.
_BORING_BUILTINS = frozenset(
    name for name in dir(builtins)
    if name not in ("open", "print", "next", "iter", "input", "exec", "eval", "compile", "__import__")
    and not name.startswith("_")
)


class CallSite(NamedTuple):
    """One call expression. ``callee`` is its dotted text (``torch.save``, ``self.model``,
    ``scaler.scale().backward``); ``?`` stands for a part that is not a name.

    A named tuple, not a class: a large project has tens of thousands of calls, and
    tuples cross from worker processes (pickle) several times faster than objects."""

    callee: str
    line: int
    col: int
    stmt: StmtPath
    #: "expr": the call is the whole expression statement; "assign": ``x = call(...)``;
    #: "return": ``return call(...)``; "with": a ``with`` item; "other": anything else
    stmt_kind: str
    args: tuple[str | None, ...]
    keywords: tuple[tuple[str, str | None], ...]
    #: indexes (into the function's loops) of the loops enclosing the call, outermost first
    loops: tuple[int, ...]
    #: dotted texts of the ``with`` items enclosing the call inside this function
    withs: tuple[str, ...]
    #: names bound by ``x = call(...)`` / ``x, y = call(...)``
    assigned_to: tuple[str, ...] = ()
    #: whether the call sits in an ``if __name__ == "__main__":`` block
    in_main_guard: bool = False
    #: whether the call sits in a comprehension (it runs once per element)
    in_comprehension: bool = False
    #: the positions of the arguments, and the names of the keywords, given a literal
    #: ``None`` (their text is None, as a compound expression's is)
    nones: tuple[int | str, ...] = ()

    @property
    def method(self) -> str:
        return self.callee.rsplit(".", 1)[-1]

    @property
    def receiver(self) -> str:
        return self.callee.rsplit(".", 1)[0] if "." in self.callee else ""


class IterLayer(NamedTuple):
    """One call in the chain a ``for`` loop iterates: ``enumerate(tqdm(loader))`` is the
    layers ``enumerate`` and ``tqdm`` over the core ``loader``."""

    callee: str
    args: tuple[str | None, ...]


class NextCall(NamedTuple):
    """``x = next(it)`` somewhere in a loop's body (not in a nested loop or function)."""

    stmt: StmtPath
    #: dotted text of ``it``
    iterator: str | None
    #: the statement a fetch region must cover: the ``next`` statement itself, or the
    #: ``try`` around it whose ``except StopIteration:`` restarts the iterator
    region: StmtPath


@attrs.define(slots=True)
class LoopSummary:
    index: int
    kind: str  # "for" | "async for" | "while"
    stmt: StmtPath
    line: int
    col: int
    parent: int | None
    target_names: tuple[str, ...] = ()
    #: the first element of a tuple target, when it is a plain name (``for i, x in ...``)
    first_target: str | None = None
    #: the target when it is a single plain name (``for batch in ...``)
    single_target: str | None = None
    iter_text: str = ""
    #: calls from the outside in, following the first positional argument
    layers: tuple[IterLayer, ...] = ()
    #: dotted text of what is left after unwrapping the layers (None if not a name chain)
    core: str | None = None
    has_break: bool = False
    body_first: StmtPath = ()
    #: dotted callees of the statements that are direct children of the loop body
    body_calls: tuple[str, ...] = ()
    #: ``x = next(it)`` statements in the body (nested blocks included, nested loops not)
    next_calls: tuple[NextCall, ...] = ()
    #: names and ``self`` attributes the body counts up by one (``step += 1``): the loop's
    #: own iteration counter when it has no loop variable
    counters: tuple[str, ...] = ()
    #: ``while`` loops: the names the condition reads (``epoch < max_epochs``), and
    #: whether it is a constant truth (``while True:``)
    test_names: tuple[str, ...] = ()
    forever: bool = False
    #: the innermost iterable (below the call layers) is a literal: ``['train', 'val']``
    literal_iter: bool = False
    #: the target is a tuple written in parentheses: ``for (x, y) in ...``
    target_parens: bool = False


class Assign(NamedTuple):
    """``name = <value>`` inside a function (or at module level)."""

    target: str  # a name, or a dotted ``self.attr``
    #: dotted text of the value (calls end in "()"); a literal container or function is
    #: ``<list>``, ``<tuple>``, ``<dict>``, ``<set>``, ``<lambda>``, ``<str>``, ``<number>``, ``<none>``
    value: str | None
    line: int
    stmt: StmtPath
    call_args: tuple[str | None, ...] = ()
    call_keywords: tuple[tuple[str, str | None], ...] = ()


@attrs.define(slots=True)
class FunctionSummary:
    qualname: str  # "Trainer.fit", "main", "outer.<locals>.inner", "<module>"
    name: str
    cls: str | None
    stmt: StmtPath
    line: int
    col: int
    end_line: int
    is_async: bool = False
    is_generator: bool = False
    decorators: tuple[str, ...] = ()
    params: tuple[str, ...] = ()
    #: parameters that can be passed positionally, in order (``self`` included)
    positional: tuple[str, ...] = ()
    #: parameter name -> dotted text of its default value
    defaults: dict[str, str | None] = attrs.field(factory=dict)
    has_docstring: bool = False
    #: statements in the body, nested blocks included, nested functions excluded
    n_stmts: int = 0
    body_first: StmtPath = ()
    calls: list[CallSite] = attrs.field(factory=list)
    loops: list[LoopSummary] = attrs.field(factory=list)
    assigns: list[Assign] = attrs.field(factory=list)
    #: dotted texts of returned values
    returns: tuple[str | None, ...] = ()
    #: the elements of each ``return a, b`` (dotted texts): what ``x, y = f()`` binds
    return_tuples: tuple[tuple[str | None, ...], ...] = ()
    #: dotted texts of every ``with`` item in the body
    withs: tuple[str, ...] = ()
    #: names the function declares ``global``: its assignments of them set module globals
    globals: tuple[str, ...] = ()
    #: what the function yields: (dotted text of the value, a tuple's elements joined by ", ";
    #: indexes of the enclosing loops,
    #: whether it is ``yield from``)
    yields: tuple[tuple[str | None, tuple[int, ...], bool], ...] = ()
    #: the statement that holds each yield, in the order of ``yields``
    yield_stmts: tuple[StmtPath, ...] = ()
    #: each ``if`` statement: its path, the dotted text of its test (of the first operand of
    #: a comparison or an ``and``), and how many statements it holds, itself included (the
    #: cost model leaves out dftpass's own ``if <tracing is on>:`` blocks)
    if_tests: tuple[tuple[StmtPath, str | None, int], ...] = ()
    #: the ``return``, ``break``, ``continue`` and ``raise`` statements: where control leaves a
    #: block early (a ``start()``/``stop()`` pair around them would miss its ``stop()``)
    exits: tuple[StmtPath, ...] = ()
    #: the ``try`` statements whose body raises by design: one that catches ``StopIteration``
    #: (a ``next()`` that restarts its iterator) or one inside a loop (a batch skipped on an
    #: error); an exception is then control flow, and it would skip a ``stop()`` as ``return`` does
    caught: tuple[StmtPath, ...] = ()

    @property
    def is_module(self) -> bool:
        return self.qualname == MODULE_SCOPE


@attrs.define(slots=True)
class ClassSummary:
    qualname: str
    name: str
    stmt: StmtPath
    line: int
    bases: tuple[str, ...]
    decorators: tuple[str, ...] = ()
    methods: dict[str, str] = attrs.field(factory=dict)  # method name -> function qualname
    #: ``self.attr = value`` anywhere in the class's methods but ``__del__``: attr -> dotted values
    attr_values: dict[str, tuple[str | None, ...]] = attrs.field(factory=dict)


@attrs.define(slots=True)
class GuardSummary:
    """An ``if __name__ == "__main__":`` block at module level."""

    stmt: StmtPath
    line: int
    body_first: StmtPath
    body_len: int


@attrs.define(slots=True)
class FileSummary:
    relpath: str
    module: str
    #: local name -> fully qualified name of what it refers to ("torch.utils.data.DataLoader")
    imports: dict[str, str]
    functions: list[FunctionSummary]
    classes: list[ClassSummary]
    main_guards: list[GuardSummary]
    #: every name bound anywhere in the file (to choose import aliases that do not collide);
    #: a sorted tuple, not a set: asked about only for the few files that are edited
    bound_names: tuple[str, ...]
    #: local names bound by imports at module level (not inside functions)
    top_imports: frozenset[str]
    #: modules imported anywhere, fully qualified ("torch.distributed")
    imported_modules: frozenset[str]
    lines: int
    #: the first statements: index of the first statement after the docstring and
    #: ``from __future__`` imports (where dftpass puts its imports)
    import_anchor: int = 0
    #: every distinct dotted text the file calls, passes or assigns (``torch.version.hip``):
    #: whole-file questions ("does it use X?") iterate these instead of every call
    mentions: tuple[str, ...] = ()
    #: files the module runs with ``exec(open("configurator.py").read())``: part of it
    exec_includes: tuple[str, ...] = ()
    #: modules imported with ``from X import *`` at module level (the call graph binds their
    #: public names in this file)
    star_imports: tuple[str, ...] = ()
    #: index of the first top-level statement after the script's set-up (docstring,
    #: imports, ``sys.path`` and environment set-up): where a module-level script starts
    script_anchor: int = 0
    #: the line of that statement
    script_line: int = 1
    #: the module's top level does work (calls, loops), beyond defining things
    top_level_work: bool = False
    #: dftracer names the file gets from other project modules (``from pkg.util import
    #: dft_ai`` where pkg.util imports ``ai as dft_ai``): local -> symbol; the call graph
    #: fills it, :func:`dftpass.core.emitter.aliases` reads it
    reexported_api: dict[str, str] = attrs.field(factory=dict)

    def function(self, qualname: str) -> FunctionSummary | None:
        for fn in self.functions:
            if fn.qualname == qualname:
                return fn
        return None

    def function_at(self, path: StmtPath) -> FunctionSummary | None:
        """The innermost function (or the module scope) whose body holds statement ``path``."""
        best: FunctionSummary | None = None
        for fn in self.functions:
            inside = fn.is_module or (len(path) > len(fn.stmt) and path[:len(fn.stmt)] == fn.stmt)
            if inside and (best is None or best.is_module or len(fn.stmt) > len(best.stmt)):
                best = fn
        return best

    def cls(self, qualname: str) -> ClassSummary | None:
        for c in self.classes:
            if c.qualname == qualname:
                return c
        return None

    @property
    def module_scope(self) -> FunctionSummary:
        return self.functions[0]


# --------------------------------------------------------------------------------------
# dotted texts
# --------------------------------------------------------------------------------------


def _yielded(node: ast.AST | None) -> str | None:
    """The text of a yielded value: ``dotted`` of it, or its elements joined by ``", "`` for a
    tuple (``yield x, y``: a batch of two tensors)."""
    if isinstance(node, ast.Tuple) and node.elts:
        parts = [dotted(e) for e in node.elts]
        return sys.intern(", ".join(p or "?" for p in parts)) if any(parts) else None
    return dotted(node)


def _start_stop(stmt: ast.stmt, method: str) -> str | None:
    """``X`` of an expression statement ``X.start()`` / ``X.stop()`` (no arguments)."""
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call) and not stmt.value.args \
            and not stmt.value.keywords and isinstance(stmt.value.func, ast.Attribute) \
            and stmt.value.func.attr == method:
        return dotted(stmt.value.func.value)
    return None


def _start_stop_pairs(stmts: list[ast.stmt]) -> set[int]:
    """The indexes of the ``X.start()`` statements of a block that a later ``X.stop()`` of the
    same block closes."""
    out: set[int] = set()
    for i, stmt in enumerate(stmts):
        receiver = _start_stop(stmt, "start")
        if receiver is not None and any(_start_stop(later, "stop") == receiver for later in stmts[i + 1:]):
            out.add(i)
    return out


def _first_operand(test: ast.expr) -> ast.expr:
    """``a`` of ``a is not None``, ``a and b``, ``not a``: what an ``if`` tests first."""
    while True:
        if isinstance(test, ast.Compare):
            test = test.left
        elif isinstance(test, ast.BoolOp) and test.values:
            test = test.values[0]
        elif isinstance(test, ast.UnaryOp):
            test = test.operand
        else:
            return test


def dotted(node: ast.AST | None) -> str | None:
    """``a.b.c`` for attribute chains, ``f()`` for calls, ``x[]`` for subscripts."""
    parts: list[str] = []
    while True:
        if isinstance(node, ast.Name):
            parts.append(node.id)
            break
        if isinstance(node, ast.Attribute):
            parts.append(node.attr)
            node = node.value
        elif isinstance(node, ast.Call):
            inner = dotted(node.func)
            parts.append((inner or "?") + "()")
            break
        elif isinstance(node, ast.Subscript):
            inner = dotted(node.value)
            parts.append((inner or "?") + "[]")
            break
        elif isinstance(node, ast.Constant) and isinstance(node.value, (int, float, str)):
            parts.append(repr(node.value))
            break
        else:
            if not parts:
                return None
            parts.append("?")
            break
    # interned: the same texts recur all over a file (``self.x``, ``torch.zeros``), and one
    # object per text is what lets pickle send, and the main process keep, each text once
    return sys.intern(".".join(reversed(parts)))


def _callee(node: ast.Call) -> str:
    return dotted(node.func) or "?"


def _target_names(node: ast.AST) -> tuple[str, ...]:
    names = []
    for sub in ast.walk(node):
        if isinstance(sub, ast.Name):
            names.append(sub.id)
    return tuple(names)


def _is_main_guard(stmt: ast.stmt) -> bool:
    if not isinstance(stmt, ast.If):
        return False
    test = stmt.test
    if not (isinstance(test, ast.Compare) and len(test.ops) == 1 and isinstance(test.ops[0], ast.Eq)):
        return False
    sides = [test.left, test.comparators[0]]
    has_name = any(isinstance(s, ast.Name) and s.id == "__name__" for s in sides)
    has_main = any(isinstance(s, ast.Constant) and s.value == "__main__" for s in sides)
    return has_name and has_main


def _blocks(stmt: ast.stmt) -> Iterator[tuple[str, list[ast.stmt]]]:
    """The statement lists nested in ``stmt``, with the path field that names each."""
    for field in ("body", "orelse", "finalbody"):
        block = getattr(stmt, field, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
            yield field, block
    for k, handler in enumerate(getattr(stmt, "handlers", ()) or ()):
        yield f"handlers.{k}", handler.body
    for k, case in enumerate(getattr(stmt, "cases", ()) or ()):
        yield f"cases.{k}", case.body


def _expr_children(stmt: ast.stmt) -> Iterator[ast.AST]:
    """The expressions of one statement, not those of its nested statements."""
    for child in ast.iter_child_nodes(stmt):
        if isinstance(child, (ast.stmt, ast.excepthandler, ast.match_case)):
            if isinstance(child, ast.excepthandler) and child.type is not None:
                yield child.type
            continue
        yield child


_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)


#: attributes a program reads to ask which GPU runtime it runs on (``torch.version.hip``,
#: cupy's ``runtime.is_hip``): mentions, wherever they are read (an ``if`` test too)
_RUNTIME_ATTRIBUTES = frozenset({"hip", "is_hip"})


def _walk_expr(node: ast.AST) -> Iterator[tuple[ast.AST, bool]]:
    """Every node of an expression, with whether it runs once per element of a
    comprehension (everything in one but the first ``for``'s iterable)."""
    stack = [(node, False)]
    while stack:
        n, repeated = stack.pop()
        yield n, repeated
        if isinstance(n, _COMPREHENSIONS):
            for k, gen in enumerate(n.generators):
                stack.append((gen.iter, repeated or k > 0))
                stack.append((gen.target, True))
                stack.extend((cond, True) for cond in gen.ifs)
            parts = (n.key, n.value) if isinstance(n, ast.DictComp) else (n.elt,)
            stack.extend((part, True) for part in parts)
        else:
            stack.extend((c, repeated) for c in ast.iter_child_nodes(n))


# --------------------------------------------------------------------------------------
# the walk
# --------------------------------------------------------------------------------------


class _Builder:
    def __init__(self, module: str, is_package: bool) -> None:
        self.module = module
        self.is_package = is_package
        self.imports: dict[str, str] = {}
        self.imported_modules: set[str] = set()
        self.functions: list[FunctionSummary] = []
        self.classes: list[ClassSummary] = []
        self.guards: list[GuardSummary] = []
        self.bound: set[str] = set()
        self.top_imports: set[str] = set()
        self.star_imports: list[str] = []
        self.exec_includes: list[str] = []
        self.runtime_mentions: set[str] = set()

    # -- imports -------------------------------------------------------------------
    def _resolve_relative(self, level: int, module: str | None) -> str:
        parts = self.module.split(".")
        base = parts if self.is_package else parts[:-1]
        if level > 1:
            base = base[: len(base) - (level - 1)]
        return ".".join([*base, module] if module else base)

    def _import(self, stmt: ast.Import | ast.ImportFrom, at_module: bool) -> None:
        if isinstance(stmt, ast.Import):
            for alias in stmt.names:
                self.imported_modules.add(alias.name)
                local = alias.asname or alias.name.split(".")[0]
                target = alias.name if alias.asname else alias.name.split(".")[0]
                self.bound.add(local)
                if at_module:
                    self.top_imports.add(local)
                if at_module or local not in self.imports:
                    self.imports[local] = target
            return
        base = stmt.module or ""
        if stmt.level:
            base = self._resolve_relative(stmt.level, stmt.module)
        self.imported_modules.add(base)
        for alias in stmt.names:
            if alias.name == "*":
                if at_module and base:
                    self.star_imports.append(base)
                continue
            local = alias.asname or alias.name
            self.bound.add(local)
            if at_module:
                self.top_imports.add(local)
            self.imported_modules.add(f"{base}.{alias.name}")
            if at_module or local not in self.imports:
                self.imports[local] = f"{base}.{alias.name}" if base else alias.name

    # -- functions -------------------------------------------------------------------
    def function(self, node: ast.FunctionDef | ast.AsyncFunctionDef | None, qualname: str,
                 cls: str | None, path: StmtPath, body: list[ast.stmt]) -> FunctionSummary:
        if node is None:
            fn = FunctionSummary(qualname, qualname, None, (), 1, 0, 0)
        else:
            args = node.args
            positional = tuple(a.arg for a in [*args.posonlyargs, *args.args])
            params = positional + tuple(a.arg for a in args.kwonlyargs)
            if args.vararg:
                params += (args.vararg.arg,)
            if args.kwarg:
                params += (args.kwarg.arg,)
            self.bound.update(params)
            defaults: dict[str, str | None] = {}
            for a, d in zip(reversed(positional), reversed(args.defaults)):
                defaults[a] = dotted(d)
            for a, d in zip(args.kwonlyargs, args.kw_defaults):
                if d is not None:
                    defaults[a.arg] = dotted(d)
            fn = FunctionSummary(
                qualname=qualname,
                name=node.name,
                cls=cls,
                stmt=path,
                line=node.lineno,
                col=node.col_offset,
                end_line=getattr(node, "end_lineno", node.lineno) or node.lineno,
                is_async=isinstance(node, ast.AsyncFunctionDef),
                decorators=tuple(dotted(d) or "?" for d in node.decorator_list),
                params=params,
                positional=positional,
                defaults=defaults,
            )
        self.functions.append(fn)
        first = 0
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            fn.has_docstring = node is not None
            first = 1 if node is not None else 0
        fn.body_first = path + (step("body", first),)
        walker = _FunctionWalker(self, fn)
        walker.block(body, path, "body", loops=(), withs=(), guard=False)
        fn.returns = tuple(walker.returns)
        fn.return_tuples = tuple(walker.return_tuples)
        fn.withs = tuple(walker.all_withs)
        fn.yields = tuple(walker.yields)
        fn.yield_stmts = tuple(walker.yield_stmts)
        fn.if_tests = tuple(walker.if_tests)
        fn.exits = tuple(walker.exits)
        fn.caught = tuple(walker.caught)
        return fn

    def class_(self, node: ast.ClassDef, qualname: str, path: StmtPath) -> None:
        cs = ClassSummary(
            qualname=qualname,
            name=node.name,
            stmt=path,
            line=node.lineno,
            bases=tuple(dotted(b) or "?" for b in node.bases),
            decorators=tuple(dotted(d) or "?" for d in node.decorator_list),
        )
        self.classes.append(cs)
        self.bound.add(node.name)
        for i, stmt in enumerate(node.body):
            sub = path + (step("body", i),)
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                q = f"{qualname}.{stmt.name}"
                cs.methods[stmt.name] = q
                self.bound.add(stmt.name)
                fn = self.function(stmt, q, qualname, sub, stmt.body)
                # a destructor's ``self.x = None`` is teardown, not a value the object has
                # while it is used (DLIO's readers clear their step and index there)
                for a in (fn.assigns if stmt.name != "__del__" else ()):
                    if a.target.startswith("self."):
                        attr = a.target[5:]
                        cs.attr_values[attr] = cs.attr_values.get(attr, ()) + (a.value,)
            elif isinstance(stmt, ast.ClassDef):
                self.class_(stmt, f"{qualname}.{stmt.name}", sub)


class _FunctionWalker:
    """Walks the statements of one function (or of the module's top level)."""

    def __init__(self, builder: _Builder, fn: FunctionSummary) -> None:
        self.b = builder
        self.fn = fn
        self.returns: list[str | None] = []
        self.return_tuples: list[tuple[str | None, ...]] = []
        self.all_withs: list[str] = []
        self.yields: list[tuple[str | None, tuple[int, ...], bool]] = []
        self.yield_stmts: list[StmtPath] = []
        self.if_tests: list[tuple[StmtPath, str | None, int]] = []
        self.exits: list[StmtPath] = []
        self.caught: list[StmtPath] = []

    def block(self, stmts: list[ast.stmt], owner: StmtPath, field: str,
              loops: tuple[int, ...], withs: tuple[str, ...], guard: bool) -> None:
        # ``X.start()`` ... ``X.stop()`` in one block is a region as a ``with X:`` is: the
        # statements between them are inside X (their calls' ``withs`` name it)
        opened: list[str] = []
        pairs = _start_stop_pairs(stmts)
        for i, stmt in enumerate(stmts):
            receiver = _start_stop(stmt, "stop")
            if receiver is not None and receiver in opened:
                opened.remove(receiver)
            self.statement(stmt, owner + (step(field, i),), loops, withs + tuple(opened), guard)
            receiver = _start_stop(stmt, "start")
            if receiver is not None and i in pairs:
                opened.append(receiver)
                self.all_withs.append(receiver)
            if isinstance(stmt, (ast.Return, ast.Break, ast.Continue, ast.Raise)):
                self.exits.append(owner + (step(field, i),))

    def statement(self, stmt: ast.stmt, path: StmtPath, loops: tuple[int, ...],
                  withs: tuple[str, ...], guard: bool) -> None:
        fn = self.fn
        fn.n_stmts += 1
        at_module = fn.is_module
        if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
            self.b.bound.add(stmt.name)
            for d in stmt.decorator_list:  # decorators run in the enclosing scope
                self._expressions([d], stmt, path, loops, withs, guard)
            prefix = "" if fn.is_module else f"{fn.qualname}.<locals>."
            self.b.function(stmt, prefix + stmt.name, None, path, stmt.body)
            return
        if isinstance(stmt, ast.ClassDef):
            prefix = "" if fn.is_module else f"{fn.qualname}.<locals>."
            self.b.class_(stmt, prefix + stmt.name, path)
            return
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            self.b._import(stmt, at_module)
            return
        if isinstance(stmt, (ast.Global, ast.Nonlocal)):
            self.b.bound.update(stmt.names)
            if isinstance(stmt, ast.Global):
                fn.globals = tuple(dict.fromkeys((*fn.globals, *stmt.names)))
            return

        is_guard = at_module and len(path) == 1 and _is_main_guard(stmt)
        if is_guard:
            self.b.guards.append(GuardSummary(path, stmt.lineno, path + (step("body", 0),), len(stmt.body)))

        loop_index = None
        if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
            loop_index = self._loop(stmt, path, loops)

        # the statement's own expressions
        inner_withs = withs
        if isinstance(stmt, (ast.With, ast.AsyncWith)):
            items = tuple(dotted(item.context_expr) or "?" for item in stmt.items)
            self.all_withs.extend(items)
            inner_withs = withs + items
            for item in stmt.items:
                if item.optional_vars is not None:
                    self.b.bound.update(_target_names(item.optional_vars))
        self._expressions(_expr_children(stmt), stmt, path, loops, withs, guard)
        if isinstance(stmt, ast.Return):
            self.returns.append(dotted(stmt.value))
            if isinstance(stmt.value, ast.Tuple) and not any(isinstance(e, ast.Starred) for e in stmt.value.elts):
                self.return_tuples.append(tuple(dotted(e) for e in stmt.value.elts))
        if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
            self._assign(stmt, path)
        if isinstance(stmt, ast.Try) and stmt.handlers and (loops or _catches_stop_iteration(stmt)):
            self.caught.append(path)

        inner_loops = loops + (loop_index,) if loop_index is not None else loops
        before = fn.n_stmts
        for field, block in _blocks(stmt):
            in_loop_body = loop_index is not None and field == "body"
            self.block(block, path, field, inner_loops if in_loop_body else loops,
                       inner_withs, guard or is_guard)
        if isinstance(stmt, ast.If):
            self.if_tests.append((path, dotted(_first_operand(stmt.test)), fn.n_stmts - before + 1))

    def _expressions(self, exprs, stmt: ast.stmt, path: StmtPath, loops, withs, guard) -> None:
        fn = self.fn
        whole = getattr(stmt, "value", None)
        for expr in exprs:
            for node, repeated in _walk_expr(expr):
                if isinstance(node, ast.Call):
                    if isinstance(node.func, ast.Name) and node.func.id in _BORING_BUILTINS \
                            and node.func.id not in self.b.bound:
                        continue
                    if isinstance(stmt, ast.Expr) and node is whole:
                        kind = "expr"
                    elif isinstance(stmt, (ast.Assign, ast.AnnAssign)) and node is whole:
                        kind = "assign"
                    elif isinstance(stmt, ast.Return) and node is whole:
                        kind = "return"
                    elif isinstance(stmt, (ast.With, ast.AsyncWith)) and any(
                            node is item.context_expr for item in stmt.items):
                        kind = "with"
                    else:
                        kind = "other"
                    assigned: tuple[str, ...] = ()
                    if kind == "assign":
                        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
                        assigned = tuple(n for t in targets for n in _target_names(t))
                    fn.calls.append(CallSite(
                        callee=_callee(node),
                        line=node.lineno,
                        col=node.col_offset,
                        stmt=path,
                        stmt_kind=kind,
                        args=tuple(dotted(a) for a in node.args),
                        keywords=tuple((k.arg, dotted(k.value)) for k in node.keywords if k.arg),
                        loops=loops,
                        withs=withs,
                        assigned_to=assigned,
                        in_main_guard=guard,
                        in_comprehension=repeated,
                        nones=_none_arguments(node),
                    ))
                    included = _exec_include(node)
                    if included:
                        self.b.exec_includes.append(included)
                elif isinstance(node, (ast.Yield, ast.YieldFrom)):
                    fn.is_generator = True
                    self.yields.append((_yielded(node.value), loops, isinstance(node, ast.YieldFrom)))
                    self.yield_stmts.append(path)
                elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                    self.b.bound.add(node.id)
                elif isinstance(node, ast.arg):
                    self.b.bound.add(node.arg)
                elif isinstance(node, ast.Attribute) and node.attr in _RUNTIME_ATTRIBUTES:
                    self.b.runtime_mentions.add(dotted(node) or node.attr)

    def _assign(self, stmt: ast.Assign | ast.AnnAssign, path: StmtPath) -> None:
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        value = stmt.value
        if value is None:
            return
        for t in targets:
            if isinstance(t, (ast.Name, ast.Attribute)):
                name = dotted(t)
                if not name:
                    continue
                # ``r = A() if c else B()``, ``t = transform or default()``: one value each
                for alternative in _alternatives(value):
                    text = dotted(alternative) or _literal_kind(alternative)
                    call = alternative if isinstance(alternative, ast.Call) else None
                    call_args = tuple(dotted(a) for a in call.args) if call else ()
                    call_keywords = tuple((k.arg, dotted(k.value)) for k in call.keywords if k.arg) if call else ()
                    self.fn.assigns.append(Assign(name, text, stmt.lineno, path, call_args, call_keywords))
            elif isinstance(t, (ast.Tuple, ast.List)) and isinstance(value, (ast.Tuple, ast.List)) \
                    and len(t.elts) == len(value.elts):
                # ``model, config = self.model, self.config``: each name gets its own value
                for sub_target, sub_value in zip(t.elts, value.elts):
                    name = dotted(sub_target) if isinstance(sub_target, (ast.Name, ast.Attribute)) else None
                    if name:
                        self.fn.assigns.append(Assign(name, dotted(sub_value) or _literal_kind(sub_value),
                                                      stmt.lineno, path))

    def _loop(self, stmt: ast.For | ast.AsyncFor | ast.While, path: StmtPath,
              loops: tuple[int, ...]) -> int:
        fn = self.fn
        index = len(fn.loops)
        kind = "while" if isinstance(stmt, ast.While) else ("async for" if isinstance(stmt, ast.AsyncFor) else "for")
        loop = LoopSummary(index=index, kind=kind, stmt=path, line=stmt.lineno, col=stmt.col_offset,
                           parent=loops[-1] if loops else None, body_first=path + (step("body", 0),))
        fn.loops.append(loop)
        loop.has_break = _has_break(stmt.body)
        loop.body_calls = tuple(
            _callee(s.value) for s in stmt.body if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call)
        )
        loop.next_calls, loop.counters = _body_facts(stmt.body, path)
        if isinstance(stmt, ast.While):
            # names and attributes (``while k < args.nepochs``: ``nepochs`` names the epochs)
            loop.test_names = tuple(dict.fromkeys(
                n.id if isinstance(n, ast.Name) else dotted(n) for n in ast.walk(stmt.test)
                if isinstance(n, ast.Name) or isinstance(n, ast.Attribute) and dotted(n)))
            loop.forever = isinstance(stmt.test, ast.Constant) and bool(stmt.test.value)
            return index
        target = stmt.target
        loop.target_names = _target_names(target)
        if isinstance(target, ast.Name):
            loop.single_target = target.id
        elif isinstance(target, ast.Tuple) and target.elts and isinstance(target.elts[0], ast.Name):
            loop.first_target = target.elts[0].id
        if isinstance(target, ast.Tuple) and target.elts:
            first = target.elts[0]
            loop.target_parens = (target.lineno, target.col_offset) != (first.lineno, first.col_offset)
        self.b.bound.update(loop.target_names)
        node = stmt.iter
        loop.iter_text = _short_unparse(node)
        layers = []
        while isinstance(node, ast.Call) and node.args and not isinstance(node.args[0], ast.Starred):
            layers.append(IterLayer(_callee(node), tuple(dotted(a) for a in node.args)))
            node = node.args[0]
        loop.layers = tuple(layers)
        loop.core = dotted(node)
        loop.literal_iter = isinstance(node, (ast.List, ast.Tuple, ast.Set, ast.Dict, ast.JoinedStr)) or (
            isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes)))
        return index


def _short_unparse(node: ast.AST, limit: int = 120) -> str:
    try:
        text = ast.unparse(node)
    except Exception:  # pragma: no cover - unparse handles every parsed tree
        return "?"
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _alternatives(value: ast.expr) -> list[ast.expr]:
    """The values an expression may be: both arms of ``a if c else b``, each operand of
    ``a or b`` (nested ones too); the expression itself otherwise."""
    if isinstance(value, ast.IfExp):
        return [*_alternatives(value.body), *_alternatives(value.orelse)]
    if isinstance(value, ast.BoolOp) and isinstance(value.op, ast.Or):
        return [x for operand in value.values for x in _alternatives(operand)]
    return [value]


def _has_break(body: list[ast.stmt]) -> bool:
    """A ``break`` that leaves this loop (not one of a nested loop or function)."""
    stack = list(body)
    while stack:
        s = stack.pop()
        if isinstance(s, ast.Break):
            return True
        if isinstance(s, (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stack.extend(s.orelse if isinstance(s, (ast.For, ast.AsyncFor, ast.While)) else [])
            continue
        for _, block in _blocks(s):
            stack.extend(block)
    return False


def _none_arguments(node: ast.Call) -> tuple[int | str, ...]:
    """Where a call passes a literal ``None``: argument positions and keyword names."""
    if not any(_is_none(a) for a in (*node.args, *(k.value for k in node.keywords))):
        return ()  # the common case: no tuple built
    return (*(i for i, a in enumerate(node.args) if _is_none(a)),
            *(k.arg for k in node.keywords if k.arg and _is_none(k.value)))


def _is_none(node: ast.AST) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _literal_kind(node: ast.AST | None) -> str | None:
    """``<list>``, ``<dict>``... for a literal container, ``<lambda>``, ``<str>``, ``<number>``,
    ``<none>``."""
    kinds = {ast.List: "<list>", ast.ListComp: "<list>", ast.Tuple: "<tuple>", ast.Dict: "<dict>",
             ast.DictComp: "<dict>", ast.Set: "<set>", ast.SetComp: "<set>", ast.Lambda: "<lambda>",
             ast.GeneratorExp: "<generator>", ast.JoinedStr: "<str>"}
    for cls, kind in kinds.items():
        if isinstance(node, cls):
            return kind
    if isinstance(node, ast.Constant):
        if node.value is None:
            return "<none>"  # not a number: ``dft_fn.log`` raises on a ``step`` that is None
        return "<str>" if isinstance(node.value, (str, bytes)) else "<number>"
    return None


def _catches_stop_iteration(stmt: ast.Try) -> bool:
    for handler in stmt.handlers:
        types = handler.type.elts if isinstance(handler.type, ast.Tuple) else [handler.type]
        if any(dotted(t) in ("StopIteration", "builtins.StopIteration") for t in types if t is not None):
            return True
    return False


def _counter_expression(target: ast.AST) -> str | None:
    """A ``+= 1`` target as an expression that can be read back (``step``, ``self.step``,
    ``state["batches"]``); None for one that cannot (``counts[i]``, ``f().n``): the step
    update is written from it, and :func:`dotted`'s ``state[]`` is a name, not code."""
    node = target
    while isinstance(node, (ast.Attribute, ast.Subscript)):
        if isinstance(node, ast.Subscript) and not isinstance(node.slice, ast.Constant):
            return None
        node = node.value
    return ast.unparse(target) if isinstance(node, ast.Name) else None


def _body_facts(body: list[ast.stmt], path: StmtPath) -> tuple[tuple[NextCall, ...], tuple[str, ...]]:
    """The ``x = next(it)`` statements and the ``+= 1`` counters of a loop body (nested
    blocks included; nested loops and functions are theirs). Counters that count every
    iteration come first: DLIO's loop counts ``block += 1`` under an ``if`` before its
    ``overall_step += 1``, and the step is the one counted each time."""
    nexts: list[NextCall] = []
    counters: list[tuple[bool, str]] = []  # (under a condition, expression)

    def walk(stmts: list[ast.stmt], owner: StmtPath, field: str, region: StmtPath | None,
             conditional: bool = False) -> None:
        for i, s in enumerate(stmts):
            here = owner + (step(field, i),)
            if isinstance(s, (ast.For, ast.AsyncFor, ast.While, ast.FunctionDef, ast.AsyncFunctionDef,
                              ast.ClassDef)):
                continue
            value = getattr(s, "value", None)
            if isinstance(s, (ast.Assign, ast.AnnAssign)) and isinstance(value, ast.Call) \
                    and dotted(value.func) == "next" and value.args:
                nexts.append(NextCall(here, dotted(value.args[0]), region or here))
            elif isinstance(s, ast.AugAssign) and isinstance(s.op, ast.Add) \
                    and isinstance(s.value, ast.Constant) and s.value.value == 1:
                target = _counter_expression(s.target)
                if target:
                    counters.append((conditional, target))
            inner = here if isinstance(s, ast.Try) and _catches_stop_iteration(s) and region is None else region
            branches = conditional or isinstance(s, (ast.If, ast.Try, ast.Match))
            for sub_field, block in _blocks(s):
                walk(block, here, sub_field, inner, branches)

    walk(body, path, "body", None)
    ordered = [c for cond, c in counters if not cond] + [c for cond, c in counters if cond]
    return tuple(nexts), tuple(dict.fromkeys(ordered))


def _exec_include(node: ast.Call) -> str | None:
    """The file of ``exec(open("file.py").read())``, if that is what the call is."""
    if not (isinstance(node.func, ast.Name) and node.func.id == "exec" and node.args):
        return None
    read = node.args[0]
    if isinstance(read, ast.Call) and isinstance(read.func, ast.Attribute) and read.func.attr == "read":
        opened = read.func.value
        if isinstance(opened, ast.Call) and dotted(opened.func) == "open" and opened.args \
                and isinstance(opened.args[0], ast.Constant) and isinstance(opened.args[0].value, str):
            return opened.args[0].value
    return None


def _sets_environment(stmt: ast.stmt) -> bool:
    """``os.environ[...] = ...``, ``os.environ.update/setdefault(...)``, ``os.putenv(...)``,
    run by the statement itself: a ``def`` or ``class`` whose body sets the environment
    sets nothing when it is defined (a storage class that exports S3 credentials in a
    method is not set-up before the imports)."""
    for node in _walk_running(stmt):
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) and \
                (dotted(node.value) or "").endswith("environ"):
            return True
        if isinstance(node, ast.Call):
            callee = dotted(node.func) or ""
            if callee.endswith(("environ.update", "environ.setdefault", "putenv")):
                return True
    return False


def _walk_running(stmt: ast.stmt) -> Iterator[ast.AST]:
    """The nodes of ``stmt`` that run when it runs: not the bodies of the functions, classes
    and lambdas it defines."""
    stack: list[ast.AST] = [stmt]
    while stack:
        node = stack.pop()
        yield node
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
            continue
        stack.extend(ast.iter_child_nodes(node))


def _import_anchor(tree: ast.Module) -> int:
    """Where dftpass's imports go: after the docstring and ``from __future__`` imports; and
    after the last environment set-up of the file's leading set-up block (imports,
    ``sys.path``, ``os.environ``), because importing ``dftracer.python`` imports torch, and
    whatever the environment is set for (CUDA_VISIBLE_DEVICES, OMP_NUM_THREADS, XLA_FLAGS)
    must be in place before it. No list of frameworks: set-up the file does before its
    imports is for them, whichever they are."""
    i = 0
    body = tree.body
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
            and isinstance(body[0].value.value, str):
        i = 1
    while i < len(body) and isinstance(body[i], ast.ImportFrom) and body[i].module == "__future__":
        i += 1
    anchor = i
    for k in range(i, len(body)):
        if not _is_setup(body[k]):
            break
        if _sets_environment(body[k]):
            anchor = k + 1
    return anchor


def _is_setup(stmt: ast.stmt) -> bool:
    """A statement of a script's set-up: an import (also in ``try``/``if`` blocks of imports
    only), ``sys.path`` or environment set-up, ``__all__``/``__version__``-style dunders."""
    if isinstance(stmt, (ast.Import, ast.ImportFrom)) or _sets_environment(stmt):
        return True
    if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Call):
        return (dotted(stmt.value.func) or "").startswith(("sys.path.", "warnings.", "site.addsitedir"))
    if isinstance(stmt, (ast.Assign, ast.AnnAssign)):
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        return all(isinstance(t, ast.Name) and t.id.startswith("__") for t in targets) or \
            any((dotted(t) or "").startswith("sys.path") for t in targets)
    if isinstance(stmt, (ast.Try, ast.If)):
        blocks = [b for _, b in _blocks(stmt)]
        return bool(blocks) and all(
            isinstance(s, (ast.Import, ast.ImportFrom, ast.Pass)) or _is_setup(s)
            or (isinstance(s, ast.Assign) and isinstance(s.value, ast.Constant)) for b in blocks for s in b)
    return False


def _script_anchor(tree: ast.Module, import_anchor: int) -> int:
    """Index of the first top-level statement after the set-up that opens a script."""
    i = import_anchor
    while i < len(tree.body) and (_is_setup(tree.body[i]) or (
            i == 0 and isinstance(tree.body[0], ast.Expr) and isinstance(tree.body[0].value, ast.Constant))):
        i += 1
    return i


def _does_work(stmt: ast.stmt) -> bool:
    """A top-level statement that runs something (a loop, a call) rather than defining things."""
    if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While, ast.With, ast.AsyncWith)):
        return True
    if isinstance(stmt, ast.Expr):
        return isinstance(stmt.value, (ast.Call, ast.Await))
    if isinstance(stmt, ast.Try):
        return any(_does_work(s) for _, block in _blocks(stmt) for s in block)
    if isinstance(stmt, ast.If) and not _is_main_guard(stmt):
        return any(_does_work(s) for _, block in _blocks(stmt) for s in block)
    return False


def summarize_tree(tree: ast.Module, relpath: str, module: str, lines: int) -> FileSummary:
    is_package = relpath.endswith("__init__.py")
    builder = _Builder(module, is_package)
    builder.function(None, MODULE_SCOPE, None, (), tree.body)
    # the module scope must be first: FileSummary.module_scope relies on it
    builder.functions.sort(key=lambda f: f.qualname != MODULE_SCOPE)
    mentions = set()
    for fn in builder.functions:
        for call in fn.calls:
            mentions.add(call.callee)
            mentions.update(a for a in call.args if a)
        mentions.update(a.value for a in fn.assigns if a.value)
    mentions.update(builder.runtime_mentions)
    import_anchor = _import_anchor(tree)
    script_anchor = _script_anchor(tree, import_anchor)
    return FileSummary(
        relpath=relpath,
        module=module,
        imports=builder.imports,
        functions=builder.functions,
        classes=builder.classes,
        main_guards=builder.guards,
        bound_names=tuple(sorted(builder.bound)),
        top_imports=frozenset(builder.top_imports),
        imported_modules=frozenset(builder.imported_modules),
        lines=lines,
        import_anchor=import_anchor,
        mentions=tuple(sorted(mentions)),
        exec_includes=tuple(dict.fromkeys(builder.exec_includes)),
        star_imports=tuple(dict.fromkeys(builder.star_imports)),
        script_anchor=script_anchor,
        script_line=tree.body[script_anchor].lineno if script_anchor < len(tree.body) else lines,
        top_level_work=any(_does_work(s) for s in tree.body),
    )


def summarize(source: bytes, relpath: str, module: str) -> FileSummary:
    """Parse ``source`` (bytes: the coding cookie is honoured) and summarize it.

    Raises ``SyntaxError`` / ``ValueError`` for a file that does not parse, and for one that is
    not valid text in its declared encoding: Python's parser lets invalid bytes pass in
    comments (a latin-1 ``# café`` in a file without a coding cookie), the rewriter does not.
    """
    encoding, _ = tokenize.detect_encoding(io.BytesIO(source).readline)
    try:
        source.decode(encoding)
    except UnicodeDecodeError as exc:
        line = source.count(b"\n", 0, exc.start) + 1
        raise SyntaxError(f"(unicode error) not valid {encoding} at byte {exc.start}", (relpath, line, 1, None))
    tree = ast.parse(source, filename=relpath)
    return summarize_tree(tree, relpath, module, source.count(b"\n") + 1)
