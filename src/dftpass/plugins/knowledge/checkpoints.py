"""Checkpoints: what ML-R18 (regions) and ML-R26 (I/O phases) agree on, the calls that save
and load state, and the plan of checkpoint regions."""

from __future__ import annotations

import re
from typing import NamedTuple

import attrs

from dftpass.core.callgraph import CallGraph
from dftpass.core.emitter import aliases, is_node
from dftpass.core.summary import CallSite, FileSummary, FunctionSummary, StmtPath
from dftpass.core.values import kind
from dftpass.plugins.knowledge.facts import facts
from dftpass.plugins.knowledge.models import model_classes, MODEL_NAME
from dftpass.plugins.knowledge.statements import calls_at, sibling, unwrappable
from dftpass.plugins.knowledge.steps import _last, assigned_values, does_step, evaluates, trains


#: ``from_pretrained`` receivers that load no model state
NOT_STATE_PRETRAINED = re.compile(r"(?i)token|processor|config|feature_?extractor|scheduler")
#: receivers of Accelerate's ``save_state`` / ``load_state`` / ``save`` (Facts.accelerator_methods)
ACCELERATOR_NAME = re.compile(r"(?i)(^|_)accelerator$")
#: methods whose result is model state (``model.state_dict()``, ``accelerator.get_state_dict(m)``,
#: ``get_model_state_dict(m)``, ``optim_state_dict``, a project's ``get_state()``, RNG states);
#: not a metric's ``update_state``/``reset_states``
STATE_METHOD = re.compile(r"(?i)state_?dict|^get_(\w+_)?state$|rng_state|getstate")
CHECKPOINT_NODES = {"save": "checkpoint.capture", "load": "checkpoint.restart"}


class CheckpointOp(NamedTuple):
    """One call that saves or loads model state."""

    #: the call's index in its function's calls
    index: int
    kind: str  # "save" | "load"
    #: what is called, as shown in messages (``torch.save``, ``ckpt.save``)
    api: str
    #: a statement region may time it (False: ``from_pretrained``, for a function's region only)
    inline: bool
    #: how ML-R26 measures its object (``state``, ``tensors``), None: not a call ML-R26 times
    measure: str | None = None
    #: the object written, or the name the result is bound to (``x = torch.load(...)``)
    obj: str | None = None


def _mentions(text: str | None, names: set[str]) -> bool:
    return bool(text) and any(text == n or text.startswith((n + ".", n + "[", n + "(")) for n in names)


def _arg(call: CallSite, position: int, keyword: str) -> str | None:
    if len(call.args) > position:
        return call.args[position]
    return dict(call.keywords).get(keyword)


def library_receiver(graph: CallGraph, fs: FileSummary, fn: FunctionSummary, receiver: str) -> list[str]:
    """What builds the receiver, qualified: ``ckpt.save`` after ``ckpt = tf.train.Checkpoint(...)``
    -> ``tensorflow.train.Checkpoint()``; a chained ``tf.train.Checkpoint(m).save`` too."""
    if receiver.endswith("()"):
        return [graph.qualify(fs, receiver)]
    return [graph.qualify(fs, v) for v in assigned_values(graph, fs, fn, receiver) if v and v.endswith("()")]


def project_function_names(graph: CallGraph) -> frozenset[str]:
    """The names of the project's functions and methods (a method call the call graph could
    not resolve may be one of them)."""
    return frozenset(fn.name for _, fn in graph.functions.values())


def checkpoint_call(graph: CallGraph, function_id: str, index: int,
                    names: frozenset[str] | None = None) -> tuple[str, str, bool] | None:
    """(``save`` | ``load``, the API as qualified, whether a statement region may time it) if call
    ``index`` of the function is a library call that saves or loads a checkpoint, else None. A
    call of a project function (its own ``save_checkpoint``) is not: its body is looked at.
    ``names``: :func:`project_function_names` (computed when not given)."""
    fs, fn = graph.functions[function_id]
    call = fn.calls[index]
    known = facts(graph)
    if call.method not in known.checkpoint_last_names or call.in_comprehension or graph.targets(function_id, index):
        return None
    qualified = graph.qualify(fs, call.callee)
    found = known.checkpoint_functions.get(qualified)
    if found:
        return found, qualified, True
    if not call.receiver:
        return None
    method = call.method
    for built in library_receiver(graph, fs, fn, call.receiver):
        for prefix, methods in known.checkpoint_objects:
            if built.startswith(prefix) and method in methods:
                return methods[method], f"{built.rstrip('()')}.{method}", True
    if method in (names if names is not None else project_function_names(graph)):
        return None  # the project's own method of that name, not resolved
    if method in known.accelerator_methods and ACCELERATOR_NAME.search(_last(call.receiver)):
        return known.accelerator_methods[method], f"accelerate.Accelerator.{method}", True
    if method == "save" and MODEL_NAME.search(_last(call.receiver)) and any(
            m.split(".")[0] in ("keras", "tensorflow", "tf_keras") for m in fs.imported_modules):
        return "save", "keras.Model.save", True  # ``model.save(path)`` of a Keras model
    if method in known.checkpoint_methods:
        if method == "from_pretrained":
            first = call.args[0] if call.args else None
            if not first or first.startswith(("'", '"')) or NOT_STATE_PRETRAINED.search(_last(call.receiver)):
                return None  # a hub model name, a tokenizer or a configuration: not model state
            return "load", f"{call.callee}", False
        return known.checkpoint_methods[method], call.callee, True
    return None


