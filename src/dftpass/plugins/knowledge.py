"""What ML training code looks like: shared recognisers for the rules.

Several rules need the same facts ("is this call an optimizer step?", "does this function
train?"); they live here once, so that ML-R2 (phases), ML-R4 (optimizer step) and ML-R7
(backward) agree on them.
"""

from __future__ import annotations

import re
import functools
from typing import Iterator, Mapping, NamedTuple

import attrs

from dftpass.core.callgraph import CallGraph, ResolutionHints, TrainingHints
from dftpass.core.emitter import aliases, is_node
from dftpass.core.manager import merge_knowledge
from dftpass.core.summary import CallSite, FileSummary, FunctionSummary, StmtPath
from dftpass.core.values import ValueHints, classes, kind, subject
from dftpass.plugins.library import builtin_knowledge

OPTIMIZER_NAME = re.compile(r"(?i)^(opt|optim|optimi[sz]er)s?(_\w+)?$|(^|_)optimi[sz]er$|^opt_\w+$")
SCALER_NAME = re.compile(r"(?i)(^|_)(grad_?)?scaler$")
SCHEDULER_NAME = re.compile(r"(?i)sched|lr_|warmup")
#: calls that run one training or evaluation step without showing a backward pass: a
#: benchmark's simulated ``compute``, a framework's ``train_step`` or ``train_on_batch``
COMPUTE_STEP = re.compile(
    r"(?i)^(compute|run_step|step_fn|forward_backward(_step)?|"
    r"(train|training|eval|evaluation|validation|val|test|predict)_(step|batch)|"
    r"(train|test|predict)_on_batch)$")
#: receivers of framework phase calls: ``trainer.fit``, ``model.fit`` (Keras)
PHASE_RECEIVER = re.compile(r"(?i)(^|_)trainer$|^(model|learner|engine|net|keras_model)$")
#: names of the objects a training step calls as its model (when nothing else tells)
MODEL_NAME = re.compile(r"(?i)^(model|net|network|module|backbone|encoder|decoder|generator|discriminator|"
                        r"policy|critic|actor|classifier|transformer|gpt|llm|lm)s?(_\w+)?$|_(model|net)$")
#: callables that compute a loss: a module, but not the model
LOSS_NAME = re.compile(r"(?i)loss|criterion|crossentropy")


def _last(text: str) -> str:
    return text.rstrip("()").rsplit(".", 1)[-1]


def assigned_values(graph: CallGraph, fs: FileSummary, fn: FunctionSummary, name: str) -> list[str]:
    """Dotted values assigned to a local name or ``self`` attribute."""
    if name.startswith("self.") and fn.cls and name.count(".") == 1:
        out: list[str] = []
        for cid in graph.mro(f"{fs.relpath}::{fn.cls}"):
            out.extend(v for v in graph.classes[cid][1].attr_values.get(name[5:], ()) if v)
        return out
    return [a.value for a in fn.assigns if a.target == name and a.value]


def is_optimizer(graph: CallGraph, fs: FileSummary, fn: FunctionSummary, receiver: str) -> bool:
    last = _last(receiver)
    if SCHEDULER_NAME.search(last):
        return False
    for value in assigned_values(graph, fs, fn, receiver):
        qualified = graph.qualify(fs, value)
        if ".optim." in qualified or qualified.startswith("optim.") or _last(qualified) in facts(graph).optimizer_classes:
            return True
    return bool(OPTIMIZER_NAME.search(last))


def is_scaler(graph: CallGraph, fs: FileSummary, fn: FunctionSummary, receiver: str) -> bool:
    for value in assigned_values(graph, fs, fn, receiver):
        if _last(value) == "GradScaler":
            return True
    return bool(SCALER_NAME.search(_last(receiver)))


def is_optimizer_step(graph: CallGraph, fs: FileSummary, fn: FunctionSummary, call: CallSite) -> bool:
    """``optimizer.step()``, ``self.opt.step(closure)``, ``scaler.step(optimizer)``; and what
    framework plugins teach (``optimizer.apply_gradients(...)``, ``optax.apply_updates``,
    flax's ``optimizer.update(model, grads)``)."""
    hints = graph.hints.training
    if _known_call(graph, fs, call, hints.optimizer_calls):
        return True
    if call.method not in hints.optimizer_methods or not call.receiver or "()" in call.receiver:
        return False
    if call.method == "step":
        return is_optimizer(graph, fs, fn, call.receiver) or is_scaler(graph, fs, fn, call.receiver)
    return is_optimizer(graph, fs, fn, call.receiver)


def is_backward(call: CallSite, graph: CallGraph | None = None, fs: FileSummary | None = None) -> bool:
    """``loss.backward()``, ``scaler.scale(loss).backward()``, ``accelerator.backward(loss)``,
    ``self.manual_backward(loss)``, ``torch.autograd.backward(...)``; with the graph, also the
    gradient calls framework plugins teach (``tape.gradient(...)``, ``jax.value_and_grad``)."""
    if call.method in ("backward", "manual_backward") and (bool(call.receiver) or call.callee == "backward"):
        return True
    return graph is not None and fs is not None and _known_call(graph, fs, call, graph.hints.training.gradient_calls)


def _known_call(graph: CallGraph, fs: FileSummary, call: CallSite, known: frozenset[str]) -> bool:
    """Whether ``call`` is one of ``known``: qualified functions, or ``.method`` on an object
    that is not an imported module (see :class:`~dftpass.core.callgraph.TrainingHints`)."""
    if not known:
        return False
    if call.method and f".{call.method}" in known and call.receiver \
            and call.receiver.split(".", 1)[0].rstrip("()") not in fs.imports:
        return True
    return graph.qualify(fs, call.callee) in known


