"""The ``collectives`` analysis: which calls are collectives or point-to-point operations of
torch.distributed, Horovod or mpi4py, and which node of ``ai.comm`` times each.

ML-R5 wraps them; a third party's rule ``requires = ("collectives",)`` and reads
``ctx.analysis("collectives").sites`` (function id -> ``[(call index, Collective)]``). What
the libraries' collectives are is knowledge (``collective_functions``, ``mpi_methods``...
in plugins/library.toml): a plugin teaches another library through ``dftpass_knowledge``.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import attrs

from dftpass.core.callgraph import CallGraph
from dftpass.core.passes import Pass, PassKind
from dftpass.core.summary import CallSite
from dftpass.core.values import kind, subject
from dftpass.plugins.knowledge import Facts, facts, library_receiver

#: a receiver that reads like a communicator (only to explain why a call was left alone)
COMM_NAME = re.compile(r"(?i)(^|_)comm(unicator)?(_\w+)?$")


class Collective(NamedTuple):
    op: str  # the node below ``comm``
    library: str
    nonblocking: bool


def _is_comm(known: Facts, text: str) -> bool:
    """``mpi4py.MPI.COMM_WORLD``, ``mpi4py.MPI.COMM_WORLD.Split()``, ``mpi4py.MPI.Intracomm()``."""
    prefix = "mpi4py.MPI."
    if not text.startswith(prefix):
        return False
    parts = text[len(prefix):].split(".")
    if parts[0].removesuffix("()") not in known.mpi_communicators:
        return False
    return all(p.endswith("()") and p[:-2] in known.mpi_derived_communicators for p in parts[1:])


def _mpi_receiver(graph, function_id: str, fs, receiver: str) -> bool:
    known = facts(graph)
    if _is_comm(known, graph.qualify(fs, receiver)):
        return True
    if graph.values is None:
        return False
    return any(kind(o) == "ext" and _is_comm(known, subject(o)) for o in graph.values.of(function_id, receiver))


def _local(fn, name: str) -> bool:
    return name in fn.params or any(a.target == name for a in fn.assigns)


def collective(graph, function_id: str, call: CallSite) -> Collective | None:
    """What collective ``call`` runs, if it is one of torch.distributed, Horovod or mpi4py."""
    fs, fn = graph.functions[function_id]
    if "?" in call.callee:
        return None
    known = facts(graph)
    head = call.callee.split(".")[0]
    if head in fs.imports and not _local(fn, head):
        module, _, name = graph.qualify(fs, call.callee).rpartition(".")
        library = known.collective_library(module)
        if library is not None:
            ops = known.collective_functions[library]
            # a Horovod call's ``*_async`` form returns a handle; a torch call's ``async_op=True``
            base = name.removesuffix("_async")
            async_op = dict(call.keywords).get("async_op", "False") not in ("False", "None")
            if name in ops:
                return Collective(ops[name], library, name in known.collective_nonblocking or async_op)
            if base != name and base in ops:
                return Collective(ops[base], library, True)
    if call.method in known.mpi_methods and call.receiver and _mpi_receiver(graph, function_id, fs, call.receiver):
        return Collective(known.mpi_methods[call.method], "mpi4py", call.method in known.collective_nonblocking)
    if call.receiver and any(call.method in ops for _, ops in known.collective_objects):
        for built in library_receiver(graph, fs, fn, call.receiver):
            for prefix, ops in known.collective_objects:
                if built.startswith(prefix) and call.method in ops:
                    return Collective(ops[call.method], prefix.split(".")[0], False)
    return None


@attrs.define
class CollectiveSites:
    #: function id -> (call index, what it runs), in call order
    sites: dict[str, list[tuple[int, Collective]]] = attrs.field(factory=dict)
    #: (function id, call index) of calls named like an mpi4py operation on a receiver named
    #: like a communicator that value flow cannot tie to one (said, not wrapped)
    unresolved_mpi: list[tuple[str, int]] = attrs.field(factory=list)

    def at(self, function_id: str, index: int) -> Collective | None:
        return next((c for i, c in self.sites.get(function_id, ()) if i == index), None)


def find_collectives(graph: CallGraph) -> CollectiveSites:
    out = CollectiveSites()
    for function_id, (fs, fn) in graph.functions.items():
        for i, call in enumerate(fn.calls):
            found = collective(graph, function_id, call)
            if found is not None:
                out.sites.setdefault(function_id, []).append((i, found))
            elif call.method in facts(graph).mpi_methods and COMM_NAME.search(call.receiver.rsplit(".", 1)[-1]):
                out.unresolved_mpi.append((function_id, i))
    return out


class CollectivesAnalysis(Pass):
    """Find the collectives (``ctx.analysis("collectives")``: a :class:`CollectiveSites`)."""

    id = "collectives"
    title = "Collective calls"
    kind = PassKind.ANALYSIS
    requires = ("callgraph",)

    def run(self, ctx) -> CollectiveSites:
        return find_collectives(ctx.analysis("callgraph"))
