"""The project's call graph: functions and methods, call edges resolved through imports.

Nodes are function ids ``"relpath::qualname"`` (``"engine.py::train_one_epoch"``,
``"model.py::Net.forward"``, ``"train.py::<module>"`` for module-level code). An edge
``caller -> callee`` carries the call sites. Resolution is deliberately modest and
predictable:

* ``f()`` -> a function or class defined in the same module, or imported from a project
  module (``from .engine import f``, ``import pkg.engine as e; e.f()``);
* ``self.m()`` -> method ``m`` of the enclosing class or of a project base class;
* ``x.m()`` where ``x = SomeProjectClass(...)`` in the same function, or ``self.x.m()``
  where ``self.x = SomeProjectClass(...)`` in the class -> ``SomeProjectClass.m``;
* calling an instance of a project class -> its ``__call__``, or ``forward`` for a
  ``torch.nn.Module``; calling a class -> its ``__init__`` (and an *instantiation*).

Everything else (library calls, dynamic dispatch) stays unresolved: passes match library
calls by their qualified dotted name (:meth:`CallGraph.qualify`).
"""

from __future__ import annotations

from typing import Any, Iterable, Iterator

import attrs

from dftpass.core.summary import MODULE_SCOPE, CallSite, ClassSummary, FileSummary, FunctionSummary

def fid(relpath: str, qualname: str) -> str:
    return f"{relpath}::{qualname}"


@attrs.define
class Entry:
    """A program entry point."""

    kind: str  # "main-guard" | "console-script"
    relpath: str
    line: int
    #: the guard's index in FileSummary.main_guards (main-guard entries)
    guard: int | None = None
    #: the project function the entry runs (the guard's first project call, or the script target)
    function: str | None = None
    name: str = ""


