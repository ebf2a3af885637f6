"""The ``loops`` analysis: what every loop iterates (see :mod:`dftpass.core.loops`)."""

from __future__ import annotations

import attrs

from dftpass.core import emitter
from dftpass.core.loops import LoopAnalysis, LoopOptions
from dftpass.core.passes import Pass, PassKind
from dftpass.plugins.knowledge import does_step


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
        return LoopAnalysis(graph, with_knowledge(self.options, ctx.manager.knowledge), emitter.recognize,
                            lambda function_id, loops: does_step(graph, function_id, loops)).run()


def with_knowledge(options: LoopOptions, known: dict[str, tuple[str, ...]]) -> LoopOptions:
    """``options`` with the plugins' library lists added (``PassManager.knowledge``: every
    plugin's ``dftpass_knowledge``): a project's ``loader_factories`` adds to ``DataLoader``
    and the others, never replaces them."""
    scoped = {prefix: [*options.scoped_loader_names.get(prefix, ()), *patterns]
              for prefix, patterns in known["loader_names"].items()}
    return attrs.evolve(options, scoped_loader_names={**options.scoped_loader_names, **scoped}, **{
        kind: list(dict.fromkeys([*known[kind], *getattr(options, kind)]))
        for kind in ("loader_factories", "loader_modules", "transparent_wrappers")})
