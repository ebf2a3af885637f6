"""The library facts the recognisers read (every plugin's ``dftpass_knowledge``, merged),
and the call graph's resolution hints built from them."""

from __future__ import annotations

import attrs
import functools
from typing import Mapping

import attrs

from dftpass.core.callgraph import CallGraph, ResolutionHints, TrainingHints
from dftpass.core.manager import merge_knowledge
from dftpass.core.values import ValueHints
from dftpass.plugins.library import builtin_knowledge


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
