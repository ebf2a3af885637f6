"""The project's call graph: functions and methods, call edges resolved through imports.

Nodes are function ids ``"relpath::qualname"`` (``"engine.py::train_one_epoch"``,
``"model.py::Net.forward"``, ``"train.py::<module>"`` for module-level code). An edge
``caller -> callee`` has a ``kind``:

* ``call``: ``f()`` -> a function or class (its ``__init__``) defined in the same module or
  imported from a project module; ``self.m()`` -> ``m`` of the class, its bases, and the
  subclasses that override it (dynamic dispatch); ``super().m()``; and, in a second pass,
  ``x.m()`` / ``x()`` wherever :mod:`dftpass.core.values` can tell what ``x`` holds
  (a factory's product, a singleton, an attribute set from a parameter);
* ``import``: importing a project module runs its top level; ``include``: so does
  ``exec(open("configurator.py").read())``;
* ``ref``: a project function passed as a value (``fire.Fire(main)``, ``collate_fn=f``,
  ``atexit.register(f)``): it may run in this process.

A function handed to a process launcher (``mp.spawn(main_worker)``,
``Process(target=run)``, ``worker_init_fn=``) runs in *another* process: it is no edge but
a :attr:`CallGraph.spawns` record, and a program entry of its own.

Modules are found the way Python would find them from the importing file: its own folder
when it is a script, then its ancestors, the project root and ``src/``; folders without
``__init__.py`` (namespace packages, script-relative imports) link too.

Module-level code inside ``if __name__ == "__main__":`` runs only when that file is the
program: edges from such code carry ``guard=True`` and :meth:`CallGraph.program_reach`
follows them only out of the program's own file.
"""

from __future__ import annotations

import posixpath
from typing import Any, Iterable, Iterator

import attrs

from dftpass.core import emitter
from dftpass.core.summary import MODULE_SCOPE, CallSite, ClassSummary, FileSummary, FunctionSummary
from dftpass.core.values import ValueHints, Values


def fid(relpath: str, qualname: str) -> str:
    return f"{relpath}::{qualname}"


@attrs.define(frozen=True)
class TrainingHints:
    """Calls that compute gradients or apply an optimizer update, by framework plugins.

    An entry is a qualified function (``jax.value_and_grad``) or ``.method``: that method on
    any object that is not an imported module (``.apply_gradients``; ``np.gradient`` is not
    ``tape.gradient``). ``optimizer_methods`` are methods of an optimizer object (``step``,
    flax's ``optimizer.update(model, grads)``), whose receiver must look like an optimizer."""

    gradient_calls: frozenset[str] = frozenset()
    optimizer_calls: frozenset[str] = frozenset()
    optimizer_methods: frozenset[str] = frozenset({"step"})


@attrs.define
class ResolutionHints:
    """Library knowledge the resolution needs; filled by :mod:`dftpass.plugins.knowledge`."""

    #: last names of calls that run a function in a new process (``spawn``, ``Process``)
    process_launchers: frozenset[str] = frozenset()
    #: keywords whose function runs in other processes (``worker_init_fn``)
    process_keywords: frozenset[str] = frozenset()
    #: base classes (qualified, or matched on their last components) of torch-style modules
    module_bases: tuple[str, ...] = ()
    #: qualified prefixes whose classes are modules (``torch.nn.``: ``nn.Transformer``)
    module_base_prefixes: tuple[str, ...] = ()
    #: what calling a module instance runs when its class has no ``__call__`` (``forward``)
    module_call_methods: tuple[str, ...] = ()
    #: base classes of the models a framework's own loop calls (``LightningModule``): in a
    #: project that has such models, the other modules are their parts
    loop_models: tuple[str, ...] = ()
    #: base classes of map-style data sets (``torch.utils.data.Dataset``): a data loader
    #: calls their ``__getitem__`` once per sample
    dataset_bases: tuple[str, ...] = ()
    #: base classes of iterable data sets (``IterableDataset``): a data loader iterates them
    iterable_dataset_bases: tuple[str, ...] = ()
    values: ValueHints = attrs.field(factory=ValueHints)
    #: what a training step looks like beyond PyTorch's ``backward()`` / ``optimizer.step()``
    #: (``dftpass_knowledge``: ``gradient_calls``, ``optimizer_calls``, ``optimizer_methods``)
    training: TrainingHints = attrs.field(factory=TrainingHints)
    #: the library facts the recognisers read (:class:`dftpass.plugins.knowledge.Facts`, from
    #: every plugin's ``dftpass_knowledge``); None: dftpass's own
    facts: object = None


