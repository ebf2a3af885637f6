"""What an expression can evaluate to, as far as the project's own code tells.

Real training programs rarely build their loader, model or reader where they use it: a
factory returns one of several classes, a singleton hides behind a static method, an
attribute is set in a base class's ``__init__`` from a parameter. :class:`Values` follows
those paths through the project's code, flow-insensitively and with a depth bound, and
answers with *origins*:

* ``inst:<class id>``  an instance of a project class (``TorchDataLoader(...)``);
* ``class:<class id>`` a project class itself (``cls`` in a classmethod);
* ``func:<function id>`` a project function, not called (``mp.spawn(main_worker)``);
* ``gen:<function id>`` what calling a project generator function returns;
* ``ext:<dotted>`` something from outside the project, by its qualified text
  (``ext:torch.utils.data.DataLoader()``, ``ext:numpy.memmap()``);
* ``lit:<kind>`` a literal container, string or number (``lit:<list>``).

An expression whose origins are unknown (a subscript, a parameter nobody passes) has none.
Nothing here runs the project's code or parses a file: it reads the summaries and the call
graph's first-pass resolution (:mod:`dftpass.core.callgraph`).
"""

from __future__ import annotations

from typing import Iterable, Protocol

import attrs

from dftpass.core import work
from dftpass.core.summary import ClassSummary, FileSummary, FunctionSummary


class Graph(Protocol):
    """What the value flow reads of the call graph (:class:`dftpass.core.callgraph.CallGraph`,
    which builds a :class:`Values` over itself): declared here so that this module does not
    import the one that imports it."""

    classes: dict[str, tuple[FileSummary, ClassSummary]]

    def fn(self, function_id: str) -> FunctionSummary: ...

    def targets(self, caller: str, call_index: int) -> tuple[str, ...]: ...

    def methods_of(self, class_id: str) -> list[str]: ...

    def method(self, class_id: str, name: str, skip_self: bool = False) -> str | None: ...

    def instance_call(self, class_id: str) -> str | None: ...

Origins = frozenset
_EMPTY: frozenset[str] = frozenset()
#: how many calls, returns, attributes and parameters deep one question may follow (DLIO's
#: loader, a factory's product held by a singleton and reached through an attribute, is ~12
#: deep when nothing is known yet).
MAX_DEPTH = 24


@attrs.define
class ValueHints:
    """What the project's code cannot tell: calls that hand back (a wrapped form of) what
    they are given. Filled from plugin knowledge (:mod:`dftpass.plugins.knowledge`)."""

    #: methods that return their receiver (``model.to(device)``, ``model.train()``)
    identity_methods: frozenset[str] = frozenset()
    #: qualified callables whose result stands for their first argument
    #: (``torch.compile(model)``, ``DistributedDataParallel(model)``)
    passthrough_calls: frozenset[str] = frozenset()
    #: qualified callables whose result is their first argument with some arguments bound
    #: (``functools.partial(Task.iter_batches, batch_size=8)``): calling it calls that
    partial_calls: frozenset[str] = frozenset({"functools.partial"})
    #: names of calls whose result is opaque even when the project defines them: a model
    #: registry's ``create_model(name)`` builds whichever class the name says
    opaque_calls: frozenset[str] = frozenset()


def _is_tracer_region(fs, callee: str) -> bool:
    """``callee`` is a dftracer region's ``iter`` (in any of the file's spellings)."""
    from dftpass.core.emitter import recognize

    found = recognize(fs, callee)
    return found is not None and found.endswith(".iter")


def kind(origin: str) -> str:
    return origin.split(":", 1)[0]


def subject(origin: str) -> str:
    return origin.split(":", 1)[1]


def classes(origins: Iterable[str]) -> set[str]:
    """The project classes among ``origins`` whose instances they are."""
    return {subject(o) for o in origins if o.startswith("inst:")}