def trains(graph: CallGraph, function_id: str, call_filter=None) -> bool:
    """Whether the function's calls (those passing ``call_filter``), or the project functions
    they call, do a backward pass or an optimizer step."""
    fs, fn = graph.functions[function_id]
    targets = []
    for call, found in graph.calls_with_targets(function_id):
        if call_filter is not None and not call_filter(call):
            continue
        if is_backward(call, graph, fs) or is_optimizer_step(graph, fs, fn, call):
            return True
        targets.extend(found)
    seen: set[str] = set()
    while targets:
        t = targets.pop()
        if t in seen:
            continue
        seen.add(t)
        tfs, tfn = graph.functions[t]
        if any(is_backward(c, graph, tfs) or is_optimizer_step(graph, tfs, tfn, c) for c in tfn.calls):
            return True
        targets.extend(graph.callees(t))
    return False


def evaluates(fn: FunctionSummary, graph: CallGraph | None = None) -> bool:
    """Gradient-free: under ``no_grad``/``inference_mode`` (decorator or ``with``), or calls ``.eval()``."""
    no_grad = facts(graph).no_grad
    if any(_last(d) in no_grad for d in fn.decorators):
        return True
    if any(_last(w) in no_grad for w in fn.withs):
        return True
    return any(c.method == "eval" and not c.args for c in fn.calls)


def evaluated_by_callers(graph, function_id: str) -> bool:
    """Gradient-free because of where it is called: every resolved call of it sits in a
    ``with torch.no_grad():`` (or ``inference_mode``) of its caller (minGPT's
    ``eval_split``, called from a callback under ``no_grad``)."""
    sites = list(graph.call_sites_of(function_id))
    no_grad = facts(graph).no_grad
    return bool(sites) and all(any(_last(w) in no_grad for w in call.withs) for _, call in sites)


def sibling(path: StmtPath, offset: int) -> StmtPath | None:
    field, index = path[-1]
    if index + offset < 0:
        return None
    return path[:-1] + ((field, index + offset),)


def calls_at(fn: FunctionSummary, path: StmtPath | None) -> list[CallSite]:
    return [c for c in fn.calls if path is not None and c.stmt == path]


def in_compute_span(fs: FileSummary, fn: FunctionSummary, call: CallSite) -> bool:
    """Whether the call's statement is inside a step's compute region: a ``with ai.compute:``
    around it (the tracing budget's folded step), or between an ``ai.compute.start()`` and
    the ``ai.compute.stop()`` after it in the same block (as dftpass wrote it before): it is
    timed, and a second annotation must not add its own region."""
    if any(is_node(fs, w, "compute") for w in call.withs):
        return True
    block, (field, index) = call.stmt[:-1], call.stmt[-1]
    opened = False
    for c in sorted(fn.calls, key=lambda c: c.stmt):
        if c.stmt[:-1] != block or c.stmt[-1][0] != field:
            continue
        position = c.stmt[-1][1]
        if position < index and is_node(fs, c.callee, "compute", "start"):
            opened = True
        elif position < index and is_node(fs, c.callee, "compute", "stop"):
            opened = False
        elif position > index and opened and is_node(fs, c.callee, "compute", "stop"):
            return True
    return False


# -- program and resolution knowledge ---------------------------------------------------------