@attrs.define
class CallGraph:
    graph: Any  # networkx.DiGraph (imported when a graph is built: ~75 ms)
    files: dict[str, FileSummary]
    functions: dict[str, tuple[FileSummary, FunctionSummary]]
    classes: dict[str, tuple[FileSummary, ClassSummary]]
    modules: dict[str, str]  # module name -> relpath
    #: class id -> ids of the functions that instantiate it
    instantiated_in: dict[str, set[str]]
    entries: list[Entry]
    #: (caller id, call index) -> callee id, for every resolved call
    resolved: dict[tuple[str, int], str]
    #: relpath -> names defined at the top of the module: name -> function or class id
    _top: dict[str, dict[str, str]] = attrs.field(factory=dict)

    # -- queries ---------------------------------------------------------------------------
    def fn(self, function_id: str) -> FunctionSummary:
        return self.functions[function_id][1]

    def file_of(self, function_id: str) -> FileSummary:
        return self.functions[function_id][0]

    def callees(self, function_id: str) -> Iterable[str]:
        return self.graph.successors(function_id) if function_id in self.graph else ()

    def callers(self, function_id: str) -> Iterable[str]:
        return self.graph.predecessors(function_id) if function_id in self.graph else ()

    def reachable(self, function_id: str) -> set[str]:
        if function_id not in self.graph:
            return set()
        import networkx as nx

        return nx.descendants(self.graph, function_id)

    def call_target(self, caller: str, call_index: int) -> str | None:
        return self.resolved.get((caller, call_index))

    def calls_with_targets(self, caller: str) -> Iterator[tuple[CallSite, str | None]]:
        fn = self.fn(caller)
        for i, call in enumerate(fn.calls):
            yield call, self.resolved.get((caller, i))

    def call_sites_of(self, callee: str) -> Iterator[tuple[str, CallSite]]:
        """Every resolved call of ``callee``: (caller id, call site)."""
        for caller in self.callers(callee):
            for i, call in enumerate(self.fn(caller).calls):
                if self.resolved.get((caller, i)) == callee:
                    yield caller, call

    def qualify(self, fs: FileSummary, text: str | None) -> str:
        """Expand the first name of a dotted text through the file's imports:
        ``nn.Module`` -> ``torch.nn.Module`` after ``from torch import nn``."""
        if not text:
            return ""
        head, _, rest = text.partition(".")
        base = fs.imports.get(head.rstrip("()"))
        if base is None:
            return text
        suffix = "()" if head.endswith("()") else ""
        return base + suffix + ("." + rest if rest else "")

    def class_of_method(self, function_id: str) -> str | None:
        fs, fn = self.functions[function_id]
        return fid(fs.relpath, fn.cls) if fn.cls else None

    def mro(self, class_id: str) -> list[str]:
        """The class and its project base classes, nearest first (depth-first, no duplicates)."""
        seen: list[str] = []
        stack = [class_id]
        while stack:
            cid = stack.pop(0)
            if cid in seen or cid not in self.classes:
                continue
            seen.append(cid)
            fs, cs = self.classes[cid]
            for base in cs.bases:
                target = self._resolve_name(fs, base)
                if target and target in self.classes:
                    stack.append(target)
        return seen

    def external_bases(self, class_id: str) -> set[str]:
        """Qualified names of the non-project base classes anywhere in the hierarchy."""
        out = set()
        for cid in self.mro(class_id):
            fs, cs = self.classes[cid]
            for base in cs.bases:
                target = self._resolve_name(fs, base)
                if not target or target not in self.classes:
                    out.add(self.qualify(fs, base))
        return out

    def has_base(self, class_id: str, names: Iterable[str]) -> bool:
        """Whether a non-project base anywhere in the hierarchy is one of ``names``, compared
        on whole dotted components from the right (``"nn.Module"`` matches ``torch.nn.Module``)."""
        names = tuple(names)
        return any(b == n or b.endswith("." + n) for b in self.external_bases(class_id) for n in names)

    def is_module_class(self, class_id: str) -> bool:
        """A ``torch.nn.Module`` subclass (directly or through project classes)."""
        return self.has_base(class_id, ("nn.Module", "torch.nn.Module", "LightningModule"))

    def method(self, class_id: str, name: str) -> str | None:
        for cid in self.mro(class_id):
            fs, cs = self.classes[cid]
            if name in cs.methods:
                return fid(fs.relpath, cs.methods[name])
        return None

    # -- resolution ------------------------------------------------------------------------
    def _module_attr(self, module: str, attr: str) -> str | None:
        relpath = self.modules.get(module)
        if relpath is None:
            return None
        found = self._top[relpath].get(attr)
        if found:
            return found
        # re-exported name: follow the module's own import
        target = self.files[relpath].imports.get(attr)
        if target and target != f"{module}.{attr}":
            return self._resolve_qualified(target, depth=1)
        return None

    def _resolve_qualified(self, qualified: str, depth: int = 0) -> str | None:
        """``pkg.engine.train`` -> the project function/class id, if it is in the project."""
        if depth > 4:
            return None
        parts = qualified.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            module = ".".join(parts[:cut])
            if module in self.modules:
                rest = parts[cut:]
                if len(rest) == 1:
                    return self._module_attr(module, rest[0])
                if len(rest) == 2:  # Class.method
                    cls = self._module_attr(module, rest[0])
                    if cls and cls in self.classes:
                        return self.method(cls, rest[1])
                return None
        return None

    def _resolve_name(self, fs: FileSummary, name: str) -> str | None:
        """A bare or dotted name as written in ``fs`` -> project function/class id."""
        head, _, rest = name.partition(".")
        if not rest and head in self._top[fs.relpath]:
            return self._top[fs.relpath][head]
        if head in fs.imports:
            target = fs.imports[head] + ("." + rest if rest else "")
            return self._resolve_qualified(target)
        if rest:
            cls = self._resolve_name(fs, head)
            if cls and cls in self.classes and "." not in rest:
                return self.method(cls, rest)
        return None


def _instance_type(graph: CallGraph, fs: FileSummary, fn: FunctionSummary, name: str) -> str | None:
    """The project class of a local variable or ``self`` attribute, from its assignments."""
    values: Iterable[str | None]
    if name.startswith("self.") and fn.cls:
        cid = fid(fs.relpath, fn.cls)
        attr = name[5:]
        values = ()
        for c in graph.mro(cid):
            values = graph.classes[c][1].attr_values.get(attr, ())
            if values:
                break
    else:
        values = [a.value for a in fn.assigns if a.target == name]
        if not values and not fn.is_module:
            values = [a.value for a in fs.module_scope.assigns if a.target == name]
    for value in values:
        if value and value.endswith("()"):
            target = graph._resolve_name(fs, value[:-2])
            if target and target in graph.classes:
                return target
    return None


