"""The ``callgraph`` analysis: see :mod:`dftpass.core.callgraph`."""

from __future__ import annotations

from dftpass.core.callgraph import CallGraph, build_callgraph
from dftpass.core.passes import Pass, PassKind
from dftpass.plugins.knowledge import resolution_hints


class CallGraphAnalysis(Pass):
    """The project's call graph (networkx), its entry points, and class instantiations."""

    id = "callgraph"
    title = "Call graph"
    kind = PassKind.ANALYSIS

    def run(self, ctx) -> CallGraph:
        return build_callgraph(ctx.project.summaries(), ctx.project.console_scripts(),
                               resolution_hints(ctx.manager.knowledge))