@attrs.frozen
class Facts:
    """The library facts the recognisers read: every plugin's ``dftpass_knowledge``, merged by
    the pass manager (dftpass's own are plugins/library.toml, where each kind is explained).
    Reach them with :func:`facts`."""

    optimizer_classes: frozenset[str]
    model_factories: frozenset[str]
    io_calls: frozenset[str]
    log_methods: frozenset[str]
    no_grad: frozenset[str]
    loader_factories: frozenset[str]
    framework_phases: Mapping[str, str]
    checkpoint_functions: Mapping[str, str]
    checkpoint_objects: tuple[tuple[str, Mapping[str, str]], ...]
    checkpoint_methods: Mapping[str, str]
    #: methods that register a function a save or load runs -> "save" | "load"
    checkpoint_hooks: Mapping[str, str]
    accelerator_methods: Mapping[str, str]
    save_object: Mapping[str, tuple[int, str]]
    load_result: frozenset[str]
    checkpoint_io_measure: Mapping[str, str]
    load_state_methods: frozenset[str]
    checkpoint_waits: frozenset[str]
    #: the last names a checkpoint call can have (a quick filter before any lookup)
    checkpoint_last_names: frozenset[str]
    #: calls that build what training runs with (an optimizer, a loader, a wrapped model)
    builders: frozenset[str]
    #: module -> function -> ``ai.comm`` node; mpi4py's communicator methods -> node
    collective_functions: Mapping[str, Mapping[str, str]]
    #: prefix of what builds a receiver -> method -> node (``accelerator.wait_for_everyone()``)
    collective_objects: tuple[tuple[str, Mapping[str, str]], ...]
    mpi_methods: Mapping[str, str]
    collective_nonblocking: frozenset[str]
    mpi_communicators: frozenset[str]
    mpi_derived_communicators: frozenset[str]
    collective_waits: frozenset[str]
    #: every collective's function or method name (the cost model's test on a receiver
    #: named like a communicator)
    collective_names: frozenset[str]
    #: method names that make a call checkpoint I/O wherever it is (the cost model's and
    #: ML-R27's test): not ``save`` or ``from_pretrained``, which name other things too
    checkpoint_method_names: frozenset[str]
    #: the last two components of each checkpoint function (``torch.save``): a module that
    #: mirrors the API (Megatron's ``maybe_msc.torch.save``) is checkpoint I/O too
    checkpoint_function_tails: frozenset[str]

    @classmethod
    def of(cls, knowledge: Mapping) -> "Facts":
        k = knowledge
        objects = tuple((prefix, dict(methods)) for prefix, methods in k["checkpoint_objects"].items())
        factories = frozenset(k["model_factories"])
        return cls(
            optimizer_classes=frozenset(k["optimizer_classes"]), model_factories=factories,
            io_calls=frozenset(k["io_calls"]), log_methods=frozenset(k["log_methods"]),
            no_grad=frozenset(k["no_grad"]), loader_factories=frozenset(k["loader_factories"]),
            framework_phases=dict(k["framework_phases"]), checkpoint_functions=dict(k["checkpoint_functions"]),
            checkpoint_objects=objects, checkpoint_methods=dict(k["checkpoint_methods"]),
            checkpoint_hooks=dict(k["checkpoint_hooks"]),
            accelerator_methods=dict(k["accelerator_methods"]),
            save_object={api: (int(at[0]), str(at[1])) for api, at in k["save_object"].items()},
            load_result=frozenset(k["load_result"]), checkpoint_io_measure=dict(k["checkpoint_io_measure"]),
            load_state_methods=frozenset(k["load_state_methods"]), checkpoint_waits=frozenset(k["checkpoint_waits"]),
            checkpoint_last_names=frozenset({q.rsplit(".", 1)[-1] for q in k["checkpoint_functions"]}
                                            | set(k["checkpoint_methods"]) | set(k["accelerator_methods"])
                                            | {m for methods in k["checkpoint_objects"].values() for m in methods}),
            collective_functions={m: dict(ops) for m, ops in k["collective_functions"].items()},
            collective_objects=tuple((prefix, dict(ops)) for prefix, ops in k["collective_objects"].items()),
            mpi_methods=dict(k["mpi_methods"]), collective_nonblocking=frozenset(k["collective_nonblocking"]),
            mpi_communicators=frozenset(k["mpi_communicators"]),
            mpi_derived_communicators=frozenset(k["mpi_derived_communicators"]),
            collective_waits=frozenset(k["collective_waits"]),
            collective_names=frozenset({n for ops in k["collective_functions"].values() for n in ops}
                                       | set(k["mpi_methods"])
                                       | {n for ops in k["collective_objects"].values() for n in ops}),
            checkpoint_method_names=frozenset({*k["checkpoint_methods"], *k["accelerator_methods"],
                                               *k["load_state_methods"]} - {"save", "from_pretrained"}),
            checkpoint_function_tails=frozenset(".".join(q.rsplit(".", 2)[-2:]) for q in k["checkpoint_functions"]),
            builders=frozenset({*k["optimizer_classes"], *k["loader_factories"], *k["passthrough_calls"],
                                *(factories - {"from_pretrained", "load_model"})} - {"iter"}),
        )


    def collective_library(self, module: str) -> str | None:
        """The key of ``collective_functions`` that ``module`` is, or is a submodule of."""
        return next((m for m in self.collective_functions if module == m or module.startswith(m + ".")), None)


@functools.cache
def _builtin_facts() -> Facts:
    return Facts.of(merge_knowledge([("builtin", builtin_knowledge())]))


def facts(graph: CallGraph | None) -> Facts:
    """The library facts of this run (every plugin's); dftpass's own for a graph built
    without the pass manager's knowledge (a test's, a script's)."""
    found = graph.hints.facts if graph is not None else None
    return found if found is not None else _builtin_facts()


def resolution_hints(knowledge: Mapping | None = None) -> ResolutionHints:
    """What the call graph and value flow cannot read from the project's code: the plugins'
    ``knowledge`` (:attr:`PassManager.knowledge`; default: dftpass's own, plugins/library.toml)."""
    if knowledge is None:
        knowledge = merge_knowledge([("builtin", builtin_knowledge())])
    return ResolutionHints(
        process_launchers=frozenset(knowledge["process_launchers"]),
        process_keywords=frozenset(knowledge["process_keywords"]),
        module_bases=tuple(knowledge["module_bases"]),
        module_base_prefixes=tuple(knowledge["module_base_prefixes"]),
        module_call_methods=tuple(knowledge["module_call_methods"]),
        loop_models=tuple(knowledge["loop_models"]),
        dataset_bases=tuple(knowledge["dataset_bases"]),
        iterable_dataset_bases=tuple(knowledge["iterable_dataset_bases"]),
        training=TrainingHints(gradient_calls=frozenset(knowledge["gradient_calls"]),
                               optimizer_calls=frozenset(knowledge["optimizer_calls"]),
                               optimizer_methods=frozenset(knowledge["optimizer_methods"])),
        values=ValueHints(
            identity_methods=frozenset(knowledge["identity_methods"]),
            opaque_calls=frozenset(knowledge["model_factories"]),
            # a compiled function stands for the function it was given: jax.jit(step)(x)
            passthrough_calls=frozenset({*knowledge["passthrough_calls"], *knowledge["compilers"]}),
        ),
        facts=Facts.of(knowledge),
    )


def is_compute_step(call: CallSite) -> bool:
    return bool(COMPUTE_STEP.match(call.method)) and call.callee != "step"


def framework_phase(call: CallSite, graph: CallGraph | None = None) -> str | None:
    """``trainer.fit(...)`` -> "train", ``trainer.validate(...)`` -> "evaluate", ..."""
    phase = facts(graph).framework_phases.get(call.method)
    if phase and call.receiver and PHASE_RECEIVER.search(call.receiver.rsplit(".", 1)[-1]):
        return phase
    return None


def model_classes(graph: CallGraph, function_id: str, callee: str) -> set[str]:
    """The project model classes (torch modules, not losses) a call of ``callee`` runs
    ``forward`` of."""
    if graph.values is None:
        return set()
    return {c for c in classes(graph.values.of(function_id, callee)) if graph.is_module_class(c)
            and not LOSS_NAME.search(graph.classes[c][1].name) and not graph.has_base(c, ("_Loss", "_WeightedLoss"))}


