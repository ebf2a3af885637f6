"""Where a value comes from: backward data flow over the project's own code.

The ``batch_provenance`` analysis asks one question of a training step: where does the data
its model (or its loss, or its jitted step) consumes come from? :class:`DataFlow` answers it
by walking the value back, statement by statement:

* through assignments (tuple unpacking, ``x[i] = ...``, ``+=``), ``for`` targets, ``with``
  targets and comprehensions;
* through a parameter to every caller's argument (positional, keyword, ``*args``), including
  the arguments ``functools.partial`` binds, and through a project function's call to its
  ``return`` values;
* through ``next(it)`` and a ``for`` loop to what the iterator yields: a project generator's
  ``yield`` values, a data loader (then to its data set's ``__getitem__`` / ``__iter__``),
  through ``enumerate``, ``zip``, ``tqdm`` and the like;
* through ``self.x`` to every ``self.x = ...`` of the class, through closures to the
  enclosing function and through module globals;
* through the operations that only transform a value (``x.to(device)``, ``torch.from_numpy``,
  arithmetic, slicing).

What it meets on the way is recorded as :class:`Site` s, nearest first: where a batch is drawn
(``next()``, a loop over a loader, a project function that returns it), where it goes to the
device, which project functions transform it, which slices cut it, and the reads that bring
the bytes in. Where the walk cannot go on it records a :class:`Break` with the reason, so
that the rules say why they placed nothing instead of guessing.

The summaries (:mod:`dftpass.core.summary`) keep no expressions, so this module parses the
few files the walk enters again with the stdlib parser (a few milliseconds each, cached);
the call graph's resolution and :mod:`dftpass.core.values` answer what a callee or an
iterator *is*. What counts as a loader, a read or a device move is library knowledge,
handed in by the analysis (core never imports the plugins).
"""

from __future__ import annotations

import ast
from collections import deque
from typing import Callable, Iterator, NamedTuple

import attrs

from dftpass.core import work
from dftpass.core.summary import StmtPath, dotted

#: how many statements, calls and parameters deep one walk may go
MAX_DEPTH = 40
#: how many work items one walk may visit (a guard against pathological projects)
MAX_ITEMS = 4000

#: calls that pass the elements of their first argument through (the loop still iterates it)
ELEMENT_WRAPPERS = frozenset({"enumerate", "iter", "tqdm", "trange", "islice", "cycle", "chain", "reversed",
                              "sorted", "list", "tuple", "prefetch", "as_numpy_iterator", "track"})
#: calls whose elements are indices, not data
INDEX_ITERABLES = frozenset({"range", "count", "trange", "arange", "permutation"})
#: attributes that describe a value without being its data (``x.shape[0]`` is a number)
METADATA_ATTRIBUTES = frozenset({"shape", "dtype", "device", "ndim", "is_cuda", "layout", "requires_grad",
                                 "grad_fn", "names", "itemsize"})
#: calls whose result describes their argument or receiver, not its data (``len(x)``, ``x.size(0)``)
METADATA_CALLS = frozenset({"len", "size", "dim", "numel", "nelement", "element_size", "isinstance", "type",
                            "id", "str", "repr", "print", "format", "get_device", "is_floating_point", "hasattr"})


class Site(NamedTuple):
    """A place the walk met: ``kind`` is one of ``next`` (``next(it)`` drew the value),
    ``loop`` (a ``for`` loop drew it), ``loader`` (the iterable is a data loader), ``generator``
    (a project generator yields it), ``call`` (a project function returned it), ``transfer``
    (a move to a device), ``slice`` (a subscript cut it), ``read`` (a call brought it in from
    a file or a store), ``dataset`` (a data set whose items the loader hands out)."""

    kind: str
    function: str
    line: int
    col: int
    stmt: StmtPath
    text: str
    #: how far from where the walk started (statements, calls and parameters crossed)
    depth: int
    #: the project function the site names (the generator, the callee, the data set class)
    target: str = ""


class Break(NamedTuple):
    """Where the walk stopped without an answer, and why (said to the user as it is)."""

    function: str
    line: int
    reason: str


@attrs.define
class Trace:
    """What one walk met, in the order it met it (nearest first)."""

    sites: list[Site] = attrs.field(factory=list)
    breaks: list[Break] = attrs.field(factory=list)
    #: the (function, statement) pairs whose drawing ``loop`` site is recorded
    drawn: set = attrs.field(factory=set)

    def of_kind(self, *kinds: str) -> list[Site]:
        return [s for s in self.sites if s.kind in kinds]


