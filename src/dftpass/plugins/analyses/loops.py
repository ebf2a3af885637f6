"""The ``loops`` analysis: what every loop iterates (see :mod:`dftpass.core.loops`)."""

from __future__ import annotations

import attrs

from dftpass.core import emitter
from dftpass.core.dataflow import DataFlow, Oracle
from dftpass.core.loops import LoopAnalysis, LoopOptions
from dftpass.core.passes import Pass, PassKind
from dftpass.plugins.analyses.transfers import moves_node_to_device
from dftpass.plugins.knowledge import does_step, facts, LOSS_NAME, step_anchor, step_consumers, trains


class LoopsAnalysis(Pass):
    """Classifies every loop as a batch loop, an epoch loop or another loop.

    Options:
        loader_name_pattern: regex for names that read like data loaders.
        loader_factories: more calls whose result is a loader (added to ``DataLoader``,
            ``WebLoader``... and what framework plugins know).
        loader_modules: more qualified prefixes of data pipelines (``tf.data.``...).
        transparent_wrappers: more calls that iterate what they wrap (``tqdm``...).
        batch_producer_pattern, accumulation_pattern, epoch_name_pattern: regexes (see
            :class:`dftpass.core.loops.LoopOptions`).
    """

    id = "loops"
    title = "Loop roles"
    kind = PassKind.ANALYSIS
    requires = ("callgraph",)
    Options = LoopOptions

    def run(self, ctx) -> LoopAnalysis:
        graph = ctx.analysis("callgraph")
        return loop_analysis(graph, with_knowledge(self.options, ctx.manager.knowledge),
                             ctx.project.read_source)


def loop_analysis(graph, options: LoopOptions, read_source) -> LoopAnalysis:
    """The loops of the project, with batch provenance's walker (``read_source(relpath)``
    gives a file's text) answering where a step's data is drawn when names do not tell."""
    analysis = LoopAnalysis(graph, options, emitter.recognize,
                            lambda function_id, loops: does_step(graph, function_id, loops),
                            lambda function_id, loops: step_consumers(graph, function_id, loops),
                            lambda function_id, loops: trains(graph, function_id,
                                                              lambda call: bool(set(call.loops) & loops)),
                            anchor=lambda function_id, inside, targets: step_anchor(graph, function_id, inside,
                                                                                    targets),
                            trains_once=lambda function_id: not graph.fn(function_id).is_module
                            and not graph.in_model_class(function_id)
                            and trains(graph, function_id, lambda call: not call.loops))
    analysis.dataflow = DataFlow(graph, read_source, data_oracle(graph, analysis))
    return analysis.run()


def data_oracle(graph, loops: LoopAnalysis) -> Oracle:
    """What batch provenance asks of the library knowledge: loaders (the loops analysis's
    answer), reads (``io_calls``), device moves (the transfers analysis's), data sets."""
    io = facts(graph).io_calls
    plain = frozenset(n for n in io if "." not in n)
    dotted_names = tuple("." + n for n in io if "." in n)

    def is_loader(function_id: str, text: str) -> bool:
        fs, fn = graph.functions[function_id]
        return loops.loader_like(fs, fn, text)

    def is_read(function_id: str, qualified: str, method: str) -> bool:
        return method in plain or qualified.endswith(dotted_names) or qualified in io

    def is_dataset(class_id: str) -> bool:
        return bool(graph.method(class_id, "__getitem__") or graph.method(class_id, "__iter__"))

    def is_model(function_id: str) -> bool:
        """Running the model: its ``forward`` (or ``__call__``), a class method that builds one,
        its ``__init__``; a model's other methods (tacotron2's ``model.parse_batch(batch)``,
        which moves the batch with ``to_gpu``) handle data like any project function."""
        owner = graph.class_of_method(function_id)
        if owner is None or not graph.is_module_class(owner):
            return False
        fn = graph.fn(function_id)
        return fn.name in ("forward", "__call__", "__init__") or not graph.is_bound_method(function_id) \
            or not any(p for p in fn.positional[1:])

    optimizers = facts(graph).optimizer_classes

    def is_state(function_id: str, name: str) -> bool:
        """A model (an instance of a project module class) or an optimizer (a ``torch.optim``
        class or one the knowledge names), by what the name may hold: never by its name."""
        if graph.values is None:
            return False
        for origin in graph.values.of(function_id, name):
            k, _, s = origin.partition(":")
            if k == "inst" and graph.is_module_class(s) and not LOSS_NAME.search(graph.classes[s][1].name):
                return True
            if k == "ext" and s.endswith("()") and (".optim." in s or s[:-2].rsplit(".", 1)[-1] in optimizers):
                return True
        return False

    return Oracle(is_loader, is_read, lambda function_id, call: moves_node_to_device(graph, function_id, call),
                  is_dataset, is_model, is_state)


def with_knowledge(options: LoopOptions, known: dict[str, tuple[str, ...]]) -> LoopOptions:
    """``options`` with the plugins' library lists added (``PassManager.knowledge``: every
    plugin's ``dftpass_knowledge``): a project's ``loader_factories`` adds to ``DataLoader``
    and the others, never replaces them."""
    scoped = {prefix: [*options.scoped_loader_names.get(prefix, ()), *patterns]
              for prefix, patterns in known["loader_names"].items()}
    return attrs.evolve(options, scoped_loader_names={**options.scoped_loader_names, **scoped}, **{
        kind: list(dict.fromkeys([*known[kind], *getattr(options, kind)]))
        for kind in ("loader_factories", "loader_modules", "transparent_wrappers")})