def is_top_level_model(graph: CallGraph, class_id: str) -> bool:
    """Not a submodule: no *other* model class builds it in one of its instance methods."""
    related = set(graph.mro(class_id)) | set(graph.subclasses(class_id))
    for builder in graph.instantiated_in.get(class_id, set()):
        owner = graph.class_of_method(builder)
        if owner is None or owner in related or not graph.is_module_class(owner):
            continue
        if not graph.is_bound_method(builder) or graph.fn(builder).positional[:1] == ("cls",):
            continue  # a class or static method builds a new model, not a part of itself
        return False
    return True


def built_by_factory(graph: CallGraph, function_id: str, callee: str) -> bool:
    """Whether the model called as ``callee`` may come from a model factory (registry, hub)."""
    if graph.values is None:
        return False
    return any(kind(o) == "ext" and subject(o).rstrip("()").rsplit(".", 1)[-1] in facts(graph).model_factories
               for o in graph.values.of(function_id, callee))


def is_model_call(graph: CallGraph, function_id: str, index: int) -> bool:
    """Call ``index`` of the function is ``model(x)``, ``self.net(x)``: an instance of a model
    class, or a name that reads like a model when what it holds is unknown (a factory's)."""
    callee = graph.fn(function_id).calls[index].callee
    if "(" in callee or callee.count(".") > 1 or (callee.count(".") == 1 and not callee.startswith("self.")):
        return False
    if LOSS_NAME.search(callee.rsplit(".", 1)[-1]):
        return False  # ``loss_fn(output, target)``, ``criterion(...)``
    if model_classes(graph, function_id, callee):
        return True
    if graph.targets(function_id, index):
        return False  # a project function, not a model
    return bool(MODEL_NAME.search(callee.rsplit(".", 1)[-1])) or is_library_layer(graph, function_id, callee)


def is_library_layer(graph: CallGraph, function_id: str, callee: str) -> bool:
    """``callee`` holds an instance of a ``torch.nn`` module class that is not a loss: the
    model of a script that trains one layer (``fc = torch.nn.Linear(4, 1)``, then
    ``fc(batch_x)``: pytorch/examples' ``regression``)."""
    if graph.values is None:
        return False
    for origin in graph.values.of(function_id, callee):
        name = subject(origin)
        if kind(origin) == "ext" and name.startswith("torch.nn.") and name.endswith("()"):
            cls = name[:-2].rsplit(".", 1)[-1]
            if cls[:1].isupper() and not LOSS_NAME.search(cls):
                return True
    return False


def step_calls(graph: CallGraph, loops) -> Iterator[tuple[str, int]]:
    """(function id, call index) of every call that runs once per batch: in a batch loop's
    body (a gradient-accumulation loop inside it included), or in a project function that
    such a call runs (one level down: ``train_step(model, batch)``; not into the model)."""
    seen = set()
    for facts in loops.of_kind("batch"):
        if facts.yields_batches:
            continue
        fn = graph.fn(facts.function)
        for i, call in enumerate(fn.calls):
            if facts.loop.index in call.loops and (facts.function, i) not in seen:
                seen.add((facts.function, i))
                yield facts.function, i
                for target in graph.targets(facts.function, i):
                    if is_model_entry(graph, target):
                        continue  # inside the model: its submodules, not the step's calls
                    for j, _ in enumerate(graph.fn(target).calls):
                        if (target, j) not in seen:
                            seen.add((target, j))
                            yield target, j


def is_model_entry(graph: CallGraph, function_id: str) -> bool:
    """A model's ``forward`` or ``__call__``: what calling the model runs."""
    owner = graph.class_of_method(function_id)
    return owner is not None and graph.fn(function_id).name in ("forward", "__call__") and \
        graph.is_module_class(owner)


def does_step(graph: CallGraph, function_id: str, loops: set[int] | None = None) -> bool:
    """Whether calls of the function (those in ``loops``, if given) run a training or
    evaluation step: a backward pass, an optimizer step, a compute-step call, a model call,
    or a project function that does one of these."""
    fs, fn = graph.functions[function_id]
    pending = []
    for i, call in enumerate(fn.calls):
        if loops is not None and not (set(call.loops) & loops):
            continue
        if is_backward(call, graph, fs) or is_optimizer_step(graph, fs, fn, call) or is_compute_step(call) \
                or is_model_call(graph, function_id, i):
            return True
        pending.extend(graph.targets(function_id, i))
    return any(trains(graph, t) for t in pending)


def step_consumers(graph: CallGraph, function_id: str, loops: set[int] | None) -> list[tuple[int, bool]]:
    """The calls of a step (those directly in ``loops``) that consume the batch, for batch
    provenance to walk back from: (call index, whether the data is the receiver). A backward
    pass consumes its loss (``loss.backward()``: the receiver; ``accelerator.backward(loss)``:
    the argument), a model call and a compute-step call their arguments, and so does a call of
    a project function that does a step (``train(*get_batch())``, ``update(i, state, batch)``).
    A loss call (``criterion(output, target)``) consumes its arguments too.
    ``loops`` None: every call of the function."""
    fs, fn = graph.functions[function_id]
    out = []
    for i, call in enumerate(fn.calls):
        if loops is not None and (not call.loops or call.loops[-1] not in loops):
            continue
        if is_backward(call, graph, fs):
            out.append((i, call.method == "backward" and call.callee != "backward" and not call.args))
        elif is_model_call(graph, function_id, i) or is_compute_step(call) or \
                LOSS_NAME.search(call.callee.rsplit(".", 1)[-1]) and "(" not in call.callee:
            # a loss consumes the targets (an evaluation loop has no backward to walk from)
            out.append((i, False))
        elif any(trains(graph, t) or does_step(graph, t) for t in graph.targets(function_id, i)
                 if not t.endswith(".__init__")):
            out.append((i, False))
    return out