@attrs.define
class Oracle:
    """Library knowledge the walk asks for, handed in by the analysis."""

    #: (function id, dotted text of an iterable) -> is it a data loader?
    is_loader: Callable[[str, str], bool] = lambda function_id, text: False
    #: (function id, qualified callee, method name) -> does the call read data in?
    is_read: Callable[[str, str, str], bool] = lambda function_id, qualified, method: False
    #: (function id, the call node) -> does it move its receiver to an accelerator?
    is_transfer: Callable[[str, ast.Call], bool] = lambda function_id, call: False
    #: (class id) -> is it a data set (its items are what a loader hands out)?
    is_dataset: Callable[[str], bool] = lambda class_id: False
    #: (function id) -> is it a model's forward (its inputs flow through it; its inside is the
    #: model's, not the data path's)?
    is_model: Callable[[str], bool] = lambda function_id: False
    #: (function id, a name) -> does it hold training state, a model or an optimizer, rather
    #: than data (``amp.scale_loss(loss, optimizer)``: the optimizer is not what the step reads)?
    is_state: Callable[[str, str], bool] = lambda function_id, name: False


class _Binding(NamedTuple):
    value: ast.expr | None
    #: "value": the name holds the value; "element": it holds an element of it (``for``)
    role: str
    stmt: StmtPath
    line: int
    #: the statement is ``name = value`` itself (not a tuple's part, a ``for`` or a ``with``)
    whole: bool = False


class Binding(NamedTuple):
    """Where a name gets its value: the function (or module scope) that binds it, the
    statement, its line, whether the statement is ``name = value`` itself, and the value."""

    function: str
    stmt: StmtPath
    line: int
    whole: bool
    value: ast.expr | None


@attrs.define
class _Scope:
    """One function's bindings and calls, by name and by position."""

    node: ast.AST
    bindings: dict[str, list[_Binding]]
    calls: dict[tuple[int, int], ast.Call]
    stmts: dict[int, StmtPath]  # id(statement node) -> its path
    #: the statement paths of the function's loops (a binding later in a loop reaches back)
    loops: list[StmtPath] = attrs.field(factory=list)

    def reaches(self, binding: "_Binding", path: StmtPath, line: int) -> bool:
        """Whether ``binding`` may give the value read at ``path`` (line ``line``): it comes
        first, or a loop around both runs it again before the read (``hidden`` of
        ``output, hidden = model(x, hidden)``). A binding after the read, outside any loop
        around both, never reaches it."""
        if not line or not path or (binding.stmt != path and binding.line < line):
            return True
        return any(len(p) < len(path) and len(p) < len(binding.stmt) and path[:len(p)] == p
                   and binding.stmt[:len(p)] == p for p in self.loops)


class _Item(NamedTuple):
    function: str
    node: ast.expr
    role: str  # "value" | "element"
    depth: int
    stmt: StmtPath
    #: the call the walk entered ``function`` through: (function, caller, call node, how many
    #: leading parameters are bound), so that a parameter is that call's argument, not every
    #: caller's (``model(x_t)`` entering a wrapper's ``__call__(self, x)``)
    frame: tuple = ()