@attrs.define
class Entry:
    """A way the program starts: one process runs from here."""

    #: "main-guard" | "console-script" | "module-script" | "process-target"
    kind: str
    relpath: str
    line: int
    #: the guard's index in FileSummary.main_guards (main-guard entries)
    guard: int | None = None
    #: the project function the entry runs: a console-script or process target; for a
    #: main guard, the one function its single statement runs (``sys.exit(main())``)
    function: str | None = None
    #: the console script's name, or the launcher's text for a process target
    name: str = ""

    @property
    def key(self) -> str:
        return f"{self.kind}:{self.relpath}:{self.line}"


@attrs.define
class CallGraph:
    graph: Any  # networkx.DiGraph (imported when a graph is built: ~75 ms)
    files: dict[str, FileSummary]
    functions: dict[str, tuple[FileSummary, FunctionSummary]]
    classes: dict[str, tuple[FileSummary, ClassSummary]]
    #: every plausible module name -> the files it may name (see :meth:`module_file`)
    modules: dict[str, list[str]]
    #: class id -> ids of the functions that instantiate it
    instantiated_in: dict[str, set[str]]
    entries: list[Entry]
    #: (caller id, call index) -> the callee ids it may run
    resolved: dict[tuple[str, int], tuple[str, ...]]
    #: (caller id, call index, target function id) for functions run in another process
    spawns: list[tuple[str, int, str]] = attrs.field(factory=list)
    hints: ResolutionHints = attrs.field(factory=ResolutionHints)
    #: relpath -> names defined at the top of the module: name -> function or class id
    _top: dict[str, dict[str, str]] = attrs.field(factory=dict)
    _subclasses: dict[str, list[str]] = attrs.field(factory=dict)
    _methods: dict[str, list[str]] = attrs.field(factory=dict)
    _sites: dict[str, list[tuple[str, int]]] = attrs.field(factory=dict)
    _module_cache: dict[tuple[str, str], str | None] = attrs.field(factory=dict)
    _mro_cache: dict[str, list[str]] = attrs.field(factory=dict)
    _subclass_cache: dict[str, list[str]] = attrs.field(factory=dict)
    values: Values | None = None
    #: facts derived from the whole graph once, by name (``"stepping"``: the functions that
    #: reach a training step): what would otherwise be walked again for every question
    memo: dict[str, Any] = attrs.field(factory=dict)

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

    def targets(self, caller: str, call_index: int) -> tuple[str, ...]:
        return self.resolved.get((caller, call_index), ())

    def call_target(self, caller: str, call_index: int) -> str | None:
        found = self.resolved.get((caller, call_index))
        return found[0] if found else None

    def calls_with_targets(self, caller: str) -> Iterator[tuple[CallSite, tuple[str, ...]]]:
        fn = self.fn(caller)
        for i, call in enumerate(fn.calls):
            yield call, self.resolved.get((caller, i), ())

    def call_sites_of(self, callee: str) -> Iterator[tuple[str, CallSite]]:
        """Every resolved call of ``callee``: (caller id, call site)."""
        for caller, i in self._sites.get(callee, ()):
            yield caller, self.fn(caller).calls[i]

    def call_in(self, function_id: str, callee: str) -> CallSite | None:
        """The first call of ``callee`` (dotted text) in the function."""
        for call in self.fn(function_id).calls:
            if call.callee == callee:
                return call
        return None

    def module_scope_id(self, fs: FileSummary) -> str:
        return fid(fs.relpath, MODULE_SCOPE)

    def top_names(self, relpath: str) -> dict[str, str]:
        return self._top.get(relpath, {})

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

    # -- classes -----------------------------------------------------------------------------
    def class_id(self, fs: FileSummary, qualname: str) -> str:
        return fid(fs.relpath, qualname)

    def class_of_method(self, function_id: str) -> str | None:
        fs, fn = self.functions[function_id]
        return fid(fs.relpath, fn.cls) if fn.cls else None

    def is_bound_method(self, function_id: str) -> bool:
        """A method called through an instance or class: its first parameter is bound."""
        fn = self.fn(function_id)
        return bool(fn.cls) and fn.positional[:1] in (("self",), ("cls",)) and \
            not any(d.rsplit(".", 1)[-1] == "staticmethod" for d in fn.decorators)

    def nested_function(self, fs: FileSummary, fn: FunctionSummary, name: str) -> str | None:
        """A function ``name`` defined inside ``fn`` or a function enclosing it (a closure
        such as timm's ``_backward`` inside ``train_one_epoch``)."""
        return self._nested(fs, fn, name, self.functions)

    def nested_class(self, fs: FileSummary, fn: FunctionSummary, name: str) -> str | None:
        """A class ``name`` defined inside ``fn`` or a function enclosing it (a data set class
        defined in the training function)."""
        return self._nested(fs, fn, name, self.classes)

    @staticmethod
    def _nested(fs: FileSummary, fn: FunctionSummary, name: str, defined) -> str | None:
        qualname = fn.qualname
        while not fn.is_module and qualname:
            found = fid(fs.relpath, f"{qualname}.<locals>.{name}")
            if found in defined:
                return found
            qualname = qualname.rsplit(".<locals>.", 1)[0] if ".<locals>." in qualname else ""
        return None

    def enclosing_function(self, function_id: str) -> str | None:
        """The function a nested function is defined in (its closure), if any."""
        fs, fn = self.functions[function_id]
        if ".<locals>." not in fn.qualname:
            return None
        parent = fid(fs.relpath, fn.qualname.rsplit(".<locals>.", 1)[0])
        return parent if parent in self.functions else None

    def mro(self, class_id: str) -> list[str]:
        """The class and its project base classes, nearest first (depth-first, no duplicates)."""
        if class_id in self._mro_cache:
            return self._mro_cache[class_id]
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
        self._mro_cache[class_id] = seen
        return seen

    def subclasses(self, class_id: str) -> list[str]:
        """Project classes that derive from ``class_id``, directly or not (cached: a base
        class of a large library has hundreds, and dispatch asks for them often)."""
        if class_id in self._subclass_cache:
            return self._subclass_cache[class_id]
        found: dict[str, None] = {}
        stack = list(self._subclasses.get(class_id, ()))
        while stack:
            cid = stack.pop()
            if cid not in found and cid != class_id:
                found[cid] = None
                stack.extend(self._subclasses.get(cid, ()))
        self._subclass_cache[class_id] = list(found)
        return self._subclass_cache[class_id]

    def methods_of(self, class_id: str) -> list[str]:
        return self._methods.get(class_id, [])

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

    def in_model_class(self, function_id: str) -> bool:
        """The function is a method of a torch-style module class (:meth:`is_module_class`)."""
        owner = self.class_of_method(function_id)
        return owner is not None and self.is_module_class(owner)

    def is_module_class(self, class_id: str) -> bool:
        """A torch-style module: a subclass of ``nn.Module`` or of any class of ``torch.nn``
        (``nn.Transformer``, ``nn.Sequential``), directly or through project classes."""
        if self.has_base(class_id, self.hints.module_bases):
            return True
        return any(b.startswith(self.hints.module_base_prefixes) and b.rsplit(".", 1)[-1][:1].isupper()
                   for b in self.external_bases(class_id))

    def method(self, class_id: str, name: str, skip_self: bool = False) -> str | None:
        for cid in self.mro(class_id)[1 if skip_self else 0:]:
            fs, cs = self.classes[cid]
            if name in cs.methods:
                return fid(fs.relpath, cs.methods[name])
        return None

    def dispatch(self, class_id: str, name: str) -> list[str]:
        """What ``obj.name()`` may run for an object of ``class_id`` or a subclass: the
        method found through the bases, and every subclass's override."""
        out = []
        found = self.method(class_id, name)
        if found:
            out.append(found)
        for sub in self.subclasses(class_id):
            fs, cs = self.classes[sub]
            if name in cs.methods:
                override = fid(fs.relpath, cs.methods[name])
                if override not in out:
                    out.append(override)
        return out

    def instance_call(self, class_id: str) -> str | None:
        """What calling an instance runs: ``__call__``, or for a module the method its
        framework calls (``forward``; :attr:`ResolutionHints.module_call_methods`)."""
        found = self.method(class_id, "__call__")
        if found or not self.is_module_class(class_id):
            return found
        return next((m for m in map(lambda name: self.method(class_id, name), self.hints.module_call_methods)
                     if m), None)

    # -- modules -----------------------------------------------------------------------------
    def module_file(self, name: str, importer: str | None = None) -> str | None:
        """The project file module ``name`` names, seen from the file ``importer``."""
        candidates = self.modules.get(name)
        if not candidates:
            return None
        if len(candidates) == 1:
            return candidates[0]
        importer_dir = posixpath.dirname(importer) if importer else ""
        key = (name, importer_dir)
        if key not in self._module_cache:
            self._module_cache[key] = min(candidates, key=lambda c: (_root_rank(c, name, importer_dir), c))
        return self._module_cache[key]

    def _module_attr(self, module: str, attr: str, importer: str | None, depth: int) -> str | None:
        relpath = self.module_file(module, importer)
        if relpath is None:
            return None
        found = self._top[relpath].get(attr)
        if found:
            return found
        # re-exported name: follow the module's own import
        target = self.files[relpath].imports.get(attr)
        if target and target != f"{module}.{attr}":
            return self._resolve_qualified(target, relpath, depth + 1)
        return None

    def _resolve_qualified(self, qualified: str, importer: str | None = None, depth: int = 0) -> str | None:
        """``pkg.engine.train`` -> the project function/class id, if it is in the project."""
        if depth > 4:
            return None
        parts = qualified.split(".")
        for cut in range(len(parts) - 1, 0, -1):
            module = ".".join(parts[:cut])
            if self.module_file(module, importer) is not None:
                rest = parts[cut:]
                if len(rest) == 1:
                    return self._module_attr(module, rest[0], importer, depth)
                if len(rest) == 2:  # Class.method
                    cls = self._module_attr(module, rest[0], importer, depth)
                    if cls and cls in self.classes:
                        return self.method(cls, rest[1])
                return None
        return None

    def resolve_name(self, fs: FileSummary, name: str) -> str | None:
        """A bare or dotted name as written at the top level of ``fs`` (``collate``,
        ``utils.collate``) -> the project function or class it names, or None."""
        return self._resolve_name(fs, name)

    def _resolve_name(self, fs: FileSummary, name: str) -> str | None:
        """A bare or dotted name as written in ``fs`` -> project function/class id."""
        head, _, rest = name.partition(".")
        top = self._top.get(fs.relpath, {})
        if not rest and head in top:
            return top[head]
        if head in fs.imports:
            target = fs.imports[head] + ("." + rest if rest else "")
            return self._resolve_qualified(target, fs.relpath)
        if rest:
            cls = self._resolve_name(fs, head)
            if cls and cls in self.classes and "." not in rest:
                return self.method(cls, rest)
        return None

    # -- programs ----------------------------------------------------------------------------
    def program_reach(self, entry: Entry, imports: bool = True) -> set[str]:
        """The functions one run of ``entry`` may execute in its own process: what the entry
        calls, through ``call``, ``ref`` and ``include`` edges, and (``imports``) the top
        levels of the modules it imports and what they call. Code in an ``if __name__ ==
        "__main__":`` block runs only in the program's own file, and only when the program
        was started as that file (not as a console script or process target)."""
        own_module = fid(entry.relpath, MODULE_SCOPE)
        guard_runs = entry.kind in ("main-guard", "module-script")
        starts = {own_module} | ({entry.function} if entry.function else set())
        seen = set(starts)
        stack = list(starts)
        while stack:
            node = stack.pop()
            for _, target, data in self.graph.out_edges(node, data=True):
                if data.get("guard") and not (guard_runs and node == own_module):
                    continue
                if not imports and data.get("kind") == "import":
                    continue
                if target not in seen:
                    seen.add(target)
                    stack.append(target)
        return seen