def does_io(graph: CallGraph, function_id: str) -> bool:
    """Whether the function itself reads or writes data (not through project functions)."""
    fs, fn = graph.functions[function_id]
    for i, call in enumerate(fn.calls):
        if graph.targets(function_id, i):
            continue
        qualified = graph.qualify(fs, call.callee)
        last = qualified.rsplit(".", 1)[-1]
        io_calls = facts(graph).io_calls
        if last in io_calls or ".".join(qualified.rsplit(".", 2)[-2:]) in io_calls:
            return True
        if qualified.startswith(("h5py.", "cv2.imread", "PIL.", "imageio.", "tifffile.", "pyarrow.")):
            return True
    return False


# -- statements a ``with`` region can go around --------------------------------------------------


def unwrappable(fs: FileSummary, fn: FunctionSummary, call: CallSite) -> str | None:
    """Why ``with X:`` cannot go around the statement that holds ``call`` (None: it can).

    A call deep in an expression is fine (``loss = hvd.allreduce(loss).item()``,
    ``batch = {k: v.to(device) for k, v in batch.items()}``): the region then covers the
    whole simple statement. It cannot go around a compound statement whose header holds the
    call and whose body does work (``if comm.allreduce(flag): save()``, ``while ...:``, a
    ``with`` item, a decorator of a ``def``), a function that only *defines* the call
    (``f = lambda t: dist.all_reduce(t)``), nor a ``yield`` (the region would span the time the
    consumer holds the generator: in a generator only assignments, returns and whole-call
    statements are wrapped)."""
    path = call.stmt
    if call.stmt_kind == "with":
        return "it is a `with` item"
    if any(lp.stmt == path for lp in fn.loops):
        return "it is in a loop header"
    if any(f.stmt == path for f in fs.functions) or any(c.stmt == path for c in fs.classes):
        return "it is in a decorator or class header"
    n = len(path)
    if any(len(c.stmt) > n and c.stmt[:n] == path for c in fn.calls) or \
            any(len(a.stmt) > n and a.stmt[:n] == path for a in fn.assigns) or \
            any(len(lp.stmt) > n and lp.stmt[:n] == path for lp in fn.loops) or \
            any(len(d.stmt) > n and d.stmt[:n] == path for d in (*fs.functions, *fs.classes)):
        return "it is in the header of a compound statement (`if`, `with`, `match`) whose body does work"
    here = [a for a in fn.assigns if a.stmt == path]
    if any(a.value == "<lambda>" for a in here):
        return "it is inside a lambda (defined here, run later)"
    if fn.is_generator and call.stmt_kind not in ("expr", "assign", "return") and not any(a.value for a in here):
        return "the statement may `yield` (a region would span the consumer's time)"
    return None


# -- the data path: the functions that produce samples --------------------------------------------

def classes_given_to_loaders(graph: CallGraph) -> set[str]:
    """Project classes whose instances are the first argument of a ``DataLoader(...)``."""
    out = set()
    for function_id, (fs, fn) in graph.functions.items():
        for call in fn.calls:
            if call.method != "DataLoader" or not call.args or not call.args[0]:
                continue
            out |= classes(graph.values.of(function_id, call.args[0]))
    return out


#: the protocol methods a data loader calls on a data set, and the keywords that hand it
#: callables it runs itself
LOADER_PROTOCOL = ("__getitem__", "__iter__", "__len__", "__getitems__")
LOADER_CALLABLES = ("worker_init_fn", "collate_fn")


def run_by_loaders(graph: CallGraph, reach: set[str]) -> set[str]:
    """What data loaders run on a program's behalf, beyond ``reach`` (what the program calls
    itself): the protocol methods of the project data sets it builds (``DataLoader`` calls
    ``__getitem__``, not the program) and the callables it hands a loader (``worker_init_fn=
    dataset.worker_init``), with everything they call. DLIO's readers, built by a factory in
    ``worker_init`` and read from ``__getitem__``, are reached only this way."""
    starts: set[str] = set()
    loader_args = classes_given_to_loaders(graph)
    for class_id, (fs, cs) in graph.classes.items():
        built = graph.instantiated_in.get(class_id, set()) & reach
        if built and (class_id in loader_args or graph.has_base(class_id, (*graph.hints.dataset_bases, *graph.hints.iterable_dataset_bases))):
            starts |= {f"{fs.relpath}::{cs.methods[m]}" for m in LOADER_PROTOCOL if m in cs.methods}
    for function_id in reach:
        fs, fn = graph.functions.get(function_id, (None, None))
        for call in fn.calls if fn else ():
            for key, value in call.keywords:
                if key in LOADER_CALLABLES and value:
                    starts |= _callable_targets(graph, function_id, fs, value)
    out = set()
    for start in starts - reach:
        if start in graph.functions:
            out |= {start} | graph.reachable(start)
    return out - reach


def _callable_targets(graph: CallGraph, function_id: str, fs: FileSummary, text: str) -> set[str]:
    """The project functions a value handed over as a callable names: a function, or a
    method of an instance (``dataset.worker_init``)."""
    out = set()
    resolved = graph.resolve_name(fs, text)
    if resolved in graph.functions:
        out.add(resolved)
    receiver, _, attr = text.rpartition(".")
    if receiver and graph.values is not None:
        for class_id in classes(graph.values.of(function_id, receiver)):
            method = graph.method(class_id, attr)
            if method:
                out.add(method)
    return out