@attrs.define
class DataFlow:
    """The walker. ``read_source(relpath)`` returns a file's bytes or text (None if unreadable)."""

    graph: object  # dftpass.core.callgraph.CallGraph
    read_source: Callable[[str], bytes | str | None]
    oracle: Oracle = attrs.field(factory=Oracle)
    _modules: dict[str, ast.Module | None] = attrs.field(factory=dict)
    _scopes: dict[str, _Scope | None] = attrs.field(factory=dict)
    #: function id -> what it hands out (:meth:`_outputs`), found once per function
    _outs: dict[str, list] = attrs.field(factory=dict)
    _partials: dict[str, list[tuple[str, ast.Call, int]]] | None = None

    # -- the questions --------------------------------------------------------------------
    def call_node(self, function_id: str, line: int, col: int) -> ast.Call | None:
        """The call expression a summary's :class:`CallSite` stands for."""
        scope = self.scope(function_id)
        return scope.calls.get((line, col)) if scope else None

    def bindings(self, function_id: str, name: str) -> list[Binding]:
        """Where ``name``, as read in the function, is bound: in the function, else in the
        functions around it (a closure), else at module level."""
        g = self.graph
        scope_id: str | None = function_id
        while scope_id is not None:
            scope = self.scope(scope_id)
            found = scope.bindings.get(name) if scope else None
            if found:
                return [Binding(scope_id, b.stmt, b.line, b.whole, b.value) for b in found]
            if name in g.fn(scope_id).params:
                return []
            scope_id = g.enclosing_function(scope_id)
        module_id = g.module_scope_id(g.file_of(function_id))
        module = self.scope(module_id) if module_id in g.functions else None
        return [Binding(module_id, b.stmt, b.line, b.whole, b.value)
                for b in ((module.bindings.get(name) or []) if module else [])]

    def derive(self, function_id: str, nodes: list[ast.expr], stmt: StmtPath = (), role: str = "value") -> Trace:
        """Walk ``nodes`` (expressions of ``function_id``) back to where their data comes from."""
        trace = Trace()
        queue = deque(_Item(function_id, n, role, 0, stmt) for n in nodes if n is not None)
        seen: set[tuple[str, int, str]] = set()
        visited = 0
        while queue and visited < MAX_ITEMS:
            item = queue.popleft()
            key = (item.function, id(item.node), item.role, id(item.frame[2]) if item.frame else 0)
            if key in seen:
                continue
            seen.add(key)
            visited += 1
            if item.depth > MAX_DEPTH:
                trace.breaks.append(Break(item.function, getattr(item.node, "lineno", 0),
                                          f"the value is more than {MAX_DEPTH} steps away"))
                continue
            for nxt in self._step(item, trace):
                if item.frame and not nxt.frame and nxt.function == item.function:
                    nxt = nxt._replace(frame=item.frame)  # still inside the call it entered by
                queue.append(nxt)
        work.count("dataflow.walk", visited)
        return trace

    def derive_call_args(self, function_id: str, line: int, col: int, receiver: bool = False) -> Trace:
        """Walk the arguments of the call at ``line``:``col`` (and its receiver when asked)."""
        call = self.call_node(function_id, line, col)
        if call is None:
            return Trace(breaks=[Break(function_id, line, "dftpass could not read the call again")])
        nodes = [*call.args, *(k.value for k in call.keywords)]
        if receiver and isinstance(call.func, ast.Attribute):
            nodes.append(call.func.value)
        return self.derive(function_id, nodes, self._stmt_of(function_id, call))

    def derive_returns(self, function_id: str) -> Trace:
        """Walk what the function returns (or yields, for a generator) back."""
        scope = self.scope(function_id)
        if scope is None:
            return Trace()
        trace = Trace()
        for node, stmt, role in self._outputs(function_id):
            more = self.derive(function_id, [node], stmt, role)
            trace.sites.extend(more.sites)
            trace.breaks.extend(more.breaks)
        return trace

    # -- one step of the walk -----------------------------------------------------------------
    def _step(self, item: _Item, trace: Trace) -> Iterator[_Item]:
        node, fid, depth = item.node, item.function, item.depth
        if item.role == "element":
            yield from self._element(item, trace)
            return
        if isinstance(node, ast.Name):
            if self.oracle.is_state(fid, node.id):
                return  # a model or an optimizer: where it was built or loaded is not the data path
            yield from self._name(fid, node.id, depth, getattr(node, "lineno", 0), trace,
                                  self._stmt_of(fid, node) or item.stmt, item.frame)
        elif isinstance(node, ast.Attribute):
            yield from self._attribute(item, node, trace)
        elif isinstance(node, ast.Subscript):
            trace.sites.append(self._site("slice", fid, node, depth, item.stmt))
            yield _Item(fid, node.value, "value", depth + 1, item.stmt)
        elif isinstance(node, ast.Call):
            yield from self._call(item, node, trace)
        elif isinstance(node, ast.Starred):
            yield _Item(fid, node.value, "value", depth, item.stmt)
        elif isinstance(node, (ast.Tuple, ast.List, ast.Set)):
            for e in node.elts:
                yield _Item(fid, e, "value", depth, item.stmt)
        elif isinstance(node, ast.Dict):
            for v in node.values:
                yield _Item(fid, v, "value", depth, item.stmt)
        elif isinstance(node, ast.BinOp):
            yield _Item(fid, node.left, "value", depth, item.stmt)
            yield _Item(fid, node.right, "value", depth, item.stmt)
        elif isinstance(node, ast.UnaryOp):
            yield _Item(fid, node.operand, "value", depth, item.stmt)
        elif isinstance(node, ast.IfExp):
            yield _Item(fid, node.body, "value", depth, item.stmt)
            yield _Item(fid, node.orelse, "value", depth, item.stmt)
        elif isinstance(node, ast.BoolOp):
            for v in node.values:
                yield _Item(fid, v, "value", depth, item.stmt)
        elif isinstance(node, (ast.ListComp, ast.SetComp, ast.GeneratorExp)):
            yield _Item(fid, node.elt, "value", depth, item.stmt)
        elif isinstance(node, ast.DictComp):
            yield _Item(fid, node.value, "value", depth, item.stmt)
        elif isinstance(node, (ast.Await, ast.NamedExpr)):
            yield _Item(fid, node.value, "value", depth, item.stmt)
        # constants, lambdas, f-strings, comparisons: no data to follow

    def _name(self, fid: str, name: str, depth: int, line: int, trace: Trace,
              path: StmtPath = (), frame: tuple = ()) -> Iterator[_Item]:
        g = self.graph
        scope_id: str | None = fid
        while scope_id is not None:
            scope = self.scope(scope_id)
            if scope is None:
                return
            found = scope.bindings.get(name)
            if found and scope_id == fid:
                found = [b for b in found if scope.reaches(b, path, line)] or found
            fn = g.fn(scope_id)
            if found:
                for b in found:
                    if b.value is not None:
                        yield _Item(scope_id, b.value, b.role, depth + 1, b.stmt)
            if scope is not None and name in _star_parameters(scope.node):
                # ``def f(self, model, *args, **kwargs)``: what callers pass beyond the named ones
                yield from self._star_arguments(scope_id, name, depth + 1, frame)
                return
            if name in fn.params:
                if frame and frame[0] == scope_id:
                    arg = self._framed_argument(frame, name)
                    if arg is not None:
                        yield _Item(frame[1], arg, "value", depth + 1, self._stmt_of(frame[1], frame[2]), frame[4])
                        return
                yield from self._parameter(scope_id, name, depth + 1, trace)
                return
            if found:
                return
            scope_id = g.enclosing_function(scope_id)
        # a module global
        fs = g.file_of(fid)
        module_id = g.module_scope_id(fs)
        if module_id != fid and module_id in g.functions:
            module = self.scope(module_id)
            for b in (module.bindings.get(name, ()) if module else ()):
                if b.value is not None:
                    yield _Item(module_id, b.value, b.role, depth + 1, b.stmt)

    def _star_arguments(self, fid: str, name: str, depth: int, frame: tuple) -> Iterator[_Item]:
        """The arguments ``*args`` / ``**kwargs`` of ``fid`` collect: of the call the walk came
        in by (``frame``), or of every call and ``functools.partial`` of it."""
        g = self.graph
        fn = g.fn(fid)
        bound = 1 if g.is_bound_method(fid) else 0
        named = len(fn.positional) - bound
        star = _star_parameters(self.scope(fid).node)
        keyword = star.get(name) == "kwarg"
        if frame and frame[0] == fid:
            calls = [(frame[1], frame[2], named, frame[4])]
        else:
            calls = [(caller, node, named, ()) for caller, site in g.call_sites_of(fid)
                     if (node := self.call_node(caller, site.line, site.col)) is not None]
            calls += [(caller, node, named - b + 1, ()) for caller, node, b in self._partials_of(fid)]
        for caller, call, skip, parent in calls:
            if keyword:
                values = [k.value for k in call.keywords if k.arg not in fn.params]
            else:
                values = [a.value if isinstance(a, ast.Starred) else a for a in call.args[max(skip, 0):]]
            for v in values:
                yield _Item(caller, v, "value", depth, self._stmt_of(caller, call), parent)

    def _through_partial(self, fid: str, call: ast.Call) -> ast.Call:
        """``f()`` where ``f = functools.partial(g, a, b, k=v)``: the call ``g(a, b, ..., k=v,
        ...)`` it makes (a frame's arguments); the call itself otherwise."""
        if not isinstance(call.func, ast.Name):
            return call
        g = self.graph
        fs = g.file_of(fid)
        for b in self.bindings(fid, call.func.id):
            made = b.value
            if b.whole and isinstance(made, ast.Call) and made.args and \
                    g.qualify(fs, dotted(made.func) or "") in g.hints.values.partial_calls:
                merged = ast.Call(func=made.args[0], args=[*made.args[1:], *call.args],
                                  keywords=[*made.keywords, *call.keywords])
                ast.copy_location(merged, call)
                merged._dft_stmt = getattr(call, "_dft_stmt", None)  # type: ignore[attr-defined]
                return merged
        return call

    def _framed_argument(self, frame: tuple, name: str) -> ast.expr | None:
        """The argument the call a frame names passes for parameter ``name`` (None when it
        passes none: a default, or a partial's bound argument)."""
        function_id, _, call, bound = frame[:4]
        fn = self.graph.fn(function_id)
        position = fn.positional.index(name) - bound if name in fn.positional else None
        return _argument(call, name, position)

    def _parameter(self, fid: str, name: str, depth: int, trace: Trace) -> Iterator[_Item]:
        """What the callers pass for parameter ``name`` of ``fid``."""
        g = self.graph
        fn = g.fn(fid)
        position = fn.positional.index(name) if name in fn.positional else None
        offset = 1 if g.is_bound_method(fid) else 0
        found = False
        for caller, site in g.call_sites_of(fid):
            call = self.call_node(caller, site.line, site.col)
            if call is None:
                continue
            arg = _argument(call, name, None if position is None else position - offset)
            if arg is not None:
                found = True
                yield _Item(caller, arg, "value", depth, self._stmt_of(caller, call))
        for caller, call, bound in self._partials_of(fid):
            # functools.partial(f, a, b): a and b are f's first positional parameters
            positional = [a for a in call.args[1:]]
            keywords = {k.arg: k.value for k in call.keywords if k.arg}
            arg = keywords.get(name)
            if arg is None and position is not None and 0 <= position - bound < len(positional):
                arg = positional[position - bound]
            if arg is not None:
                found = True
                yield _Item(caller, arg, "value", depth, self._stmt_of(caller, call))
        if not found:
            default = fn.defaults.get(name)
            if default in (None, "None"):
                trace.breaks.append(Break(fid, fn.line, f"{name} is a parameter of {fn.qualname} that no call "
                                          "dftpass can follow passes"))

    def _attribute(self, item: _Item, node: ast.Attribute, trace: Trace) -> Iterator[_Item]:
        g = self.graph
        fid = item.function
        text = dotted(node)
        fs, fn = g.functions[fid]
        if text and text.startswith("self.") and text.count(".") == 1 and fn.cls and not fn.is_module:
            attr = text[5:]
            class_id = g.class_id(fs, fn.cls)
            found = False
            for cid in dict.fromkeys([*g.mro(class_id), *g.subclasses(class_id)]):
                for method_id in g.methods_of(cid):
                    scope = self.scope(method_id)
                    for b in (scope.bindings.get(text, ()) if scope else ()):
                        if b.value is not None:
                            found = True
                            yield _Item(method_id, b.value, b.role, item.depth + 1, b.stmt)
            prop = g.method(class_id, attr)
            if prop is not None:
                found = True
                for out, stmt, role in self._outputs(prop):
                    yield _Item(prop, out, role, item.depth + 1, stmt)
            if not found:
                trace.breaks.append(Break(fid, node.lineno, f"{text} is never assigned in {fn.cls} or its bases"))
            return
        if node.attr in METADATA_ATTRIBUTES:
            return  # ``x.shape``: a number, not the data
        # ``batch.x``, ``obj.data``: the data comes with the object
        yield _Item(fid, node.value, "value", item.depth, item.stmt)

    def _call(self, item: _Item, call: ast.Call, trace: Trace) -> Iterator[_Item]:
        g = self.graph
        fid, depth = item.function, item.depth
        fs = g.file_of(fid)
        callee = dotted(call.func) or ""
        method = callee.rsplit(".", 1)[-1].rstrip("()")
        stmt = self._stmt_of(fid, call) or item.stmt
        if callee == "next" and call.args:
            trace.sites.append(self._site("next", fid, call, depth, stmt, dotted(call.args[0]) or ""))
            yield _Item(fid, call.args[0], "element", depth + 1, stmt)
            return
        if isinstance(call.func, ast.Attribute) and self.oracle.is_transfer(fid, call):
            trace.sites.append(self._site("transfer", fid, call, depth, stmt))
            yield _Item(fid, call.func.value, "value", depth, stmt)
            return
        if method in METADATA_CALLS:
            return  # ``len(x)``, ``x.size(0)``: numbers about the data
        targets = self._targets(fid, call)
        if targets and all(self.oracle.is_model(t) for t in targets):
            # a model call: its output is made of its inputs; what it does inside is the model's
            trace.sites.append(self._site("model", fid, call, depth, stmt, targets[0]))
            for a in call.args:
                yield _Item(fid, a, "value", depth, stmt)
            for k in call.keywords:
                yield _Item(fid, k.value, "value", depth, stmt)
            return
        if targets:
            for target in targets:
                tfn = g.fn(target)
                if target.endswith(".__init__"):
                    continue  # an object of a project class: what it holds is asked elsewhere
                if tfn.is_generator:
                    continue  # a generator object: its elements are drawn by next() or a loop
                trace.sites.append(self._site("call", fid, call, depth, stmt, target))
                frame = (target, fid, self._through_partial(fid, call), 1 if g.is_bound_method(target) else 0,
                         item.frame)
                for out, ostmt, role in self._outputs(target):
                    yield _Item(target, out, role, depth + 1, ostmt, frame)
            return
        qualified = g.qualify(fs, callee.rstrip("()")) if callee else ""
        if self.oracle.is_read(fid, qualified, method):
            trace.sites.append(self._site("read", fid, call, depth, stmt, qualified))
            return
        # a library call or method: its result is made of its receiver and arguments
        if isinstance(call.func, ast.Attribute):
            yield _Item(fid, call.func.value, "value", depth, stmt)
        for a in call.args:
            yield _Item(fid, a, "value", depth, stmt)
        for k in call.keywords:
            if k.arg not in ("device", "dtype", "non_blocking", "memory_format"):
                yield _Item(fid, k.value, "value", depth, stmt)

    def _element(self, item: _Item, trace: Trace) -> Iterator[_Item]:
        """The elements of the iterable ``item.node``: what a loop or ``next()`` draws."""
        g = self.graph
        node, fid, depth = item.node, item.function, item.depth
        fs = g.file_of(fid)
        # the statement that draws it (a ``for``, or the ``next()`` statement): whatever the
        # iterable turns out to be, this is where the value was drawn
        site = self._site("loop", fid, node, depth, item.stmt)
        if (fid, site.stmt) not in trace.drawn:  # once per drawing statement (a set: the walk's hot path)
            trace.drawn.add((fid, site.stmt))
            trace.sites.append(site)
        if isinstance(node, ast.Call):
            callee = dotted(node.func) or ""
            last = callee.rsplit(".", 1)[-1]
            if last in INDEX_ITERABLES:
                return
            if last == "zip":
                for a in node.args:
                    yield _Item(fid, a, "element", depth, item.stmt)
                return
            if last in ELEMENT_WRAPPERS and not self._targets(fid, node) and node.args:
                yield _Item(fid, node.args[0], "element", depth, item.stmt)
                return
            if callee == "next" and node.args:
                # the elements of a batch drawn with next() (``[t.to(d) for t in next(it)]``):
                # what the iterator hands out
                yield _Item(fid, node.args[0], "element", depth, item.stmt)
                return
        text = dotted(node)
        origins = g.values.of(fid, text) if text and g.values is not None else frozenset()
        drawn = False
        for origin in sorted(origins):
            kind, subject = origin.split(":", 1)
            if kind == "gen":
                drawn = True
                trace.sites.append(self._site("generator", fid, node, depth, item.stmt, subject))
                for out, stmt, role in self._outputs(subject):
                    yield _Item(subject, out, role, depth + 1, stmt)
            elif kind == "inst" and not self.oracle.is_loader(fid, text):
                iterate = g.method(subject, "__iter__") or g.method(subject, "__next__")
                if iterate is not None:
                    drawn = True
                    trace.sites.append(self._site("generator", fid, node, depth, item.stmt, iterate))
                    for out, stmt, role in self._outputs(iterate):
                        yield _Item(iterate, out, role, depth + 1, stmt)
        if not drawn and text and self.oracle.is_loader(fid, text):
            trace.sites.append(self._site("loader", fid, node, depth, item.stmt))
            yield from self._dataset_items(fid, node, text, depth, trace, item.stmt)
            return
        if drawn:
            return
        if isinstance(node, ast.Call) and self._targets(fid, node):
            # a project function returning an iterable (a list of batches): its elements
            for target in self._targets(fid, node):
                for out, stmt, _ in self._outputs(target):
                    yield _Item(target, out, "element", depth + 1, stmt)
            return
        if isinstance(node, ast.Name):
            # ``it = iter(loader)``: the elements of what the name holds
            for nxt in self._name(fid, node.id, depth, node.lineno, trace, self._stmt_of(fid, node) or item.stmt,
                                  item.frame):
                yield _Item(nxt.function, nxt.node, "element" if nxt.role == "value" else nxt.role,
                            nxt.depth, nxt.stmt)
            return
        if isinstance(node, ast.Attribute) and text and text.startswith("self."):
            for nxt in self._attribute(_Item(fid, node, "value", depth, item.stmt), node, trace):
                yield _Item(nxt.function, nxt.node, "element", nxt.depth, nxt.stmt)
            return
        if origins and all(o.startswith("ext:") for o in origins):
            what = sorted(origins)[0][4:]
            trace.breaks.append(Break(fid, getattr(node, "lineno", 0),
                                      f"{text} is built by {what}, outside the project, which dftpass cannot follow"))
        elif isinstance(node, (ast.Subscript, ast.Attribute, ast.Call)):
            yield _Item(fid, node, "value", depth, item.stmt)

    def _dataset_items(self, fid: str, node: ast.expr, text: str, depth: int, trace: Trace,
                       stmt: StmtPath) -> Iterator[_Item]:
        """A loader's elements come from its data set: ``DataLoader(ds)`` -> ``ds``'s items."""
        g = self.graph
        datasets: set[str] = set()
        for where, call_node in self._loader_constructions(fid, node):
            candidates = [*call_node.args[:1], *(k.value for k in call_node.keywords if k.arg == "dataset")]
            for c in candidates:
                ctext = dotted(c)
                for origin in (g.values.of(where, ctext) if ctext and g.values is not None else ()):
                    if origin.startswith("inst:") and self.oracle.is_dataset(origin[5:]):
                        datasets.add(origin[5:])
        for class_id in sorted(datasets):
            item_fn = g.method(class_id, "__getitem__") or g.method(class_id, "__iter__")
            if item_fn is None:
                continue
            trace.sites.append(Site("dataset", fid, getattr(node, "lineno", 0), getattr(node, "col_offset", 0),
                                    stmt, text, depth, class_id))
            for out, ostmt, role in self._outputs(item_fn):
                yield _Item(item_fn, out, role, depth + 1, ostmt)

    def _loader_constructions(self, fid: str, node: ast.expr) -> list[tuple[str, ast.Call]]:
        """The ``DataLoader(...)`` calls (and the functions they are in) that made the loader
        ``node`` names, as far as the bindings of the names on the way tell (a factory's
        return, an attribute, a parameter)."""
        out: list[tuple[str, ast.Call]] = []
        frontier: list[tuple[str, ast.expr, int]] = [(fid, node, 0)]
        seen: set[int] = set()
        while frontier:
            f, n, d = frontier.pop()
            if id(n) in seen or d > 8:
                continue
            seen.add(id(n))
            if isinstance(n, ast.Call):
                targets = self._targets(f, n)
                if not targets:
                    out.append((f, n))
                for t in targets:
                    frontier.extend((t, o, d + 1) for o, _, _ in self._outputs(t))
                continue
            dummy = Trace()
            if isinstance(n, ast.Name):
                frontier.extend((i.function, i.node, d + 1) for i in self._name(f, n.id, 0, 0, dummy))
            elif isinstance(n, ast.Attribute):
                frontier.extend((i.function, i.node, d + 1)
                                for i in self._attribute(_Item(f, n, "value", 0, ()), n, dummy))
        return out

    # -- what a function hands out ----------------------------------------------------------
    def _outputs(self, function_id: str) -> list[tuple[ast.expr, StmtPath, str]]:
        """What a function hands out: the expressions it returns or yields, with the role of
        what comes out (``yield from x`` hands out x's elements). Found once per function."""
        if function_id in self._outs:
            return self._outs[function_id]
        scope = self.scope(function_id)
        if scope is None:
            return []
        out = self._outs[function_id] = []
        for node in _own_nodes(scope.node):
            stmt = scope.stmts.get(id(getattr(node, "_dft_stmt", node)), ())
            if isinstance(node, ast.Return) and node.value is not None:
                out.append((node.value, scope.stmts.get(id(node), ()), "value"))
            elif isinstance(node, ast.Yield) and node.value is not None:
                out.append((node.value, stmt, "value"))
            elif isinstance(node, ast.YieldFrom):
                out.append((node.value, stmt, "element"))
        return out

    def _targets(self, fid: str, call: ast.Call) -> tuple[str, ...]:
        """The project functions a call runs, as the call graph resolved it."""
        g = self.graph
        fn = g.fn(fid)
        for i, site in enumerate(fn.calls):
            if site.line == call.lineno and site.col == call.col_offset:
                found = g.targets(fid, i)
                if found:
                    return found
                break
        if g.values is not None:
            text = dotted(call.func)
            if text:
                return tuple(sorted(g.values.call_targets(fid, text)))
        return ()

    def _partials_of(self, fid: str) -> list[tuple[str, ast.Call, int]]:
        """``functools.partial(f, ...)`` calls whose ``f`` is ``fid``: (caller, call, how many
        leading parameters the partial's own positional arguments start after)."""
        if self._partials is None:
            self._partials = {}
            g = self.graph
            for caller, (fs, fn) in g.functions.items():
                for site in fn.calls:
                    if g.qualify(fs, site.callee) != "functools.partial" or not site.args or not site.args[0]:
                        continue
                    node = self.call_node(caller, site.line, site.col)
                    if node is None or not node.args:
                        continue
                    held = g.values.of(caller, site.args[0]) if g.values is not None else ()
                    for origin in held:
                        if origin.startswith("func:"):
                            target = origin[5:]
                            # a bound method (``self.diffusion.training_losses``): self is bound
                            bound = 1 if g.is_bound_method(target) and "." in site.args[0] else 0
                            self._partials.setdefault(target, []).append((caller, node, bound))
        return self._partials.get(fid, [])

    # -- parsing ------------------------------------------------------------------------------
    def scope(self, function_id: str) -> _Scope | None:
        if function_id in self._scopes:
            return self._scopes[function_id]
        self._scopes[function_id] = None
        g = self.graph
        if function_id not in g.functions:
            return None
        fs, fn = g.functions[function_id]
        module = self._module(fs.relpath)
        if module is None:
            return None
        node = module if fn.is_module else _at(module, fn.stmt)
        if node is None:
            return None
        scope = _Scope(node, {}, {}, {})
        _collect(scope, node, fn.stmt if not fn.is_module else ())
        self._scopes[function_id] = scope
        return scope

    def _module(self, relpath: str) -> ast.Module | None:
        if relpath not in self._modules:
            text = self.read_source(relpath)
            try:
                self._modules[relpath] = ast.parse(text) if text is not None else None
            except (SyntaxError, ValueError, RecursionError, MemoryError):
                self._modules[relpath] = None
        return self._modules[relpath]

    def _stmt_of(self, fid: str, node: ast.AST) -> StmtPath:
        scope = self.scope(fid)
        if scope is None:
            return ()
        return scope.stmts.get(id(getattr(node, "_dft_stmt", None)), ())

    def _site(self, kind: str, fid: str, node: ast.AST, depth: int, stmt: StmtPath, target: str = "") -> Site:
        text = dotted(node) if isinstance(node, ast.expr) else None
        return Site(kind, fid, getattr(node, "lineno", 0), getattr(node, "col_offset", 0),
                    self._stmt_of(fid, node) or stmt, text or "?", depth, target)