def _state_calls(fn: FunctionSummary, stmt: StmtPath) -> bool:
    return any(c.stmt == stmt and STATE_METHOD.search(c.method) for c in fn.calls)


def _is_model(graph: CallGraph, function_id: str, text: str) -> bool:
    if "(" in text or "[" in text:
        return False
    return bool(model_classes(graph, function_id, text)) or bool(MODEL_NAME.search(_last(text)))


def saves_state(graph: CallGraph, function_id: str, index: int, obj: str | None) -> bool:
    """Whether ``torch.save(obj, f)`` (call ``index``) writes model state, not other tensors.

    State: an object built in the statement from ``state_dict()``-like calls
    (``torch.save({"model": model.state_dict()}, f)``, ``torch.save(model.state_dict(), f)``);
    a name assigned from such calls, or in a function that makes them (``ckpt = {}`` then
    ``ckpt["model"] = model.state_dict()``); a model (``torch.save(model, f)``); or an object
    the function is handed (a parameter, an attribute: DLIO's ``save_state(self, suffix,
    state)``) when the function does not evaluate. Not state: ``torch.save(preds, f)`` of a
    name computed otherwise (``preds = torch.cat(outputs)``), or anything an evaluation
    function (``no_grad``, ``.eval()``) is handed."""
    fs, fn = graph.functions[function_id]
    call = fn.calls[index]
    if obj is None or "(" in obj or "?" in obj:
        return _state_calls(fn, call.stmt) or bool(obj and STATE_METHOD.search(_last(obj)))
    name = obj.split("[", 1)[0]
    if _is_model(graph, function_id, name):
        return True
    assigns = [a for a in fn.assigns if a.target == name]
    any_state = any(STATE_METHOD.search(c.method) for c in fn.calls)
    if assigns:
        return any_state or any(a.value and STATE_METHOD.search(_last(a.value)) for a in assigns)
    return any_state or not evaluates(fn, graph)


def _dataset_method(graph: CallGraph, function_id: str) -> bool:
    class_id = graph.class_of_method(function_id)
    if class_id is None or class_id not in graph.classes:
        return False
    return any("__getitem__" in graph.classes[c][1].methods for c in graph.mro(class_id)) or \
        graph.has_base(class_id, ("Dataset", "IterableDataset", "data.Dataset", "torch.utils.data.Dataset"))


def loads_state(graph: CallGraph, function_id: str, index: int, saver_classes: set[str]) -> bool:
    """Whether ``x = torch.load(f)`` (call ``index``) reads model state, not data: what it reads
    flows into ``load_state_dict`` (``model.load_state_dict(torch.load(f))``, ``sd =
    ckpt["model"]`` then ``model.load_state_dict(sd)``); or the function is a method of a class
    that also saves state (DLIO's ``load_state``); or it binds a model the same code saved whole
    (``torch.save(model, f)`` ... ``model = torch.load(f)``); or it returns what it read to a
    caller that calls ``load_state_dict``. Never in a data set (its ``__getitem__`` reads
    samples)."""
    if _dataset_method(graph, function_id):
        return False
    fs, fn = graph.functions[function_id]
    call = fn.calls[index]
    load_states = facts(graph).load_state_methods
    if any(c.stmt == call.stmt and c.method in load_states for c in fn.calls):
        return True
    class_id = graph.class_of_method(function_id)
    if class_id is not None and saver_classes & set(graph.mro(class_id)):
        return True
    # ``model = torch.load(f)`` where the same code saved the whole model (``torch.save(model,
    # f)``: word_language_model restores its best model so): the model comes back
    saved = {c.args[0] for c in fn.calls if c.args and c.args[0] and graph.qualify(fs, c.callee) == "torch.save"}
    if set(call.assigned_to) & saved and any(_is_model(graph, function_id, t) for t in call.assigned_to):
        return True
    tracked = set(call.assigned_to)
    for item in sorted([*fn.calls, *fn.assigns], key=lambda x: x.line):
        if item.line < call.line:
            continue
        if isinstance(item, CallSite):
            if item.method in load_states and any(
                    _mentions(t, tracked) for t in (*item.args, *(v for _, v in item.keywords))):
                return True
        elif item.target not in tracked and (_mentions(item.value, tracked) or any(
                _mentions(t, tracked) for t in item.call_args)):
            tracked.add(item.target)
    returned = call.stmt_kind == "return" or any(_mentions(r, set(call.assigned_to)) for r in fn.returns if r)
    if returned:
        return any(c.method in load_states for caller in graph.callers(function_id)
                   if caller in graph.functions for c in graph.fn(caller).calls)
    return False


