"""The ``collectives`` analysis: which calls are collectives or point-to-point operations of
torch.distributed, Horovod or mpi4py, and which node of ``ai.comm`` times each.

ML-R5 wraps them; a third party's rule ``requires = ("collectives",)`` and reads
``ctx.analysis("collectives").sites`` (function id -> ``[(call index, Collective)]``) instead
of copying the tables below.
"""

from __future__ import annotations

import re
from typing import NamedTuple

import attrs

from dftpass.core.callgraph import CallGraph
from dftpass.core.passes import Pass, PassKind
from dftpass.core.summary import CallSite
from dftpass.core.values import kind, subject

#: torch.distributed function -> the ``ai.comm`` node (there is no ``broadcast`` node: ``bcast``)
TORCH_OPS = {
    "all_reduce": "all_reduce",
    "broadcast": "bcast", "broadcast_object_list": "bcast",
    "all_gather": "all_gather", "all_gather_into_tensor": "all_gather", "all_gather_object": "all_gather",
    "reduce_scatter": "reduce_scatter", "reduce_scatter_tensor": "reduce_scatter",
    "reduce": "reduce",
    "gather": "gather", "gather_object": "gather",
    "scatter": "scatter", "scatter_object_list": "scatter",
    "barrier": "barrier", "monitored_barrier": "barrier",
    "send": "send", "isend": "send", "send_object_list": "send",
    "recv": "receive", "irecv": "receive", "recv_object_list": "receive",
    "all_to_all": "all_to_all", "all_to_all_single": "all_to_all",
}
TORCH_MODULES = ("torch.distributed", "torch.distributed.distributed_c10d")
#: point-to-point calls of torch.distributed that always return a work handle
TORCH_NONBLOCKING = frozenset({"isend", "irecv"})
#: Horovod function (any framework binding: ``horovod.torch``, ``horovod.tensorflow``...) ->
#: node; each also has an ``_async`` form that returns a handle for ``hvd.synchronize``.
#: ``join`` blocks until every rank has joined: a barrier.
HOROVOD_OPS = {
    "allreduce": "all_reduce", "allreduce_": "all_reduce", "grouped_allreduce": "all_reduce",
    "grouped_allreduce_": "all_reduce",
    "allgather": "all_gather", "allgather_object": "all_gather", "grouped_allgather": "all_gather",
    "broadcast": "bcast", "broadcast_": "bcast", "broadcast_object": "bcast", "broadcast_parameters": "bcast",
    "broadcast_optimizer_state": "bcast", "broadcast_variables": "bcast",
    "alltoall": "all_to_all",
    "reducescatter": "reduce_scatter", "grouped_reducescatter": "reduce_scatter",
    "barrier": "barrier", "join": "barrier",
}
#: mpi4py communicator method -> node: the pickle-based lower-case methods, the buffer-based
#: capitalised ones and their vector (``v``) forms
MPI_OPS = {
    **{m: "all_reduce" for m in ("allreduce", "Allreduce")},
    **{m: "bcast" for m in ("bcast", "Bcast")},
    **{m: "barrier" for m in ("barrier", "Barrier")},
    **{m: "gather" for m in ("gather", "Gather", "Gatherv")},
    **{m: "scatter" for m in ("scatter", "Scatter", "Scatterv")},
    **{m: "all_gather" for m in ("allgather", "Allgather", "Allgatherv")},
    **{m: "reduce" for m in ("reduce", "Reduce")},
    **{m: "reduce_scatter" for m in ("Reduce_scatter", "Reduce_scatter_block")},
    **{m: "all_to_all" for m in ("alltoall", "Alltoall", "Alltoallv")},
    **{m: "send" for m in ("send", "Send", "ssend", "Ssend", "isend", "Isend", "issend", "Issend")},
    **{m: "receive" for m in ("recv", "Recv", "irecv", "Irecv")},
    **{m: op for m, op in (("Iallreduce", "all_reduce"), ("Ibcast", "bcast"), ("Ibarrier", "barrier"),
                           ("Igather", "gather"), ("Iscatter", "scatter"), ("Iallgather", "all_gather"),
                           ("Ireduce", "reduce"), ("Ialltoall", "all_to_all"))},
}
#: mpi4py methods that return a request instead of blocking
MPI_NONBLOCKING = frozenset({"isend", "Isend", "issend", "Issend", "irecv", "Irecv", "Iallreduce", "Ibcast",
                             "Ibarrier", "Igather", "Iscatter", "Iallgather", "Ireduce", "Ialltoall"})