# -- the AST side ---------------------------------------------------------------------------
def _star_parameters(node: ast.AST) -> dict[str, str]:
    """``*args`` and ``**kwargs`` of a function node: name -> "vararg" | "kwarg"."""
    args = getattr(node, "args", None)
    if not isinstance(args, ast.arguments):
        return {}
    out = {}
    if args.vararg is not None:
        out[args.vararg.arg] = "vararg"
    if args.kwarg is not None:
        out[args.kwarg.arg] = "kwarg"
    return out


def _argument(call: ast.Call, name: str, position: int | None) -> ast.expr | None:
    """The argument a call passes for a parameter (its keyword, its position, a ``*args``)."""
    for k in call.keywords:
        if k.arg == name:
            return k.value
    if position is None or position < 0:
        return None
    for i, a in enumerate(call.args):
        if isinstance(a, ast.Starred):
            return a.value  # *args: every later parameter comes from it
        if i == position:
            return a
    return None


def _at(module: ast.Module, path: StmtPath) -> ast.AST | None:
    node: ast.AST = module
    for field, index in path:
        if field.startswith("handlers."):
            holder = node.handlers[int(field.split(".")[1])]  # type: ignore[attr-defined]
            block = holder.body
        elif field.startswith("cases."):
            holder = node.cases[int(field.split(".")[1])]  # type: ignore[attr-defined]
            block = holder.body
        else:
            block = getattr(node, field, None)
        if not isinstance(block, list) or index >= len(block):
            return None
        node = block[index]
    return node