#: the Hugging Face methods that write or read a model's weights in a folder (ML-R26 times them
#: as the checkpoint's I/O, with the module's tensors as ``image_size``)
PRETRAINED_IO = frozenset({"save_pretrained", "from_pretrained"})


def checkpoint_ops(graph: CallGraph, function_id: str, saver_classes: set[str] | None = None,
                   names: frozenset[str] | None = None, loads: bool = True) -> list[CheckpointOp]:
    """The calls of a function that save or load model state (library calls; a project function
    that does is found by its own body). ``saver_classes``: the classes with a method that
    saves state (:func:`checkpoint_plan` computes them); ``loads=False``: saves only."""
    fs, fn = graph.functions[function_id]
    names = names if names is not None else project_function_names(graph)
    known = facts(graph)
    out = []
    for i, call in enumerate(fn.calls):
        found = checkpoint_call(graph, function_id, i, names)
        if found is None:
            continue
        kind_, api, inline = found
        if kind_ == "load" and not loads:
            continue
        obj = None
        if api in known.save_object:
            obj = _arg(call, *known.save_object[api])
            if obj is None and call.args[:1] == (None,) and (varargs := _varargs(fn)):
                obj = f"*{varargs}"  # ``torch.save(*args, **kwargs)``: what the caller hands in
            if not saves_state(graph, function_id, i, obj):
                continue
        elif api in known.load_result:
            if not loads_state(graph, function_id, i, saver_classes or set()):
                continue
            exact = [a for a in fn.assigns if a.stmt == call.stmt and a.value == call.callee + "()"]
            obj = exact[0].target if len(exact) == 1 and len(call.assigned_to) == 1 else None
        measure = known.checkpoint_io_measure.get(api)
        if measure is None and call.method in PRETRAINED_IO:
            # ``model.save_pretrained(d)`` / ``m = Model.from_pretrained(d)``: the module's tensors
            measure = "module"
            obj = call.receiver if kind_ == "save" else (call.assigned_to[0] if len(call.assigned_to) == 1 else None)
        shown = call.callee if api.startswith(("keras.Model", "accelerate.")) or "." not in api else api
        out.append(CheckpointOp(i, kind_, shown, inline, measure, obj))
    return out


def _varargs(fn: FunctionSummary) -> str | None:
    """The name of the function's ``*args`` parameter, if it has one."""
    extra = [p for p in fn.params if p not in fn.positional and p not in fn.defaults]
    return extra[0] if extra else None


def _passes_state_through(fn: FunctionSummary, ops: list[CheckpointOp]) -> bool:
    """A save helper that writes what it is handed and builds no state itself
    (``save_on_master(*args, **kwargs)``: ``if is_main_process(): torch.save(*args, **kwargs)``):
    its callers decide what a checkpoint is."""
    handed = set(fn.params)
    if not ops or any(STATE_METHOD.search(c.method) for c in fn.calls):
        return False
    # only a wrapper of the library call: it forwards ``*args``, or writes what it is handed on
    # one rank only; a ``save_checkpoint(state, is_best, filename)`` that also copies the best
    # one keeps its own region (the scoreboard's experts put it there: docs/decisions.md)
    return all(op.kind == "save" and op.obj and op.obj.lstrip("*") in handed and (
        op.obj.startswith("*") or _under_rank_guards(fn, fn.calls[op.index].stmt)) for op in ops)


def flow_reach(graph: CallGraph, function_id: str) -> set[str]:
    """The functions a function may run in this process: calls and references, not imports."""
    seen: set[str] = set()
    stack = [function_id]
    g = graph.graph
    while stack:
        f = stack.pop()
        if f not in g:
            continue
        for t, data in g[f].items():
            if t not in seen and data.get("kind") not in ("import", "include"):
                seen.add(t)
                stack.append(t)
    seen.discard(function_id)
    return seen


def has_node_region(fs: FileSummary, fn: FunctionSummary, node: str) -> bool:
    """A region of ``node`` anywhere on or in the function: decorator, ``with``, ``start()``."""
    return any(is_node(fs, d, node) for d in fn.decorators) or any(is_node(fs, w, node) for w in fn.withs) or \
        any(is_node(fs, c.callee, node, "start") for c in fn.calls)