@attrs.define
class Values:
    graph: Graph
    hints: ValueHints = attrs.field(factory=ValueHints)
    _memo: dict[tuple[str, str], frozenset[str]] = attrs.field(factory=dict)
    _attr_memo: dict[tuple[str, str], frozenset[str]] = attrs.field(factory=dict)
    _assign_memo: dict[str, dict[str, list[tuple[str, str | None]]]] = attrs.field(factory=dict)
    _unpack_memo: dict[str, dict[str, list[tuple[int, int]]]] = attrs.field(factory=dict)
    _active: set[tuple[str, str]] = attrs.field(factory=set)
    _answers: dict[frozenset[str], frozenset[str]] = attrs.field(factory=dict)

    # -- the question -------------------------------------------------------------------
    def of(self, function_id: str, text: str | None, depth: int = 0) -> frozenset[str]:
        """The origins of ``text`` as written in function ``function_id``."""
        if not text or "?" in text or depth > MAX_DEPTH:
            return _EMPTY
        key = (function_id, text)
        if key in self._memo:
            return self._memo[key]
        if key in self._active:
            return _EMPTY  # a cycle: what it adds comes from the other paths
        self._active.add(key)
        work.count("values.evaluations")
        try:
            result = frozenset(self._of(function_id, text, depth)) or _EMPTY
        finally:
            self._active.discard(key)
        # the same few answers recur thousands of times (``{ext:torch.Tensor}``): one object each
        result = self._answers.setdefault(result, result)
        if depth <= 1 or result:
            # an empty answer deep in a chain may be the depth bound's, not the truth: kept only
            # near the top, where a later question from elsewhere would ask it again
            self._memo[key] = result
        return result

    def call_targets(self, function_id: str, callee: str, depth: int = 0) -> set[str]:
        """The project functions a call of ``callee`` (its dotted text, without ``()``) may
        run: for classes their ``__init__``, for instances ``__call__`` or ``forward``."""
        out = set()
        for origin in self._callables(function_id, callee, depth):
            k, s = kind(origin), subject(origin)
            if k == "func":
                out.add(s)
            elif k == "class":
                init = self.graph.method(s, "__init__")
                if init:
                    out.add(init)
            elif k == "inst":
                target = self.graph.instance_call(s)
                if target:
                    out.add(target)
        return out

    # -- expressions -----------------------------------------------------------------------
    def _of(self, fid: str, text: str, depth: int) -> set[str]:
        if text.startswith("<"):
            return {f"lit:{text}"}
        if text.startswith("'") or text.startswith('"') or text[:1].isdigit():
            return {"lit:<str>" if text[:1] in "'\"" else "lit:<number>"}
        if text.endswith("()"):
            return self._call_result(fid, text[:-2], depth)
        base, dot, attr = text.rpartition(".")
        if dot:
            return self._attribute(fid, base, attr, text, depth)
        return self._name(fid, text, depth)

    def _attribute(self, fid: str, base: str, attr: str, text: str, depth: int) -> set[str]:
        g = self.graph
        fs = g.file_of(fid)
        if not base.endswith("()") and base.split(".")[0] in fs.imports and base.split(".")[0] not in \
                self._local_names(fid):
            target = g._resolve_name(fs, text)
            if target:
                return {self._ref(target)}
            return {f"ext:{g.qualify(fs, text)}"}
        out: set[str] = set()
        for origin in self.of(fid, base, depth + 1):
            k, s = kind(origin), subject(origin)
            if k == "inst":
                out |= self.instance_attribute(s, attr, depth + 1)
            elif k == "class":
                out |= self._class_attribute(s, attr, depth + 1)
            elif k == "ext":
                out.add(f"ext:{s}.{attr}")
        return out

    def _name(self, fid: str, name: str, depth: int) -> set[str]:
        g = self.graph
        fs, fn = g.functions[fid]
        if name == "self" and fn.cls and not fn.is_module:
            return {f"inst:{g.class_id(fs, fn.cls)}"}
        if name == "cls" and fn.cls and not fn.is_module:
            return {f"class:{g.class_id(fs, fn.cls)}"}
        nested = g.nested_function(fs, fn, name)
        if nested:
            return {f"func:{nested}"}
        nested = g.nested_class(fs, fn, name)
        if nested:
            return {f"class:{nested}"}
        out: set[str] = set()
        scope: str | None = fid
        while scope is not None:
            sfn = g.fn(scope)
            local = [a.value for a in sfn.assigns if a.target == name]
            for value in local:
                out |= self.of(scope, value, depth + 1)
            unpacked = self._unpacked(scope).get(name, ())
            for index, position in unpacked:
                out |= self._tuple_element(scope, index, position, depth + 1)
            local = local or list(unpacked)
            if name in sfn.params:
                out |= self._parameter(scope, name, depth + 1)
                return out
            if local:
                return out
            scope = g.enclosing_function(scope)
        # a module global, a project function or class, or an import
        module_id = g.module_scope_id(fs)
        if module_id != fid:
            for a in fs.module_scope.assigns:
                if a.target == name:
                    out |= self.of(module_id, a.value, depth + 1)
            # ``global dlrm`` in ``run()``, then ``dlrm = DLRM_Net(...)``: a module global too
            for other in fs.functions:
                if name in other.globals and not other.is_module:
                    setter = f"{fs.relpath}::{other.qualname}"
                    for a in other.assigns:
                        if a.target == name:
                            out |= self.of(setter, a.value, depth + 1)
            for index, position in self._unpacked(module_id).get(name, ()):
                out |= self._tuple_element(module_id, index, position, depth + 1)
            if out:
                return out
        top = g.top_names(fs.relpath).get(name)
        if top:
            return {self._ref(top)}
        if name in fs.imports:
            target = g._resolve_name(fs, name)
            return {self._ref(target)} if target else {f"ext:{fs.imports[name]}"}
        return out

    def _unpacked(self, fid: str) -> dict[str, list[tuple[int, int]]]:
        """``x, y = f(...)`` in the function: name -> (call index, position in the tuple)."""
        found = self._unpack_memo.get(fid)
        if found is None:
            found = {}
            for i, call in enumerate(self.graph.fn(fid).calls):
                if call.stmt_kind == "assign" and len(call.assigned_to) > 1:
                    for position, target in enumerate(call.assigned_to):
                        found.setdefault(target, []).append((i, position))
            self._unpack_memo[fid] = found
        return found

    def _tuple_element(self, fid: str, index: int, position: int, depth: int) -> set[str]:
        """What element ``position`` of the tuple call ``index`` returns holds: the element of
        each ``return a, b`` of the project functions it runs."""
        out: set[str] = set()
        for target in self.graph.targets(fid, index):
            for items in self.graph.fn(target).return_tuples:
                if position < len(items) and items[position]:
                    out |= self.of(target, items[position], depth + 1)
        return out

    def _parameter(self, fid: str, name: str, depth: int) -> set[str]:
        """What callers pass for parameter ``name`` of ``fid`` (and its default)."""
        g = self.graph
        fn = g.fn(fid)
        out: set[str] = set()
        if name in fn.defaults and fn.defaults[name] not in (None, "None"):
            out |= self.of(fid, fn.defaults[name], depth + 1)
        position = fn.positional.index(name) if name in fn.positional else None
        offset = 1 if g.is_bound_method(fid) else 0
        for caller, call in g.call_sites_of(fid):
            arg = None
            for key, value in call.keywords:
                if key == name:
                    arg = value
            if arg is None and position is not None and position - offset >= 0 \
                    and position - offset < len(call.args):
                arg = call.args[position - offset]
            if arg is not None:
                out |= self.of(caller, arg, depth + 1)
        return out

    def _call_result(self, fid: str, callee: str, depth: int) -> set[str]:
        g = self.graph
        fs = g.file_of(fid)
        base, dot, method = callee.rpartition(".")
        if dot and method in self.hints.identity_methods:
            held = self.of(fid, base, depth + 1)
            if held:
                return set(held)
        qualified = g.qualify(fs, callee)
        if dot and method == "iter" and _is_tracer_region(fs, callee):
            # ``ai.dataloader.fetch.iter(it)`` (dftpass's own wrapper): it yields what ``it`` does
            call = g.call_in(fid, callee)
            if call is not None and call.args and call.args[0]:
                held = self.of(fid, call.args[0], depth + 1)
                if held:
                    return set(held)
        if (method if dot else callee) in self.hints.opaque_calls:
            # a registry or hub builds what it is asked for; a project's own factory that
            # only ever returns project instances (``load_model(h)``: ``Tacotron2(h).cuda()``)
            # says what it builds
            own = self._project_returns(fid, callee, depth + 1)
            if own and all(kind(o) == "inst" for o in own):
                return own
            return {f"ext:{qualified}()"}
        if qualified in self.hints.partial_calls:
            call = g.call_in(fid, callee)
            if call is not None and call.args and call.args[0]:
                held = self.of(fid, call.args[0], depth + 1)
                if held:
                    return set(held)
        if qualified in self.hints.passthrough_calls or callee in self.hints.passthrough_calls:
            call = g.call_in(fid, callee)
            if call is not None and call.args:
                held = self.of(fid, call.args[0], depth + 1)
                if held:
                    return set(held) | {f"ext:{qualified}()"}
        out: set[str] = set()
        callables = self._callables(fid, callee, depth + 1)
        for origin in callables:
            k, s = kind(origin), subject(origin)
            if k == "class":
                out.add(f"inst:{s}")
            elif k == "func":
                out |= self.returns_of(s, depth + 1)
            elif k == "inst":  # calling an instance: its __call__ / forward
                target = g.instance_call(s)
                if target:
                    out |= self.returns_of(target, depth + 1)
            elif k == "ext":
                out.add(f"ext:{s}()")
        if not out and not dot and not callables:
            # nothing in the project by that name; a project function whose returns are not
            # known yet (a cycle cut short) is not "outside the project"
            return {f"ext:{qualified}()"}
        return out

    def _project_returns(self, fid: str, callee: str, depth: int) -> set[str]:
        """What the project functions ``callee`` names return (empty when it names none)."""
        out: set[str] = set()
        for origin in self._callables(fid, callee, depth):
            if kind(origin) == "func":
                out |= self.returns_of(subject(origin), depth + 1)
        return out

    def returns_of(self, function_id: str, depth: int = 0) -> frozenset[str]:
        """What calling the project function ``function_id`` returns."""
        fn = self.graph.fn(function_id)
        if fn.is_generator:
            return frozenset({f"gen:{function_id}"})
        out: set[str] = set()
        for value in fn.returns:
            out |= self.of(function_id, value, depth + 1)
        return frozenset(out)

    def _callables(self, fid: str, callee: str, depth: int) -> set[str]:
        """Origins of the thing called by ``callee(...)``: ``func:``, ``class:``, ``inst:``
        (an instance called), or ``ext:``."""
        g = self.graph
        fs, fn = g.functions[fid]
        base, dot, method = callee.rpartition(".")
        if not dot:
            return set(self.of(fid, callee, depth))
        if base == "super()" and fn.cls:
            cid = g.class_id(fs, fn.cls)
            found = g.method(cid, method, skip_self=True)
            return {f"func:{found}"} if found else set()
        if base == "self" and fn.cls and not fn.is_module:
            cid = g.class_id(fs, fn.cls)
            targets = g.dispatch(cid, method)
            if targets:
                return {f"func:{t}" for t in targets}
        head = base.split(".", 1)[0]
        if "(" not in base and head in fs.imports and head not in self._local_names(fid):
            # ``import utils`` then ``utils.MetricLogger()``: the project's class, not ``ext:``
            target = g._resolve_name(fs, callee)
            if target:
                return {self._ref(target)}
        out: set[str] = set()
        for origin in self.of(fid, base, depth):
            k, s = kind(origin), subject(origin)
            if k in ("inst", "class"):
                targets = g.dispatch(s, method) if k == "inst" else (
                    [g.method(s, method)] if g.method(s, method) else [])
                if targets:
                    out |= {f"func:{t}" for t in targets}
                else:
                    out |= self.instance_attribute(s, method, depth + 1) if k == "inst" else \
                        self._class_attribute(s, method, depth + 1)
            elif k == "ext":
                out.add(f"ext:{s}.{method}")
            elif k == "gen" and method in ("__next__", "send"):
                continue
        return out

    # -- attributes ------------------------------------------------------------------------
    def instance_attribute(self, class_id: str, attr: str, depth: int = 0) -> frozenset[str]:
        """What ``obj.attr`` holds for an instance of ``class_id``: every ``self.attr = ...``
        in the class, its bases and subclasses, or a ``@property`` of that name."""
        key = (class_id, attr)
        if key in self._attr_memo:
            return self._attr_memo[key]
        self._attr_memo[key] = _EMPTY  # a cycle through this attribute adds nothing
        g = self.graph
        out: set[str] = set()
        prop = g.method(class_id, attr)
        if prop is not None:
            pfn = g.fn(prop)
            if any(d.rsplit(".", 1)[-1] in ("property", "cached_property") for d in pfn.decorators):
                out |= self.returns_of(prop, depth + 1)
            else:
                out.add(f"func:{prop}")  # a bound method, not called here
        for cid in [*g.mro(class_id), *g.subclasses(class_id)]:
            for method_id, value in self._self_assigns(cid).get(attr, ()):
                out |= self.of(method_id, value, depth + 1)
        result = frozenset(out) or _EMPTY
        self._attr_memo[key] = result
        return result

    def _self_assigns(self, class_id: str) -> dict[str, list[tuple[str, str | None]]]:
        """``self.attr = value`` in the class's own methods: attr -> (method id, value)."""
        found = self._assign_memo.get(class_id)
        if found is None:
            found = {}
            for method_id in self.graph.methods_of(class_id):
                for a in self.graph.fn(method_id).assigns:
                    if a.target.startswith("self.") and a.target.count(".") == 1:
                        found.setdefault(a.target[5:], []).append((method_id, a.value))
            self._assign_memo[class_id] = found
        return found

    def _class_attribute(self, class_id: str, attr: str, depth: int) -> set[str]:
        """``Class.attr``: a method (as a function), or what ``Class.attr = ...`` /
        ``cls.attr = ...`` assigns in the class's methods (singletons)."""
        g = self.graph
        found = g.method(class_id, attr)
        if found:
            return {f"func:{found}"}
        fs, cs = g.classes[class_id]
        out: set[str] = set()
        for method_id in g.methods_of(class_id):
            for a in g.fn(method_id).assigns:
                if a.target in (f"{cs.name}.{attr}", f"cls.{attr}"):
                    out |= self.of(method_id, a.value, depth + 1)
        return out

    # -- helpers ---------------------------------------------------------------------------
    def _ref(self, target: str) -> str:
        return f"class:{target}" if target in self.graph.classes else f"func:{target}"

    def _local_names(self, fid: str) -> set[str]:
        fn = self.graph.fn(fid)
        return {a.target for a in fn.assigns} | set(fn.params)