def _root_rank(candidate: str, name: str, importer_dir: str) -> int:
    """How plausible it is that ``candidate`` is module ``name`` seen from ``importer_dir``:
    lower is likelier. The root is the folder the module path is counted from."""
    depth = name.count(".") + 1
    parts = candidate.split("/")
    if parts[-1] == "__init__.py":
        parts = parts[:-1]
    root = "/".join(parts[: len(parts) - depth])
    if root == importer_dir:
        return 0
    if not root or importer_dir == root or importer_dir.startswith(root + "/"):
        return 1 + importer_dir.count("/") - root.count("/") if root else 50
    if root == "src":
        return 60
    return 100 + root.count("/")


def _module_names(relpath: str) -> list[str]:
    """Every dotted name a file may be imported under, counted from any of its folders."""
    parts = relpath[:-3].split("/") if relpath.endswith(".py") else relpath.split("/")
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return [".".join(parts[k:]) for k in range(len(parts)) if all(p.isidentifier() for p in parts[k:])]


# --------------------------------------------------------------------------------------
# resolution
# --------------------------------------------------------------------------------------


def _first_pass(graph: CallGraph, fs: FileSummary, fn: FunctionSummary, call: CallSite) -> tuple[list[str], bool]:
    """Targets that need no value flow: names, ``self``, ``super()``, ``cls``.
    Returns (callee ids, is an instantiation)."""
    callee = call.callee
    if "?" in callee:
        return [], False
    parts = callee.split(".")
    if fn.cls and not fn.is_module and len(parts) == 2 and parts[0] in ("self", "cls", "super()"):
        cid = fid(fs.relpath, fn.cls)
        if parts[0] == "super()":
            found = graph.method(cid, parts[1], skip_self=True)
            return ([found] if found else []), False
        return graph.dispatch(cid, parts[1]), False
    if callee == "cls" and fn.cls and not fn.is_module:
        cid = fid(fs.relpath, fn.cls)
        init = graph.method(cid, "__init__")
        return [init or cid], True
    if "()" in callee:
        return [], False
    if "." not in callee:
        nested = graph.nested_function(fs, fn, callee)
        if nested:
            return [nested], False
    target = graph._resolve_name(fs, callee)
    if target:
        if target in graph.classes:
            return [graph.method(target, "__init__") or target], True
        return [target], False
    return [], False