@attrs.define
class CheckpointSpan:
    """Statements of one block that save (or load) together: a region opens before ``first``
    and closes after ``last``."""

    function: str
    node: str
    first: StmtPath
    last: StmtPath
    line: int
    end_line: int
    ops: tuple[int, ...]
    why: str


@attrs.define
class CheckpointPlan:
    """Where the checkpoint regions go (ML-R18), and which checkpoint calls they cover (ML-R26)."""

    #: function id -> (node, why): a region around the whole function
    functions: dict[str, tuple[str, str]] = attrs.field(factory=dict)
    spans: list[CheckpointSpan] = attrs.field(factory=list)
    #: ``__init__`` ids of checkpointing classes -> why (``@ai.checkpoint.init``)
    inits: dict[str, str] = attrs.field(factory=dict)
    #: (function id, call index) -> the node of the region the call runs in
    covered: dict[tuple[str, int], str] = attrs.field(factory=dict)
    ops: dict[str, list[CheckpointOp]] = attrs.field(factory=dict)
    #: (function id, line, message): what was left without a region, and why
    notes: list[tuple[str, int, str]] = attrs.field(factory=list)


#: a function whose job is a checkpoint is short: longer ones (a ``setup()`` that also resumes)
#: get a statement region around their checkpoint calls instead
MAX_CHECKPOINT_FUNCTION_STMTS = 30
#: the test of an ``if`` that lets one process of a distributed job write (``if
#: dist.get_rank() == 0:``, ``if accelerator.is_main_process:``, ``if master_process:``): a
#: checkpoint under it still runs on every path of the job, the others waiting for it
RANK_TEST = re.compile(r"(?i)(^|\.)(get_rank|Get_rank|(local_|global_)?rank|is_(local_)?main_process|"
                       r"(is_)?master(_process)?|is_global_zero|is_world_process_zero|is_rank_zero)(\(\))?$")


def _under_rank_guards(fn: FunctionSummary, stmt: StmtPath) -> int:
    """How many ``if <rank test>:`` bodies hold ``stmt``."""
    return sum(1 for path, test, _ in fn.if_tests
               if test and RANK_TEST.search(test) and len(stmt) > len(path)
               and stmt[:len(path)] == path and stmt[len(path)][0] == "body")


def checkpoint_function(graph: CallGraph, function_id: str, ops: list[CheckpointOp]) -> str | None:
    """Why the function's job is not (only) the checkpoint its ``ops`` are (None: it is, and a
    region around all of it times the checkpoint)."""
    fs, fn = graph.functions[function_id]
    if fn.is_module:
        return "a script's top level"
    if fn.n_stmts > MAX_CHECKPOINT_FUNCTION_STMTS:
        return f"more than {MAX_CHECKPOINT_FUNCTION_STMTS} statements"
    depth = len(fn.body_first)
    for op in ops:
        call = fn.calls[op.index]
        if len(call.stmt) - depth - _under_rank_guards(fn, call.stmt) > len(call.withs) + len(call.loops):
            return "it saves or loads only on some paths (under an `if` or a `try`)"
    for i, call in enumerate(fn.calls):
        qualified = graph.qualify(fs, call.callee)
        if qualified in facts(graph).builders or _last(qualified) in facts(graph).builders:
            return f"it builds what training runs with ({call.callee}())"
        for t in graph.targets(function_id, i):
            owner = graph.class_of_method(t) if t.endswith(".__init__") else t
            if owner in graph.classes and graph.is_module_class(owner):
                return f"it builds a model ({call.callee}())"
    if does_step(graph, function_id) or any(
            does_step(graph, t) for t in flow_reach(graph, function_id) if t in graph.functions):
        return "it trains, evaluates or runs a model"
    return None


