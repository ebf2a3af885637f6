"""Models: the classes a call runs, the program's top-level model, factories, and what is a
model call."""

from __future__ import annotations

import re

from dftpass.core.callgraph import CallGraph
from dftpass.core.values import classes, kind, subject
from dftpass.plugins.knowledge.facts import facts


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