def _add_call(graph: CallGraph, caller: str, i: int, targets: Iterable[str], guard: bool) -> None:
    found = tuple(t for t in dict.fromkeys(targets) if t in graph.functions)
    if not found:
        return
    graph.resolved[(caller, i)] = found
    for t in found:
        graph._sites.setdefault(t, []).append((caller, i))
        _edge(graph, caller, t, "call", guard)


def _edge(graph: CallGraph, a: str, b: str, kind: str, guard: bool = False) -> None:
    """An edge; a plain call outside a ``__main__`` block carries no attributes (most of a
    large project's 90,000 edges: ~13 MB of attribute dicts on torch)."""
    g = graph.graph
    if g.has_edge(a, b):
        data = g.edges[a, b]
        if data.get("guard") and not guard:
            del data["guard"]  # also called outside the block: it runs on import too
    else:
        attributes = {} if kind == "call" else {"kind": kind}
        if guard:
            attributes["guard"] = True
        g.add_edge(a, b, **attributes)


def _function_refs(graph: CallGraph, fs: FileSummary, fn: FunctionSummary, texts: Iterable[str | None]) -> list[str]:
    out = []
    for text in texts:
        if not text or "(" in text or "?" in text or text.startswith("<"):
            continue
        if fn.cls and not fn.is_module and text.startswith("self.") and text.count(".") == 1:
            found = graph.method(fid(fs.relpath, fn.cls), text[5:])
        else:
            found = graph._resolve_name(fs, text)
        if found and found in graph.functions:
            out.append(found)
    return out