def checkpoint_plan(graph: CallGraph) -> CheckpointPlan:
    """Where checkpoint regions go.

    A function whose job is a checkpoint (:func:`checkpoint_function`; not a program's entry)
    gets a region around it, the innermost one only: a function that calls another such
    function (or one the project already annotated) is not marked, so the same node never
    nests. Checkpoint calls elsewhere (a training loop, ``main``, a script's top level) get a
    statement region: in their block, from the statement that builds the saved object
    (``checkpoint = {...}``) to the save, or from the load to the last statement that restores
    from what was read (:func:`_last_use`). A checkpointing class gets ``@ai.checkpoint.init``
    on its innermost ``__init__`` (:func:`_plan_inits`). ML-R18 makes these regions; ML-R26 times
    the I/O of the calls they cover (:attr:`CheckpointPlan.covered`)."""
    plan = CheckpointPlan()
    names = project_function_names(graph)
    savers: set[str] = set()  # classes with a method that saves state (their loads read state)
    maybe = [f for f, (_, fn) in graph.functions.items() if any(c.method in facts(graph).checkpoint_last_names for c in fn.calls)]
    for function_id in maybe:
        class_id = graph.class_of_method(function_id)
        if class_id and checkpoint_ops(graph, function_id, None, names, loads=False):
            savers.add(class_id)
    for function_id in maybe:
        found = checkpoint_ops(graph, function_id, savers, names)
        if found:
            plan.ops[function_id] = found
    entries = {e.function for e in graph.entries if e.function}
    traced = {relpath for relpath, fs in graph.files.items() if aliases(fs)}  # files that use dftracer
    annotated = {node: {f for f, (fs, fn) in graph.functions.items()
                        if fs.relpath in traced and has_node_region(fs, fn, node)}
                 for node in CHECKPOINT_NODES.values()}
    candidates: dict[str, set[str]] = {node: set() for node in CHECKPOINT_NODES.values()}
    for function_id, found in plan.ops.items():
        fs, fn = graph.functions[function_id]
        kinds = {op.kind for op in found}
        if len(kinds) != 1 or function_id in entries or checkpoint_function(graph, function_id, found):
            continue
        candidates[CHECKPOINT_NODES[kinds.pop()]].add(function_id)
    folded = _fold_helpers(graph, plan, candidates, entries)
    marked: dict[str, set[str]] = {}
    inside: dict[str, set[str]] = {}  # functions that run inside a region of the node
    for node, cands in candidates.items():
        others = cands | annotated[node]
        reach = {f: flow_reach(graph, f) for f in others}
        marked[node] = {f for f in cands if not (reach[f] & (others - {f}))
                        and not any(f in reach[a] for a in annotated[node])}
        inside[node] = set(marked[node]) | annotated[node]
        for f in marked[node] | annotated[node]:
            inside[node] |= reach[f]
        for f in sorted(marked[node]):
            fn = graph.fn(f)
            ops = [op for op in plan.ops[f]]
            what = "saves" if node == CHECKPOINT_NODES["save"] else "loads"
            apis = ", ".join(dict.fromkeys(op.api for op in ops))
            plan.functions[f] = (node, f"{fn.name}() {what} model state ({apis})")
    for function_id, found in plan.ops.items():
        for op in found:
            node = CHECKPOINT_NODES[op.kind]
            if function_id in inside[node] or folded.get(function_id) == node:
                plan.covered[(function_id, op.index)] = node
    for function_id, found in sorted(plan.ops.items()):
        _plan_spans(graph, plan, function_id, [op for op in found if (function_id, op.index) not in plan.covered],
                    marked, annotated)
    # a statement region whose statements call a function with a statement region of the same
    # node would nest it: the inner one stays
    with_spans = {node: {span.function for span in plan.spans if span.node == node} for node in CHECKPOINT_NODES.values()}
    for span in list(plan.spans):
        fn = graph.fn(span.function)
        block, field = span.first[:-1], span.first[-1][0]
        for k, call in enumerate(fn.calls):
            j = _block_index(call.stmt, block, field)
            if j is None or not span.first[-1][1] <= j <= span.last[-1][1]:
                continue
            inner = [t for t in graph.targets(span.function, k)
                     if t != span.function and ({t} | flow_reach(graph, t)) & with_spans[span.node]]
            if inner:
                plan.spans.remove(span)
                for index in span.ops:
                    plan.covered.pop((span.function, index), None)
                plan.notes.append((span.function, span.line, f"no {span.node} region here: the statements call "
                                   f"{call.callee}(), which has one (the node is not re-entrant)"))
                break
    _plan_inits(graph, plan, marked, annotated)
    return plan