_SCOPE_NODES = (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)


def _own_nodes(root: ast.AST) -> Iterator[ast.AST]:
    """The nodes of a function's (or module's) own body, nested functions and classes left out."""
    stack = list(ast.iter_child_nodes(root)) if not isinstance(root, ast.Module) else list(root.body)
    if isinstance(root, (ast.FunctionDef, ast.AsyncFunctionDef)):
        stack = list(root.body)
    visited = 0
    while stack:
        node = stack.pop()
        if isinstance(node, _SCOPE_NODES):
            continue
        visited += 1
        yield node
        stack.extend(ast.iter_child_nodes(node))
    work.count("dataflow.nodes", visited)


def _blocks(stmt: ast.stmt) -> Iterator[tuple[str, list[ast.stmt]]]:
    for field in ("body", "orelse", "finalbody"):
        block = getattr(stmt, field, None)
        if isinstance(block, list) and block and isinstance(block[0], ast.stmt):
            yield field, block
    for k, handler in enumerate(getattr(stmt, "handlers", None) or []):
        yield f"handlers.{k}", handler.body
    for k, case in enumerate(getattr(stmt, "cases", None) or []):
        yield f"cases.{k}", case.body


def _collect(scope: _Scope, root: ast.AST, base: StmtPath) -> None:
    """Fill the scope's bindings, calls and statement paths (paths as the summaries spell them)."""
    body = root.body if isinstance(root, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef)) else []

    def bind(target: ast.AST, value: ast.expr | None, role: str, path: StmtPath, line: int,
             whole: bool = False) -> None:
        if isinstance(target, (ast.Tuple, ast.List)):
            pairs = (isinstance(value, (ast.Tuple, ast.List)) and len(value.elts) == len(target.elts)
                     and not any(isinstance(e, ast.Starred) for e in target.elts))
            for k, sub in enumerate(target.elts):
                bind(sub, value.elts[k] if pairs and role == "value" else value, role, path, line)  # type: ignore
        elif isinstance(target, ast.Starred):
            bind(target.value, value, role, path, line)
        elif isinstance(target, ast.Subscript):
            # ``inp[i] = char_tensor(chunk)``: the container holds what is stored in it
            name = dotted(target.value)
            if name and "(" not in name and "[" not in name:
                scope.bindings.setdefault(name, []).append(_Binding(value, role, path, line))
        else:
            name = dotted(target)
            if name and "(" not in name and "[" not in name:
                scope.bindings.setdefault(name, []).append(_Binding(value, role, path, line, whole))

    def walk(stmts: list[ast.stmt], prefix: StmtPath, field: str) -> None:
        for i, stmt in enumerate(stmts):
            path = prefix + ((field, i),)
            scope.stmts[id(stmt)] = path
            if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                continue
            if isinstance(stmt, (ast.For, ast.AsyncFor, ast.While)):
                scope.loops.append(path)
            for sub in _expression_nodes(stmt):
                sub._dft_stmt = stmt  # type: ignore[attr-defined]
                if isinstance(sub, ast.Call):
                    scope.calls[(sub.lineno, sub.col_offset)] = sub
                elif isinstance(sub, ast.NamedExpr):
                    bind(sub.target, sub.value, "value", path, sub.lineno)
                elif isinstance(sub, (ast.ListComp, ast.SetComp, ast.GeneratorExp, ast.DictComp)):
                    for gen in sub.generators:
                        bind(gen.target, gen.iter, "element", path, sub.lineno)
            scope.stmts.setdefault(id(stmt), path)
            if isinstance(stmt, ast.Assign):
                for t in stmt.targets:
                    bind(t, stmt.value, "value", path, stmt.lineno, len(stmt.targets) == 1)
            elif isinstance(stmt, (ast.AnnAssign, ast.AugAssign)) and stmt.value is not None:
                bind(stmt.target, stmt.value, "value", path, stmt.lineno)
            elif isinstance(stmt, (ast.For, ast.AsyncFor)):
                bind(stmt.target, stmt.iter, "element", path, stmt.lineno)
            elif isinstance(stmt, (ast.With, ast.AsyncWith)):
                for w in stmt.items:
                    if w.optional_vars is not None:
                        bind(w.optional_vars, w.context_expr, "value", path, stmt.lineno)
            for sub_field, block in _blocks(stmt):
                walk(block, path, sub_field)

    walk(body, base, "body")


def _expression_nodes(stmt: ast.stmt) -> Iterator[ast.AST]:
    """The expression nodes of a statement itself (not of the blocks it holds)."""
    stack: list[ast.AST] = []
    for field, value in ast.iter_fields(stmt):
        if field in ("body", "orelse", "finalbody", "handlers", "cases"):
            continue
        if isinstance(value, ast.AST):
            stack.append(value)
        elif isinstance(value, list):
            stack.extend(v for v in value if isinstance(v, ast.AST))
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Lambda,)):
            continue
        yield node
        stack.extend(ast.iter_child_nodes(node))
