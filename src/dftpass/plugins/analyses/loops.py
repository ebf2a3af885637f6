"""The ``loops`` analysis: what every loop iterates (see :mod:`dftpass.core.loops`)."""

from __future__ import annotations

from dftpass.core import emitter
from dftpass.core.loops import LoopAnalysis, LoopOptions
from dftpass.core.passes import Pass, PassKind
from dftpass.plugins.knowledge import does_step


class LoopsAnalysis(Pass):
    """Classifies every loop as a batch loop, an epoch loop or another loop.

    Options:
        loader_name_pattern: regex for names that read like data loaders.
        loader_factories: calls whose result is a loader (``DataLoader``, ``WebLoader``...).
        transparent_wrappers: calls that iterate what they wrap (``enumerate``, ``tqdm``...).
    """

    id = "loops"
    title = "Loop roles"
    kind = PassKind.ANALYSIS
    requires = ("callgraph",)
    Options = LoopOptions

    def run(self, ctx) -> LoopAnalysis:
        graph = ctx.analysis("callgraph")
        return LoopAnalysis(graph, self.options, emitter.recognize,
                            lambda function_id, loops: does_step(graph, function_id, loops)).run()
