"""Models: the classes a call runs, the program's top-level model, factories, and what is a
model call."""

from __future__ import annotations

import re

from dftpass.core.callgraph import CallGraph
from dftpass.core.values import classes, kind, subject
from dftpass.plugins.knowledge.facts import facts


#: more candidate model classes than this at one call site: the call site is timed instead of
#: decorating every class (ML-R7 places so, ML-R11 checks so)
MAX_MODEL_CLASSES = 4
#: names of the objects a training step calls as its model (when nothing else tells)
MODEL_NAME = re.compile(r"(?i)^(model|net|network|module|backbone|encoder|decoder|generator|discriminator|"
                        r"policy|critic|actor|classifier|transformer|gpt|llm|lm)s?(_\w+)?$|_(model|net)$")
#: callables that compute a loss: a module, but not the model
LOSS_NAME = re.compile(r"(?i)loss|criterion|crossentropy")


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


def is_model_entry(graph: CallGraph, function_id: str) -> bool:
    """A model's ``forward`` or ``__call__``: what calling the model runs."""
    owner = graph.class_of_method(function_id)
    return owner is not None and graph.fn(function_id).name in ("forward", "__call__") and \
        graph.is_module_class(owner)


# -- data-parallel wrappers: what ML-R7 (placement) and ML-R11 (the check) agree on ------------

#: the wrappers whose ``forward`` does more than the module's own (last name of the class)
MODEL_WRAPPERS = ("DistributedDataParallel", "FullyShardedDataParallel", "DataParallel", "DeepSpeedEngine")
#: libraries the wrappers come from (their qualified names start with one of these)
WRAPPER_LIBRARIES = ("torch.", "deepspeed.", "fairscale.")
#: ``deepspeed.initialize(...)`` returns (engine, optimizer, loader, scheduler)
DEEPSPEED_INIT = "deepspeed.initialize"


def wrapper_name(qualified: str) -> str | None:
    """``DistributedDataParallel`` for ``torch.nn.parallel.DistributedDataParallel()``; None
    for anything else."""
    last = qualified.removesuffix("()").rsplit(".", 1)[-1]
    if last in MODEL_WRAPPERS and qualified.startswith(WRAPPER_LIBRARIES):
        return last
    return None


def deepspeed_init(graph: CallGraph, function_id: str, name: str):
    """The ``deepspeed.initialize`` call whose engine ``name`` is in the function
    (``engine, opt, _, _ = deepspeed.initialize(...)`` or ``engine = deepspeed.initialize(...)[0]``)."""
    fs, fn = graph.functions[function_id]
    for call in fn.calls:
        if graph.qualify(fs, call.callee) != DEEPSPEED_INIT:
            continue
        if call.assigned_to[:1] == (name,) or any(
                a.target == name and a.stmt == call.stmt and (a.value or "").endswith("()[]") for a in fn.assigns):
            return call
    return None


def model_wrapper(graph: CallGraph, function_id: str, callee: str, depth: int = 0) -> tuple[str, str, str] | None:
    """The wrapper ``callee`` holds in the function: (wrapper name, the function where it is
    known, the text it is known by there: a caller's argument, for a parameter); None if none."""
    if "(" in callee or depth > 3:
        return None
    if deepspeed_init(graph, function_id, callee) is not None:
        return "DeepSpeedEngine", function_id, callee
    origins = graph.values.of(function_id, callee) if graph.values is not None else frozenset()
    for o in origins:
        if kind(o) == "ext" and (name := wrapper_name(subject(o))):
            return name, function_id, callee
        if kind(o) == "inst":
            for base in graph.external_bases(subject(o)):
                if name := wrapper_name(base):
                    return name, function_id, callee
    fn = graph.fn(function_id)
    if callee in fn.params:  # ``def train(model_engine, ...)``: what the callers pass
        offset = 1 if graph.is_bound_method(function_id) else 0
        index = fn.positional.index(callee) - offset if callee in fn.positional else -1
        for caller, site in graph.call_sites_of(function_id):
            arg = dict(site.keywords).get(callee)
            if arg is None and 0 <= index < len(site.args):
                arg = site.args[index]
            if arg and (found := model_wrapper(graph, caller, arg, depth + 1)):
                return found
    return None


def wrapped_classes(graph: CallGraph, function_id: str, callee: str) -> set[str]:
    """The project module classes inside the wrapper ``callee`` holds (what ``DDP(...)`` is
    given, what a model factory of the project returns, the ``model=`` of
    ``deepspeed.initialize``); empty when the module is a library's or unknown."""
    found = set(model_classes(graph, function_id, callee))
    init = deepspeed_init(graph, function_id, callee)
    if init is not None:
        model = dict(init.keywords).get("model") or (init.args[1] if len(init.args) > 1 else None)
        if model:
            found |= model_classes(graph, function_id, model)
    origins = graph.values.of(function_id, callee) if graph.values is not None else frozenset()
    factories = {subject(o).removesuffix("()") for o in origins if kind(o) == "ext"
                 and subject(o).removesuffix("()").rsplit(".", 1)[-1] in facts(graph).model_factories}
    if factories:
        found |= _factory_products(graph, factories)
    return {c for c in found if not any(wrapper_name(b) for b in graph.external_bases(c))}


def decoratable_wrapped_classes(graph: CallGraph, function_id: str, callee: str) -> set[str]:
    """The classes whose ``forward`` gets the region of a call of the wrapper ``callee`` holds:
    :func:`wrapped_classes` with a forward of their own, when there are no more than
    :data:`MAX_MODEL_CLASSES`; else none (the call site is timed: a project's registry may
    build any of them)."""
    found = model_wrapper(graph, function_id, callee)
    if found is None:
        return set()
    methods = graph.hints.module_call_methods
    inner = {c for c in wrapped_classes(graph, found[1], found[2])
             if any(m in graph.classes[c][1].methods for m in methods)}
    return inner if len(inner) <= MAX_MODEL_CLASSES else set()


def _factory_products(graph: CallGraph, factories: set[str]) -> set[str]:
    """The project model classes that the project's calls of these factories return."""
    out: set[str] = set()
    for caller, (fs, fn) in graph.functions.items():
        for i, call in enumerate(fn.calls):
            if call.method not in facts(graph).model_factories or graph.qualify(fs, call.callee) not in factories:
                continue
            for target in graph.targets(caller, i):
                for o in graph.values.returns_of(target):
                    if kind(o) == "inst" and graph.is_module_class(subject(o)) and \
                            not LOSS_NAME.search(graph.classes[subject(o)][1].name):
                        out.add(subject(o))
    return out