def _fold_helpers(graph: CallGraph, plan: CheckpointPlan, candidates: dict[str, set[str]],
                  entries: set[str]) -> dict[str, str]:
    """Helpers whose checkpoint is their callers': a function a save or load runs as a hook
    (``accelerator.register_save_state_pre_hook(save_model_hook)``), a load helper that returns what it read
    (``return th.load(io.BytesIO(data))``, improved-diffusion's ``load_state_dict``: the
    restart is where the caller hands the state to the model or the optimizer), and a
    function defined inside the one that calls it (``save.<locals>.save_checkpoint``: one
    checkpoint, decided by ``save``). Their calls become checkpoint calls of the callers, and
    their own calls the checkpoint's I/O inside the callers' regions: helper id -> node."""
    folded: dict[str, str] = {}
    # functions a save or load runs as a hook: inside that checkpoint's region
    hooks = facts(graph).checkpoint_hooks
    for caller, (fs, fn) in graph.functions.items():
        for call in fn.calls:
            if call.method in hooks and call.args and call.args[0] and graph.values is not None:
                for origin in graph.values.of(caller, call.args[0]):
                    target = origin.split(":", 1)[1] if origin.startswith("func:") else None
                    if target in plan.ops:
                        node = CHECKPOINT_NODES[hooks[call.method]]
                        candidates[node].discard(target)
                        folded[target] = node
    for function_id, ops in sorted(plan.ops.items()):
        if function_id in folded:
            continue
        kinds = {op.kind for op in ops}
        sites = list(graph.call_sites_of(function_id))
        if len(kinds) != 1 or not sites or function_id in entries:
            continue
        kind = kinds.pop()
        fn = graph.fn(function_id)
        enclosing = graph.enclosing_function(function_id)
        nested = enclosing is not None and all(caller == enclosing for caller, _ in sites)
        returns_load = kind == "load" and any(
            fn.calls[op.index].stmt_kind == "return" or (op.obj and op.obj in fn.returns) for op in ops)
        # a rank-guarded ``save_on_master(obj, path)``: the capture is at each call that hands
        # it state, the write inside it is that capture's I/O (issue 39)
        through = _passes_state_through(fn, ops)
        if not (nested or returns_load or through):
            continue
        if through:
            sites = [(caller, site) for caller, site in sites
                     if saves_state(graph, caller, _index_of(graph.fn(caller), site), site.args[0] if site.args else None)]
            if not sites:
                continue
        node = CHECKPOINT_NODES[kind]
        candidates[node].discard(function_id)
        folded[function_id] = node
        for caller, site in sites:
            cfn = graph.fn(caller)
            index = _index_of(cfn, site)
            obj = site.assigned_to[0] if len(site.assigned_to) == 1 else None
            ops_of = plan.ops.setdefault(caller, [])
            if all(op.index != index for op in ops_of):
                ops_of.append(CheckpointOp(index, kind, f"{fn.name}()", True, None, obj))
                ops_of.sort(key=lambda op: op.index)
            caller_kinds = {op.kind for op in ops_of}
            if len(caller_kinds) == 1 and caller not in entries and not checkpoint_function(graph, caller, ops_of):
                candidates[node].add(caller)
    return folded


def _index_of(fn: FunctionSummary, site: CallSite) -> int:
    return next(i for i, c in enumerate(fn.calls) if c is site or c == site)


def _block_index(path: StmtPath, block: StmtPath, field: str) -> int | None:
    """The index, in the block ``field`` of the statement at ``block``, of the statement that
    holds ``path`` (None if ``path`` is not in that block)."""
    n = len(block)
    if len(path) > n and path[:n] == block and path[n][0] == field:
        return path[n][1]
    return None