def dataset_sample_readers(graph: CallGraph) -> list[tuple[str, str, set[str]]]:
    """For each map-style data set (a class with ``__getitem__`` that subclasses a
    ``Dataset`` or is handed to a ``DataLoader``): (class name, ``__getitem__`` id, the
    functions that read one sample for it, :func:`sample_readers`)."""
    out = []
    loader_args = classes_given_to_loaders(graph)
    for class_id, (fs, cs) in graph.classes.items():
        if "__getitem__" not in cs.methods:
            continue
        if not graph.has_base(class_id, graph.hints.dataset_bases) and class_id not in loader_args:
            continue
        getitem_id = f"{fs.relpath}::{cs.methods['__getitem__']}"
        out.append((cs.name, getitem_id, sample_readers(graph, getitem_id)))
    return out


@attrs.frozen
class SampleSpan:
    """The statements of an iterable data set's ``__iter__`` that produce one sample: a
    loop's body from its first statement through the one before the ``yield``."""

    dataset: str  # the class's name
    function: str  # the ``__iter__`` id
    first: StmtPath
    last: StmtPath
    line: int
    #: the sample the last statement binds, when it is known to be a tensor (its bytes are
    #: ``image_size``); None when the size cannot be known statically (no size is written)
    tensor: str | None = None


def iterable_dataset_generators(graph: CallGraph) -> dict[str, str]:
    """The generator ``__iter__`` methods of iterable data sets (a class that subclasses
    ``IterableDataset`` or is handed to a ``DataLoader``): ``__iter__`` id -> class name."""
    loader_args = classes_given_to_loaders(graph)
    out = {}
    for class_id, (fs, cs) in graph.classes.items():
        if "__iter__" not in cs.methods:
            continue
        if not graph.has_base(class_id, graph.hints.iterable_dataset_bases) and class_id not in loader_args:
            continue
        iter_id = f"{fs.relpath}::{cs.methods['__iter__']}"
        if graph.fn(iter_id).is_generator:
            out[iter_id] = cs.name
    return out


def iterable_sample_spans(graph: CallGraph) -> list[SampleSpan]:
    """Per-sample spans of iterable data sets (``iterable_dataset_generators``): for each
    ``yield`` in a loop's body, the statements of that body before it. A decorator would time
    only the creation of the generator, and a region around the ``yield`` would time the
    consumer too; the statements before it are the sample's read and its transforms.

    When those statements call nothing (``chunk = shard[i:j]`` before ``yield chunk``), the
    read is one level up: the enclosing loop's statements before the inner loop (the shard
    that is read, then cut into samples)."""
    out = []
    for iter_id, dataset in iterable_dataset_generators(graph).items():
        fs, fn = graph.functions[iter_id]
        seen = set()
        for (value, loops, delegated), path in zip(fn.yields, fn.yield_stmts):
            if delegated or not loops:
                continue
            span = _span_before(fn, loops, path)
            if span is None or span[0] in seen:
                continue
            first, last, line = span
            seen.add(first)
            out.append(SampleSpan(dataset, iter_id, first, last, line, _span_tensor(graph, fs, fn, first, last)))
    return out


def _span_before(fn, loops: tuple[int, ...], path: StmtPath) -> tuple[StmtPath, StmtPath, int] | None:
    """(first, last, line of the first call) of the statements that come before ``path`` (a
    yield, or the inner loop that holds it) in the body of its loop, climbing to the
    enclosing loop while the run calls nothing; None when no level has a run with calls."""
    for depth in range(len(loops) - 1, -1, -1):
        loop = fn.loops[loops[depth]]
        n = len(loop.stmt)
        if len(path) <= n or path[:n] != loop.stmt or path[n][0] != "body":
            return None
        if len(path) > n + 1 and depth == len(loops) - 1:
            return None  # the yield is under an ``if`` of the body: no one run of statements
        index = path[n][1]
        if index == 0:
            return None
        first, last = loop.stmt + (("body", 0),), loop.stmt + (("body", index - 1),)
        inside = [c for c in fn.calls if c.stmt[:n] == loop.stmt and len(c.stmt) > n
                  and first[n] <= c.stmt[n] <= last[n]]
        if inside:
            return first, last, min(c.line for c in inside)
        path = loop.stmt  # only names moved around: look at the loop that holds this one
    return None


#: torch calls whose result is always a tensor
TENSOR_MAKERS = frozenset({"torch.from_numpy", "torch.tensor", "torch.as_tensor", "torch.stack", "torch.cat",
                           "torch.zeros", "torch.ones", "torch.empty", "torch.frombuffer"})


#: methods whose result is a tensor when called on a sample (``shard.to(device)``)
TENSOR_METHODS = frozenset({"to", "cuda", "pin_memory", "contiguous", "long", "float", "half", "int"})


def _makes_tensor(graph: CallGraph, fs: FileSummary, value: str | None) -> bool:
    """``torch.from_numpy(...)`` and its kin, also with tensor methods after (``.long()``),
    and a tensor method on a name (``shard.to(self.device)``)."""
    chain = call_chain(value)
    if chain is None or chain[2]:
        return False
    receiver, _, method = chain[0].rpartition(".")
    return graph.qualify(fs, chain[0]) in TENSOR_MAKERS or (
        method in TENSOR_METHODS and bool(HANDLE_NAME.match(receiver)) and not receiver.startswith("self."))