def _references(graph: CallGraph, caller: str, fs: FileSummary, fn: FunctionSummary) -> None:
    """Functions passed as values: ``ref`` edges, or spawns when a launcher runs them."""
    hints = graph.hints
    for i, call in enumerate(fn.calls):
        launcher = call.method in hints.process_launchers
        positional = _function_refs(graph, fs, fn, call.args)
        for name, value in call.keywords:
            for target in _function_refs(graph, fs, fn, [value]):
                if launcher or name in hints.process_keywords:
                    graph.spawns.append((caller, i, target))
                else:
                    _edge(graph, caller, target, "ref", call.in_main_guard)
        for target in positional:
            if launcher:
                graph.spawns.append((caller, i, target))
            else:
                _edge(graph, caller, target, "ref", call.in_main_guard)


def _bind_star_imports(graph: CallGraph) -> None:
    """``from helpers import *`` binds helpers' public names in the importing file: its
    functions, classes and globals, and what it imported itself (``from model import *`` in
    ``generate.py`` re-exports model's names to a file that star-imports generate). Repeated
    until nothing changes, so chains of star imports resolve."""
    pending = [fs for fs in graph.files.values() if fs.star_imports]
    changed = True
    while changed and pending:
        changed = False
        for fs in pending:
            for module in fs.star_imports:
                target = graph.module_file(module, fs.relpath)
                if target is None or target == fs.relpath:
                    continue
                source = graph.files[target]
                public = {name: f"{module}.{name}" for name in graph.top_names(target)}
                public.update((a.target, f"{module}.{a.target}") for a in source.module_scope.assigns
                              if "." not in a.target)
                public.update(source.imports)
                for name, qualified in public.items():
                    if name.startswith("_") or name in fs.imports or name in graph.top_names(fs.relpath):
                        continue
                    fs.imports[name] = qualified
                    changed = True