def _plan_spans(graph: CallGraph, plan: CheckpointPlan, function_id: str, ops: list[CheckpointOp],
                marked: dict[str, set[str]], annotated: dict[str, set[str]]) -> None:
    fs, fn = graph.functions[function_id]
    spans: dict[tuple[str, StmtPath, str], list[list]] = {}  # (node, block, field) -> [[first, last, ops]]
    for op in ops:
        call = fn.calls[op.index]
        node = CHECKPOINT_NODES[op.kind]
        if not op.inline:
            continue
        why_not = unwrappable(fs, fn, call)
        if why_not is None and call.stmt_kind == "return":
            why_not = "it is a `return` statement (the region could not close after it)"
        if why_not:
            plan.notes.append((function_id, call.line, f"{op.api}() gets no {node} region: {why_not}"))
            continue
        block, field, i = call.stmt[:-1], call.stmt[-1][0], call.stmt[-1][1]
        first = last = i
        if op.kind == "save" and op.obj and "(" not in op.obj:
            # from the statement that builds the saved object (the last one before the save)
            built = [j for a in fn.assigns if a.target == op.obj.split("[", 1)[0]
                     for j in [_block_index(a.stmt, block, field)] if j is not None and j < i]
            if built:
                first = max(built)
        if op.kind == "save" and call.receiver:
            # an asynchronous save (orbax) ends when the program waits for it, right after
            waits = [c for c in calls_at(fn, sibling(call.stmt, 1))
                     if c.receiver == call.receiver and c.method in facts(graph).checkpoint_waits]
            if waits:
                last = i + 1
        elif op.kind == "load" and call.assigned_to:
            # to the last statement that uses what was read (or a name taken from it)
            tracked = set(call.assigned_to)
            last = _last_use(fn, tracked, block, field, i, facts(graph).load_state_methods)
            # ``if gpu is None: ckpt = torch.load(p)`` / ``else: ckpt = torch.load(p, map_location=loc)``
            # and the uses after the if/else (pytorch/examples' imagenet): the region is around the
            # if/else and the uses, as both branches load
            holder = block
            while last == i and holder and _loads_in_both_branches(fn, ops, holder, tracked):
                outer_block, outer_field, outer_i = holder[:-1], holder[-1][0], holder[-1][1]
                outer_last = _last_use(fn, tracked, outer_block, outer_field, outer_i,
                                       facts(graph).load_state_methods)
                if outer_last == outer_i:
                    break
                block, field, first, i, last = outer_block, outer_field, outer_i, outer_i, outer_last
                holder = block
        spans.setdefault((node, block, field), []).append([first, last, [op.index]])
    made: list[CheckpointSpan] = []
    for (node, block, field), found in spans.items():
        found.sort()
        merged: list[list] = []
        for first, last, indexes in found:
            if merged and first <= merged[-1][1] + 1:
                merged[-1][1] = max(merged[-1][1], last)
                merged[-1][2] += indexes
            else:
                merged.append([first, last, list(indexes)])
        for first, last, indexes in merged:
            first_path, last_path = block + ((field, first),), block + ((field, last),)
            in_span = [k for k, c in enumerate(fn.calls)
                       if (j := _block_index(c.stmt, block, field)) is not None and first <= j <= last]
            regions = marked[node] | annotated[node]
            nested = [fn.calls[k].callee for k in in_span for t in graph.targets(function_id, k)
                      if t in regions or flow_reach(graph, t) & regions]
            line = min(fn.calls[k].line for k in in_span)
            if nested:
                plan.notes.append((function_id, line, f"no {node} region here: the statements call "
                                   f"{nested[0]}(), which has one (the node is not re-entrant)"))
                continue
            if any(fn.calls[k].stmt == last_path and fn.calls[k].stmt_kind == "return" for k in in_span):
                plan.notes.append((function_id, line, f"no {node} region here: it would end with a `return`"))
                continue
            ends = [fn.calls[k].line for k in in_span if _block_index(fn.calls[k].stmt, block, field) == last]
            ops_here = [op for op in plan.ops[function_id] if op.index in indexes]
            what = "saves" if node == CHECKPOINT_NODES["save"] else "loads"
            apis = ", ".join(dict.fromkeys(op.api for op in ops_here))
            made.append(CheckpointSpan(function_id, node, first_path, last_path, line, max(ends or [line]),
                                       tuple(indexes), f"{fn.name if not fn.is_module else 'the script'} "
                                                       f"{what} model state ({apis})"))
    # a span inside a statement another span of the same node covers is part of it; spans of
    # different nodes that overlap would cross: the later one goes
    made.sort(key=lambda s: (len(s.first), s.line))
    kept: list[CheckpointSpan] = []
    for span in made:
        outer = next((k for k in kept if _covers(k, span)), None)
        if outer is not None:
            if outer.node == span.node:
                outer.ops += span.ops
            else:
                kept.append(span)  # a restart inside a capture (or the reverse) nests
            continue
        if any(_overlaps(k, span) for k in kept):
            plan.notes.append((function_id, span.line, f"no {span.node} region here: it would cross another"))
            continue
        kept.append(span)
    for span in kept:
        plan.spans.append(span)
        for index in span.ops:
            plan.covered[(function_id, index)] = span.node


def _last_use(fn: FunctionSummary, tracked: set[str], block: StmtPath, field: str, i: int,
              load_states: frozenset[str]) -> int:
    """The index of the last statement after ``i`` in the block that restores from what was read:
    one that uses a ``tracked`` name (``start = ckpt["epoch"]``), or hands a name taken from one
    (``sd = ckpt["model"]``) to ``load_state_dict``. A loop never extends the region (``for epoch
    in range(ckpt["epoch"], n):`` is the training); ``i`` when nothing does."""
    last = i
    derived: set[str] = set()
    loops = {lp.stmt for lp in fn.loops}
    for item in sorted([*fn.calls, *fn.assigns], key=lambda x: (x.line, isinstance(x, CallSite))):
        j = _block_index(item.stmt, block, field)
        if j is None or j <= i:
            continue
        is_call = isinstance(item, CallSite)
        texts = (item.callee, *item.args, *(v for _, v in item.keywords)) if is_call \
            else (item.value, *item.call_args, *(v for _, v in item.call_keywords))
        direct = any(_mentions(t, tracked) for t in texts)
        taken = any(_mentions(t, derived) for t in texts)
        if not is_call and (direct or taken):
            derived.add(item.target)
        if block + ((field, j),) in loops:
            continue
        if direct or (taken and is_call and item.method in load_states):
            last = max(last, j)
    return last