def _span_tensor(graph: CallGraph, fs: FileSummary, fn: FunctionSummary, first: StmtPath,
                 last: StmtPath) -> str | None:
    """The name the span's last tensor-making statement binds (its bytes are the sample's
    ``image_size``), unless a later statement of the span binds it to something else."""
    n = len(first) - 1
    tensor = None
    for a in sorted((a for a in fn.assigns if len(a.stmt) == n + 1 and a.stmt[:n] == first[:n]
                     and first[n] <= a.stmt[n] <= last[n] and HANDLE_NAME.match(a.target)
                     and not a.target.startswith("self.")), key=lambda a: a.stmt[n]):
        if _makes_tensor(graph, fs, a.value):
            tensor = a.target
        elif a.target == tensor:
            tensor = None
    return tensor


def per_sample_functions(graph: CallGraph, loops) -> dict[str, str]:
    """Project functions a batch producer calls once per sample (``torch.stack([read(i) for
    i in ix])``): function id -> the producer's name (the first producer that calls it)."""
    out: dict[str, str] = {}
    for facts in loops.of_kind("batch"):
        for producer in (*facts.producers, *loop_generators(graph, facts)):
            pfn = graph.fn(producer)
            for i, call in enumerate(pfn.calls):
                if not (call.in_comprehension or call.loops):
                    continue
                for target in graph.targets(producer, i):
                    tfn = graph.fn(target)
                    if not tfn.is_generator and not target.endswith(".__init__"):
                        out.setdefault(target, pfn.name)
    return out


def loop_generators(graph: CallGraph, facts) -> list[str]:
    """The project generators a batch loop iterates (``for batch in batches(files, 32):``):
    they build each batch, like a producer."""
    if facts.style != "iter":
        return []
    fn = graph.fn(facts.function)
    out = []
    for i, call in enumerate(fn.calls):
        if call.stmt == facts.loop.stmt and call.stmt_kind == "other":
            out += [t for t in graph.targets(facts.function, i) if graph.fn(t).is_generator]
    return out


def data_path(graph: CallGraph, loops) -> dict[str, str]:
    """Every function of the data path, with why: the functions that produce one sample
    (each data set's ``__getitem__`` and the readers it dispatches to, the functions a batch
    producer calls per sample: ML-R9's targets), the batch producers of producer-style batch
    loops (``get_batch()``), and every project function those call."""
    roots: dict[str, str] = {}
    for name, getitem_id, readers in dataset_sample_readers(graph):
        for function_id in sorted({getitem_id, *readers}):
            roots.setdefault(function_id, f"produces one sample of {name}")
    for function_id, producer in per_sample_functions(graph, loops).items():
        roots.setdefault(function_id, f"produces one sample of the batch {producer}() builds")
    for facts in loops.of_kind("batch"):
        for producer in facts.producers:
            roots.setdefault(producer, f"produces the batches of the loop at {facts.loop.line}")
    out = dict(roots)
    for function_id, why in roots.items():
        for reached in sorted(graph.reachable(function_id)):
            if reached in graph.functions:
                out.setdefault(reached, f"called from the data path ({why})")
    return out


def sample_readers(graph: CallGraph, getitem_id: str, depth: int = 6) -> set[str]:
    """The functions that really read one sample for ``__getitem__``: follow what it only
    dispatches to (``return self.reader.read_index(i)``, through factories and overrides
    that call ``super()``) until a function does the reading itself."""
    frontier, found = [getitem_id], set()
    for _ in range(depth):
        following = []
        for function_id in frontier:
            targets = _dispatches_to(graph, function_id)
            if targets and not does_io(graph, function_id):
                following.extend(targets)
            else:
                found.add(function_id)
        if not following:
            break
        frontier = list(dict.fromkeys(following))
    else:
        found.update(frontier)
    # an override that calls the base's version nests in it: keep the innermost
    return {f for f in found if not any(o != f and o in graph.reachable(f) for o in found)}


def _dispatches_to(graph: CallGraph, function_id: str) -> list[str]:
    """The project functions ``function_id`` hands the sample over to: every project call it
    makes is the one it returns (a 4-line ``__getitem__`` that counts and logs still only
    dispatches)."""
    fn = graph.fn(function_id)
    returned, other = [], False
    # calls inside a log line's arguments (``logger.debug(f"... {rank()}")``) are not work
    logged = {c.stmt for c in fn.calls if c.stmt_kind == "expr" and c.method in facts(graph).log_methods}
    for i, call in enumerate(fn.calls):
        targets = [t for t in graph.targets(function_id, i)
                   if not graph.fn(t).is_generator and not graph.fn(t).is_async]
        if not targets or (call.stmt in logged and call.stmt_kind != "expr"):
            continue
        if call.stmt_kind == "return":
            returned.extend(targets)
        else:
            other = True
    return [] if other else returned


# -- I/O handles: what a name opened -------------------------------------------------------------

#: calls that open something to read from later, by qualified name -> the handle's kind. A PIL
#: image is lazy: ``Image.open`` reads the header, the pixels come with ``convert``/``load``
OPENERS: dict[str, str] = {
    "open": "file",
    "io.open": "file",
    "h5py.File": "h5file",
    "numpy.memmap": "memmap",
    "zarr.open": "zarr",
    "zarr.open_array": "zarr",
    "PIL.Image.open": "image",
}
#: a plain name or ``self`` attribute
HANDLE_NAME = re.compile(r"^(self\.)?[A-Za-z_]\w*$")


def call_chain(text: str | None) -> tuple[str, tuple[str, ...], int] | None:
    """``np.load().astype()[]`` -> (``np.load``, (``astype``,), 1): the first call, the
    methods called on its result, the subscripts after them. None if ``text`` is no call."""
    if not text:
        return None
    subs = 0
    while text.endswith("[]"):
        text, subs = text[:-2], subs + 1
    if not text.endswith("()"):
        return None
    base, *methods = text[:-2].split("().")
    return base, tuple(methods), subs