def build_callgraph(summaries: Iterable[FileSummary], console_scripts: Iterable[tuple[str, str, str]] = (),
                    hints: ResolutionHints | None = None) -> CallGraph:
    import networkx as nx

    files = {fs.relpath: fs for fs in summaries}
    graph = CallGraph(graph=nx.DiGraph(), files=files, functions={}, classes={}, modules={},
                      instantiated_in={}, entries=[], resolved={}, hints=hints or ResolutionHints())
    for fs in files.values():
        names = [fs.module, *(n for n in _module_names(fs.relpath) if n != fs.module)]
        for name in names:
            graph.modules.setdefault(name, []).append(fs.relpath)
        for fn in fs.functions:
            f = fid(fs.relpath, fn.qualname)
            graph.functions[f] = (fs, fn)
            graph.graph.add_node(f)
        top = graph._top[fs.relpath] = {}
        for fn in fs.functions:
            if fn.cls is None and "." not in fn.qualname and not fn.is_module:
                top[fn.qualname] = fid(fs.relpath, fn.qualname)
        for cs in fs.classes:
            cid = fid(fs.relpath, cs.qualname)
            graph.classes[cid] = (fs, cs)
            graph._methods[cid] = [fid(fs.relpath, q) for q in cs.methods.values()]
            if "." not in cs.qualname:
                top[cs.qualname] = cid
    _bind_star_imports(graph)
    for cid, (fs, cs) in graph.classes.items():
        for base in cs.bases:
            target = graph._resolve_name(fs, base)
            if target in graph.classes and target != cid:
                graph._subclasses.setdefault(target, []).append(cid)

    # importing a project module (or exec-ing a file) runs its top-level code
    included: set[str] = set()
    imported: set[str] = set()
    for fs in files.values():
        importer = fid(fs.relpath, MODULE_SCOPE)
        for module in fs.imported_modules:
            target = graph.module_file(module, fs.relpath)
            if target and target != fs.relpath:
                imported.add(target)
                _edge(graph, importer, fid(target, MODULE_SCOPE), "import")
        for path in fs.exec_includes:
            for candidate in (posixpath.normpath(posixpath.join(posixpath.dirname(fs.relpath), path)),
                              posixpath.normpath(path)):
                if candidate in files and candidate != fs.relpath:
                    included.add(candidate)
                    _edge(graph, importer, fid(candidate, MODULE_SCOPE), "include")
                    break

    # pass 1: names, self, super, cls
    pending: list[tuple[str, int]] = []
    for caller, (fs, fn) in graph.functions.items():
        for i, call in enumerate(fn.calls):
            targets, instantiation = _first_pass(graph, fs, fn, call)
            if targets:
                _note_instantiation(graph, caller, targets, instantiation)
                _add_call(graph, caller, i, targets, call.in_main_guard)
            elif "?" not in call.callee:
                pending.append((caller, i))
        _references(graph, caller, fs, fn)

    # pass 2: what values flow into receivers (factories, attributes, parameters)
    graph.values = Values(graph, graph.hints.values)
    for caller, i in pending:
        fs, fn = graph.functions[caller]
        call = fn.calls[i]
        head = call.callee.split(".")[0]
        if head in fs.imports and head not in {a.target for a in fn.assigns} and head not in fn.params:
            continue  # a library call (torch.save, np.load)
        targets = graph.values.call_targets(caller, call.callee)
        if targets:
            instantiation = any(t.endswith(".__init__") for t in targets) and "." not in call.callee
            _note_instantiation(graph, caller, list(targets), instantiation)
            _add_call(graph, caller, i, sorted(targets), call.in_main_guard)

    _resolve_reexported_api(graph)
    graph.entries = _entries(graph, console_scripts, imported | included)
    return graph