def _loads_in_both_branches(fn: FunctionSummary, ops: list[CheckpointOp], holder: StmtPath, names: set[str]) -> bool:
    """Whether the compound statement at ``holder`` loads into one of ``names`` both in its body
    and in its ``else`` (so whichever branch runs, a load ran)."""
    fields = set()
    for op in ops:
        call = fn.calls[op.index]
        if op.kind == "load" and set(call.assigned_to) & names and len(call.stmt) == len(holder) + 1 \
                and call.stmt[:len(holder)] == holder:
            fields.add(call.stmt[-1][0])
    return {"body", "orelse"} <= fields


def _covers(outer: CheckpointSpan, inner: CheckpointSpan) -> bool:
    """Whether ``inner`` lies inside one of ``outer``'s statements."""
    block, field = outer.first[:-1], outer.first[-1][0]
    j = _block_index(inner.first, block, field)
    return j is not None and len(inner.first) > len(outer.first) and outer.first[-1][1] <= j <= outer.last[-1][1]


def _overlaps(a: CheckpointSpan, b: CheckpointSpan) -> bool:
    return a.first[:-1] == b.first[:-1] and a.first[-1][0] == b.first[-1][0] and \
        not (a.last[-1][1] < b.first[-1][1] or b.last[-1][1] < a.first[-1][1])


def _plan_inits(graph: CallGraph, plan: CheckpointPlan, marked: dict[str, set[str]],
                annotated: dict[str, set[str]]) -> None:
    """``@ai.checkpoint.init`` on the ``__init__`` of each checkpointing class: one with a method
    that saves and one that loads (through its own methods, its bases' or, for a base that
    declares them, its subclasses' overrides: DLIO's ``BaseCheckpointing``), none that trains
    or evaluates, not a model or a data set. An abstract base's constructor that only its
    subclasses' constructors run gives the region to those; of the other constructors that run
    one another (a subclass's ``super().__init__()``) only the innermost: the node is not
    re-entrant."""
    # a statement region counts like a function's (a second run sees it as annotated)
    spans = {node: {span.function for span in plan.spans if span.node == node} for node in CHECKPOINT_NODES.values()}
    saves = marked[CHECKPOINT_NODES["save"]] | annotated[CHECKPOINT_NODES["save"]] | spans[CHECKPOINT_NODES["save"]]
    loads = marked[CHECKPOINT_NODES["load"]] | annotated[CHECKPOINT_NODES["load"]] | spans[CHECKPOINT_NODES["load"]]
    found: dict[str, str] = {}
    constructs: dict[str, set[str]] = {}  # constructor -> the classes whose construction starts there
    owners = {graph.class_of_method(f) for f in saves | loads} - {None}
    for class_id in sorted({c for owner in owners for c in graph.mro(owner)}):
        fs, cs = graph.classes[class_id]
        mro = graph.mro(class_id)
        names = {m for c in mro for m in graph.classes[c][1].methods}
        dispatched = {m: set(graph.dispatch(class_id, m)) for m in names}
        if not any(d & saves for d in dispatched.values()) or not any(d & loads for d in dispatched.values()):
            continue
        if graph.is_module_class(class_id) or any("__getitem__" in graph.classes[c][1].methods for c in mro) or \
                graph.has_base(class_id, ("Dataset", "IterableDataset", "data.Dataset", "torch.utils.data.Dataset")):
            continue
        if any(does_step(graph, f) for d in dispatched.values() for f in d if f in graph.functions):
            continue
        init = graph.method(class_id, "__init__")
        if init is not None:
            found.setdefault(init, f"{cs.name} saves and loads checkpoints: its construction")
            constructs.setdefault(init, set()).add(class_id)
    # an abstract base's constructor, run only by its subclasses' own constructors: the region
    # goes on those (each concrete class's construction whole, as DLIO's authors place it)
    reached = {inner for init in found for inner in flow_reach(graph, init) & (set(found) - {init})}
    kept = {init for init in found
            if not (init in reached and all(_is_abstract(graph, c) for c in constructs[init]))}
    for init, why in sorted(found.items()):
        if init not in kept or flow_reach(graph, init) & (kept - {init}):
            continue  # runs a constructor that has the region
        fs, fn = graph.functions[init]
        if any(is_node(fs, d, "checkpoint", "init") for d in fn.decorators):
            continue
        plan.inits[init] = why


def _is_abstract(graph: CallGraph, class_id: str) -> bool:
    """A class with an ``@abstractmethod`` of its own (it is never instantiated itself)."""
    _, cs = graph.classes[class_id]
    for name in cs.methods:
        method = graph.method(class_id, name)
        if method in graph.functions and any(d.rsplit(".", 1)[-1] == "abstractmethod"
                                             for d in graph.functions[method][1].decorators):
            return True
    return False