class Handles:
    """What a name holds in one function, among the handles of :data:`OPENERS`: from value flow
    (locals, ``self`` attributes set anywhere in the class), from a local ``ds = f['name']``
    (an h5py data set), or from the one ``with`` item that opens something around a statement
    that uses a name the function never binds (``with open(p, 'rb') as f:``)."""

    def __init__(self, graph, function_id: str) -> None:
        self.graph = graph
        self.function_id = function_id
        self.fs, self.fn = graph.functions[function_id]

    def kind(self, name: str, path: StmtPath, depth: int = 3) -> str | None:
        graph, fs, fn = self.graph, self.fs, self.fn
        kinds = set()
        for origin in graph.values.of(self.function_id, name) if graph.values is not None else ():
            if origin.startswith("ext:"):
                chain = call_chain(origin[4:])
                if chain is not None and not chain[1] and not chain[2]:
                    kinds.add(OPENERS.get(chain[0]) or OPENERS.get(graph.qualify(fs, chain[0])))
        local = [a for a in fn.assigns if a.target == name]
        for a in local:
            chain = call_chain(a.value)
            if chain is not None and not chain[1] and not chain[2]:
                qualified = graph.qualify(fs, chain[0])
                if qualified == "numpy.load" and any(k == "mmap_mode" and v not in (None, "None")
                                                     for k, v in a.call_keywords):
                    kinds.add("memmap")
                else:
                    kinds.add(OPENERS.get(qualified))
            elif a.value and a.value.endswith("[]") and depth:
                holder = a.value[:-2]
                if HANDLE_NAME.match(holder) and self.kind(holder, a.stmt, depth - 1) == "h5file":
                    kinds.add("h5dataset")
                else:
                    kinds.add(None)
            else:
                kinds.add(None)
        if not local and not kinds and not name.startswith("self.") and name not in fn.params:
            kinds.add(self._with_bound(path))
        kinds.discard(None)
        return kinds.pop() if len(kinds) == 1 else None

    def _with_openers(self, path: StmtPath) -> list[tuple[str, tuple[str | None, ...], tuple]]:
        """(handle kind, args, keywords) of the ``with`` items around ``path`` that open something."""
        found = []
        for call in self.fn.calls:
            if call.stmt_kind == "with" and len(call.stmt) < len(path) and path[:len(call.stmt)] == call.stmt:
                chain = call_chain(call.callee + "()")
                kind = OPENERS.get(self.graph.qualify(self.fs, chain[0])) if chain else None
                if kind:
                    found.append((kind, call.args, call.keywords))
        return found

    def _with_bound(self, path: StmtPath) -> str | None:
        """The handle the ``with`` blocks around ``path`` open, if exactly one does."""
        found = {kind for kind, _, _ in self._with_openers(path)}
        return found.pop() if len(found) == 1 else None

    def file_mode(self, name: str, path: StmtPath) -> str | None:
        """The mode (``"r"``, ``"wb"``...) of the file ``name`` holds, when a local ``open(...)``
        or the one ``with open(...)`` around ``path`` says it with a literal; None otherwise."""
        if self.kind(name, path) != "file":
            return None
        local = [(a.call_args, a.call_keywords) for a in self.fn.assigns if a.target == name]
        if not local and not name.startswith("self.") and name not in self.fn.params:
            local = [(args, keywords) for kind, args, keywords in self._with_openers(path) if kind == "file"]
        if len(local) != 1:
            return None
        args, keywords = local[0]
        mode = args[1] if len(args) > 1 else dict(keywords).get("mode", "'r'")
        if not mode or len(mode) < 3 or mode[0] not in "'\"" or mode[-1] != mode[0]:
            return None
        return mode[1:-1]


# -- checkpoints: what ML-R18 (regions) and ML-R26 (I/O phases) agree on ---------------------------

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
        if len(call.stmt) - depth > len(call.withs) + len(call.loops):
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
        if not (nested or returns_load):
            continue
        node = CHECKPOINT_NODES[kind]
        candidates[node].discard(function_id)
        folded[function_id] = node
        for caller, site in sites:
            cfn = graph.fn(caller)
            index = next(i for i, c in enumerate(cfn.calls) if c is site or c == site)
            obj = site.assigned_to[0] if len(site.assigned_to) == 1 else None
            ops_of = plan.ops.setdefault(caller, [])
            if all(op.index != index for op in ops_of):
                ops_of.append(CheckpointOp(index, kind, f"{fn.name}()", True, None, obj))
                ops_of.sort(key=lambda op: op.index)
            caller_kinds = {op.kind for op in ops_of}
            if len(caller_kinds) == 1 and caller not in entries and not checkpoint_function(graph, caller, ops_of):
                candidates[node].add(caller)
    return folded


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


def torch_name(fs: FileSummary, callee: str) -> str | None:
    """The file's name for the torch module: the head of ``callee`` as called
    (``torch.save``, ``th.load``), else a top-level ``import torch``."""
    head = callee.split(".", 1)[0]
    if "." in callee and fs.imports.get(head) == "torch":
        return head
    return next((local for local, qualified in sorted(fs.imports.items())
                 if qualified == "torch" and local in fs.top_imports), None)


def run_inside(graph: CallGraph, is_region) -> set[str]:
    """The functions run from inside a region that ``is_region(fs, text)`` recognises (a
    ``with`` around the call, or a decorated caller): a region of the same kind in them would
    nest in that one."""
    roots: set[str] = set()
    for function_id, (fs, fn) in graph.functions.items():
        decorated = any(is_region(fs, d) for d in fn.decorators)
        for i, call in enumerate(fn.calls):
            if decorated or any(is_region(fs, w) for w in call.withs):
                roots.update(graph.targets(function_id, i))
    out = set(roots)
    for r in roots:
        out |= graph.reachable(r)
    return out