#: what an mpi4py communicator is: ``MPI.COMM_WORLD``, ``MPI.Intracomm(...)``, and what its
#: methods that make communicators return (``MPI.COMM_WORLD.Split(color)``)
MPI_COMMS = ("COMM_WORLD", "COMM_SELF", "Comm", "Intracomm", "Intercomm", "Cartcomm", "Graphcomm",
             "Distgraphcomm", "Topocomm")
MPI_DERIVED = frozenset({"Dup", "Clone", "Split", "Split_type", "Create", "Create_group", "Create_cart",
                         "Create_graph", "Create_dist_graph", "Create_intercomm", "Merge", "Sub", "Get_parent",
                         "Accept", "Connect", "Spawn", "Dup_with_info"})
#: calls that wait for a handle: ``work.wait()``, ``req.Wait()``, ``MPI.Request.Waitall(reqs)``,
#: ``hvd.synchronize(handle)``
WAITS = frozenset({"wait", "Wait", "waitall", "Waitall", "wait_all", "synchronize"})
#: a receiver that reads like a communicator (only to explain why a call was left alone)
COMM_NAME = re.compile(r"(?i)(^|_)comm(unicator)?(_\w+)?$")


class Collective(NamedTuple):
    op: str  # the node below ``comm``
    library: str
    nonblocking: bool


def _is_comm(text: str) -> bool:
    """``mpi4py.MPI.COMM_WORLD``, ``mpi4py.MPI.COMM_WORLD.Split()``, ``mpi4py.MPI.Intracomm()``."""
    prefix = "mpi4py.MPI."
    if not text.startswith(prefix):
        return False
    parts = text[len(prefix):].split(".")
    if parts[0].removesuffix("()") not in MPI_COMMS:
        return False
    return all(p.endswith("()") and p[:-2] in MPI_DERIVED for p in parts[1:])


def _mpi_receiver(graph, function_id: str, fs, receiver: str) -> bool:
    if _is_comm(graph.qualify(fs, receiver)):
        return True
    if graph.values is None:
        return False
    return any(kind(o) == "ext" and _is_comm(subject(o)) for o in graph.values.of(function_id, receiver))


def _local(fn, name: str) -> bool:
    return name in fn.params or any(a.target == name for a in fn.assigns)


def collective(graph, function_id: str, call: CallSite) -> Collective | None:
    """What collective ``call`` runs, if it is one of torch.distributed, Horovod or mpi4py."""
    fs, fn = graph.functions[function_id]
    if "?" in call.callee:
        return None
    head = call.callee.split(".")[0]
    if head in fs.imports and not _local(fn, head):
        module, _, name = graph.qualify(fs, call.callee).rpartition(".")
        if module in TORCH_MODULES and name in TORCH_OPS:
            async_op = dict(call.keywords).get("async_op", "False") not in ("False", "None")
            return Collective(TORCH_OPS[name], "torch.distributed", name in TORCH_NONBLOCKING or async_op)
        if module == "horovod" or module.startswith("horovod."):
            base = name.removesuffix("_async")
            if base in HOROVOD_OPS:
                return Collective(HOROVOD_OPS[base], "horovod", name != base)
    if call.method in MPI_OPS and call.receiver and _mpi_receiver(graph, function_id, fs, call.receiver):
        return Collective(MPI_OPS[call.method], "mpi4py", call.method in MPI_NONBLOCKING)
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
            elif call.method in MPI_OPS and COMM_NAME.search(call.receiver.rsplit(".", 1)[-1]):
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