def _note_instantiation(graph: CallGraph, caller: str, targets: list[str], instantiation: bool) -> None:
    if not instantiation:
        return
    for target in targets:
        cls = target if target in graph.classes else graph.class_of_method(target)
        if cls:
            graph.instantiated_in.setdefault(cls, set()).add(caller)


def _resolve_reexported_api(graph: CallGraph) -> None:
    """dftracer names that reach a file through project modules (``from pkg.util import
    dft_ai``), recorded on the file's summary so every rule recognises hand annotations."""
    known = {rel: emitter.aliases(fs) for rel, fs in graph.files.items()}
    sources = {rel for rel, names in known.items() if names}
    for _ in range(4):  # re-exports of re-exports
        changed = False
        for fs in graph.files.values():
            for local, qualified in fs.imports.items():
                if local in fs.reexported_api or "." not in qualified:
                    continue
                module, _, attr = qualified.rpartition(".")
                source = graph.module_file(module, fs.relpath)
                if source is None or source == fs.relpath or source not in sources:
                    continue
                names = known[source]
                symbol = names.get(attr)
                if symbol is None:  # ``dft_ai = ai`` at the top of the source module
                    for a in graph.files[source].module_scope.assigns:
                        if a.target == attr and a.value in names:
                            symbol = names[a.value]
                if symbol is not None and not emitter.api_symbol(qualified):
                    fs.reexported_api[local] = symbol
                    known[fs.relpath] = {**known[fs.relpath], local: symbol}
                    sources.add(fs.relpath)
                    changed = True
        if not changed:
            break


def _own_statements(fs: FileSummary, scope, guard) -> int:
    """The statements of a ``__main__`` block that are the program's: dftpass's own lifecycle
    (``_dft_log = dftracer.get_instance()``, the ``initialize_log`` block,
    ``atexit.register(_dft_log.finalize)``) does not count, so an annotated block that runs
    ``main()`` still has ``main`` as its entry function (a second run sees what the first saw)."""
    from dftpass.core.emitter import recognize

    ours = set()
    for call in scope.calls:
        if call.stmt[: len(guard.stmt)] == guard.stmt and len(call.stmt) > len(guard.stmt):
            if recognize(fs, call.callee) is not None or any(a and a.startswith("_dft") for a in call.args):
                ours.add(call.stmt[len(guard.stmt)])
    for a in scope.assigns:
        if a.stmt[: len(guard.stmt)] == guard.stmt and len(a.stmt) > len(guard.stmt) and a.target.startswith("_dft"):
            ours.add(a.stmt[len(guard.stmt)])
    return guard.body_len - len({s for s in ours if s[0] == "body"})


def _entries(graph: CallGraph, console_scripts: Iterable[tuple[str, str, str]], imported: set[str]) -> list[Entry]:
    entries: list[Entry] = []
    for fs in graph.files.values():
        module_id = fid(fs.relpath, MODULE_SCOPE)
        scope = fs.module_scope
        for k, guard in enumerate(fs.main_guards):
            runs: set[str] = set()
            for i, call in enumerate(scope.calls):
                if call.in_main_guard and call.stmt[: len(guard.stmt)] == guard.stmt:
                    runs.update(t for t in graph.targets(module_id, i) if not t.endswith(".__init__"))
            single = _own_statements(fs, scope, guard) == 1 and len(runs) == 1
            entries.append(Entry("main-guard", fs.relpath, guard.line, guard=k,
                                 function=next(iter(runs)) if single else None))
        script = not fs.main_guards and fs.top_level_work and fs.relpath not in imported and (
            not fs.relpath.endswith("__init__.py"))
        if script:
            entries.append(Entry("module-script", fs.relpath, fs.script_line))
    seen_scripts = set()
    for name, module, func in console_scripts:
        target = graph._resolve_qualified(f"{module}.{func}") if func else None
        relpath = graph.module_file(module)
        if target and relpath and target not in seen_scripts:
            seen_scripts.add(target)
            entries.append(Entry("console-script", relpath, graph.fn(target).line, function=target, name=name))
    seen_targets = set()
    for caller, i, target in graph.spawns:
        if target in seen_targets:
            continue
        seen_targets.add(target)
        fs = graph.file_of(target)
        call = graph.fn(caller).calls[i]
        entries.append(Entry("process-target", fs.relpath, graph.fn(target).line, function=target, name=call.callee))
    return entries