def _resolve_call(graph: CallGraph, fs: FileSummary, fn: FunctionSummary, call: CallSite) -> tuple[str | None, bool]:
    """(callee id, is an instantiation)."""
    callee = call.callee
    if "?" in callee:
        return None, False
    parts = callee.split(".")
    # self.method() / self.attr.method() / self.attr()
    if parts[0] == "self" and fn.cls and len(parts) >= 2:
        cid = fid(fs.relpath, fn.cls)
        if len(parts) == 2:
            m = graph.method(cid, parts[1])
            if m:
                return m, False
            inst = _instance_type(graph, fs, fn, callee)
            return (_call_instance(graph, inst), False) if inst else (None, False)
        inst = _instance_type(graph, fs, fn, ".".join(parts[:2]))
        if inst and len(parts) == 3:
            return graph.method(inst, parts[2]), False
        return None, False
    if "()" in callee:
        return None, False
    target = graph._resolve_name(fs, callee)
    if target:
        if target in graph.classes:
            return graph.method(target, "__init__") or target, True
        return target, False
    # x.method() / x() for a local instance of a project class
    inst = _instance_type(graph, fs, fn, parts[0])
    if inst:
        if len(parts) == 1:
            return _call_instance(graph, inst), False
        if len(parts) == 2:
            return graph.method(inst, parts[1]), False
    return None, False


def _call_instance(graph: CallGraph, class_id: str) -> str | None:
    return graph.method(class_id, "__call__") or (
        graph.method(class_id, "forward") if graph.is_module_class(class_id) else None)


def build_callgraph(summaries: Iterable[FileSummary],
                    console_scripts: Iterable[tuple[str, str, str]] = ()) -> CallGraph:
    import networkx as nx

    files = {fs.relpath: fs for fs in summaries}
    graph = CallGraph(
        graph=nx.DiGraph(), files=files, functions={}, classes={}, modules={},
        instantiated_in={}, entries=[], resolved={},
    )
    for fs in files.values():
        # two scripts may share a module name; the first (sorted) wins, as on sys.path
        graph.modules.setdefault(fs.module, fs.relpath)
        for fn in fs.functions:
            f = fid(fs.relpath, fn.qualname)
            graph.functions[f] = (fs, fn)
            graph.graph.add_node(f)
        top = graph._top[fs.relpath] = {}
        for fn in fs.functions:
            if fn.cls is None and "." not in fn.qualname and not fn.is_module:
                top[fn.qualname] = fid(fs.relpath, fn.qualname)
        for cs in fs.classes:
            graph.classes[fid(fs.relpath, cs.qualname)] = (fs, cs)
            if "." not in cs.qualname:
                top[cs.qualname] = fid(fs.relpath, cs.qualname)

    # importing a project module runs its top-level code
    for fs in files.values():
        importer = fid(fs.relpath, MODULE_SCOPE)
        for module in fs.imported_modules:
            target = graph.modules.get(module)
            if target and target != fs.relpath:
                graph.graph.add_edge(importer, fid(target, MODULE_SCOPE))

    for caller, (fs, fn) in graph.functions.items():
        for i, call in enumerate(fn.calls):
            target, instantiation = _resolve_call(graph, fs, fn, call)
            if target is None:
                continue
            if instantiation:
                cls = target if target in graph.classes else graph.class_of_method(target)
                if cls:
                    graph.instantiated_in.setdefault(cls, set()).add(caller)
            if target in graph.functions:
                graph.resolved[(caller, i)] = target
                graph.graph.add_edge(caller, target)

    graph.entries = _entries(graph, console_scripts)
    return graph


def _entries(graph: CallGraph, console_scripts: Iterable[tuple[str, str, str]]) -> list[Entry]:
    entries: list[Entry] = []
    for fs in graph.files.values():
        module_id = fid(fs.relpath, MODULE_SCOPE)
        scope = fs.module_scope
        for k, guard in enumerate(fs.main_guards):
            target = None
            for i, call in enumerate(scope.calls):
                if call.in_main_guard and call.stmt[: len(guard.stmt)] == guard.stmt:
                    t = graph.resolved.get((module_id, i))
                    if t is not None:
                        target = t
                        break
            entries.append(Entry("main-guard", fs.relpath, guard.line, guard=k, function=target))
    for name, module, func in console_scripts:
        target = graph._resolve_qualified(f"{module}.{func}") if func else None
        relpath = graph.modules.get(module)
        if target and relpath:
            entries.append(Entry("console-script", relpath, graph.fn(target).line, function=target, name=name))
    return entries
