"""ML-R5: ``with ai.comm.<op>:`` around the collectives of torch.distributed, Horovod and mpi4py."""

from __future__ import annotations

import re
from typing import NamedTuple

from dftpass.api import (
    calls_at, Case, Expect, Finding, origin_kind as kind, origin_subject as subject, Pass, PassKind, recognize,
    Severity, sibling, unwrappable, WrapStmt,
)

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


def collective(graph, function_id: str, call) -> Collective | None:
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


def _in_comm_region(fs, texts) -> bool:
    return any((recognize(fs, t) or "").startswith("comm.") for t in texts)


class Collectives(Pass):
    """Time each collective and point-to-point call with ``with ai.comm.<op>:``.

    What it does:
        Each statement that calls a collective of ``torch.distributed`` (``all_reduce``,
        ``broadcast``, ``all_gather``, ``reduce_scatter``, ``barrier``, ``send``/``recv``,
        ``all_to_all`` and their ``_object``/``_tensor``/``_single`` forms), of Horovod
        (``hvd.allreduce``, ``hvd.broadcast_parameters``, ``hvd.allgather``, ``hvd.alltoall``,
        ``hvd.join``...) or of an mpi4py communicator (``comm.allreduce``/``Allreduce``,
        ``bcast``/``Bcast``, ``Barrier``, ``gather``/``Gather``, ``send``/``Isend``...) is wrapped
        in ``with ai.comm.<op>:``, the node named after the operation: ``all_reduce``,
        ``bcast`` (every broadcast: dftracer has no ``broadcast`` node), ``all_gather``,
        ``reduce_scatter``, ``reduce``, ``gather``, ``scatter``, ``barrier``, ``send``,
        ``receive``, ``all_to_all``.

        A call is recognised by what it is, not by its name: ``dist``/``hvd`` through the
        file's imports (``import torch.distributed as dist``, ``import horovod.torch as hvd``),
        an mpi4py communicator through what the receiver holds (``comm = MPI.COMM_WORLD``, a
        ``Split``/``Dup`` of one, a ``self.comm`` or a parameter that callers pass one). A
        receiver named ``comm`` whose value is unknown is left alone, with a note.

        The region covers the whole simple statement, so ``loss = hvd.allreduce(loss).item()``
        and ``avg = comm.allreduce(x) / size`` are wrapped as they are; so is a one-line
        ``if rank == 0: dist.barrier()``, whose body is opened into a block (an ``a(); b()``
        line is split into lines; ``dftpass strip`` gives both back as lines, a limit of the
        engine that every statement rule shares). Left alone, each with a note: a call in the header of
        a compound statement whose body does work (``if comm.allreduce(flag): save()``), in a
        lambda, in a ``yield`` statement; collectives of different kinds in one statement; a
        statement that also calls a project function running the same collective (the regions
        would nest); calls inside a compiled function (``tf.function``, ``jax.jit``: a region
        there times the tracing, ML-R23). Statements already inside a ``with ai.comm.*:``
        region (or after ``ai.comm.*.start()``), and functions that carry a ``comm`` region,
        are skipped.

        Non-blocking calls (``async_op=True``, ``isend``/``irecv``, Horovod's ``*_async``,
        mpi4py's ``Isend``/``Iallreduce``...): the call's region times the launch only, and
        the wait on its handle in the same function (``work.wait()``, ``req.Wait()``,
        ``hvd.synchronize(handle)``, ``MPI.Request.Waitall(reqs)``) gets a region of the same
        node of its own: the time this rank is blocked on the operation. A note says so; it
        says too when the wait is elsewhere (only the launch is timed then).

    Why:
        Communication is where data-parallel training loses its scaling, and a ``comm`` event
        per collective is what shows it next to compute and I/O. The regions go around the
        call sites, never on functions: the collectives are library functions, and a project
        function that calls one usually does other work as well.

        Non-blocking calls: a region from the call to the wait would also time whatever the
        program overlaps with the communication (that overlap is the point of ``async_op``)
        and label it ``comm``; two regions, launch and wait, time only what is spent in
        communication calls. The wait's event is the blocked time, not the transfer's duration.

    Example:
        ``dist.all_reduce(loss, op=dist.ReduceOp.SUM)`` becomes
        ``with ai.comm.all_reduce:`` / ``dist.all_reduce(loss, op=dist.ReduceOp.SUM)``;
        ``hvd.broadcast_parameters(model.state_dict(), root_rank=0)`` gets ``ai.comm.bcast``.

    Fix safety:
        Safe: a ``with`` around one statement changes nothing the statement computes, and an
        exception still propagates (the event is written all the same). A ``return`` inside
        the region ends it. With the NCCL backend a collective returns once it is queued on the
        GPU (even with ``async_op=False`` the wait is the stream's, not the host's): the region
        times the enqueue, and the time shows up where the host next waits for the GPU (an
        ``.item()``, a ``synchronize``). A region is never put inside another of the same node:
        the nodes are not re-entrant.

    Options:
        None.
    """

    id = "ML-R5"
    title = "Collectives"
    kind = PassKind.TRANSFORM
    requires = ("callgraph", "frameworks", "compiled")
    frameworks = ("distributed",)
    tags = ("distributed", "comm")

    VALID = [
        # already annotated
        "import torch\nimport torch.distributed as dist\nfrom dftracer.python import ai\n\n\n"
        "def reduce_loss(loss):\n    with ai.comm.all_reduce:\n        dist.all_reduce(loss)\n"
        "    return loss / dist.get_world_size()\n",
        # `dist` is a distance matrix here (Tensor.gather), `comm` a project class: neither is a collective
        "import torch\nimport torch.distributed as dist\n\n\nclass Channel:\n    def send(self, message):\n"
        "        print(message)\n\n\ndef nearest(points, centers, comm):\n    dist = torch.cdist(points, centers)\n"
        "    index = dist.argmin(1, keepdim=True)\n    comm.send(index)\n    return dist.gather(1, index)\n\n\n"
        "def run(points, centers):\n    return nearest(points, centers, Channel())\n",
        # inside a tf.function (its caller is what to time), and in an `if` header whose body does work
        Case(
            "import horovod.tensorflow as hvd\nimport tensorflow as tf\nfrom mpi4py import MPI\n\n\n@tf.function\n"
            "def train_step(model, opt, x, y):\n    with tf.GradientTape() as tape:\n"
            "        loss = tf.reduce_mean(tf.square(model(x) - y))\n"
            "    grads = [hvd.allreduce(g) for g in tape.gradient(loss, model.trainable_variables)]\n"
            "    opt.apply_gradients(zip(grads, model.trainable_variables))\n    return loss\n\n\n"
            "def should_stop(comm, flag):\n    if comm.allreduce(flag, op=MPI.LOR):\n        print('stopping')\n"
            "        return True\n    return False\n\n\ndef main(flag):\n"
            "    return should_stop(MPI.COMM_WORLD, flag)\n",
            findings=(
                Expect("info", "compiled by tensorflow.function", line=10),
                Expect("info", "in the header of a compound statement", line=16),
            ),
        ),
    ]
    INVALID = [
        # pytorch/examples imagenet: AverageMeter.all_reduce, a blocking all-reduce
        Case(
            "import torch\nimport torch.distributed as dist\n\n\nclass AverageMeter:\n"
            "    def __init__(self, name):\n        self.name = name\n        self.sum = 0.0\n"
            "        self.count = 0\n\n    def all_reduce(self):\n"
            "        device = torch.device('cuda') if torch.cuda.is_available() else torch.device('cpu')\n"
            "        total = torch.tensor([self.sum, self.count], dtype=torch.float32, device=device)\n"
            "        # sum over every rank\n        dist.all_reduce(total, dist.ReduceOp.SUM, async_op=False)\n"
            "        self.sum, self.count = total.tolist()\n        self.avg = self.sum / self.count\n",
            "from dftracer.python import ai\nimport torch\nimport torch.distributed as dist\n\n\n"
            "class AverageMeter:\n    def __init__(self, name):\n        self.name = name\n        self.sum = 0.0\n"
            "        self.count = 0\n\n    def all_reduce(self):\n"
            "        device = torch.device('cuda') if torch.cuda.is_available() else torch.device('cpu')\n"
            "        total = torch.tensor([self.sum, self.count], dtype=torch.float32, device=device)\n"
            "        # sum over every rank\n        with ai.comm.all_reduce:\n"
            "            dist.all_reduce(total, dist.ReduceOp.SUM, async_op=False)\n"
            "        self.sum, self.count = total.tolist()\n        self.avg = self.sum / self.count\n",
        ),
        # Horovod's PyTorch MNIST example: the metric average and the start-up broadcasts (`bcast`)
        Case(
            "import horovod.torch as hvd\nimport torch\n\n\ndef metric_average(val, name):\n"
            "    tensor = torch.tensor(val)\n    avg_tensor = hvd.allreduce(tensor, name=name)\n"
            "    return avg_tensor.item()\n\n\ndef main(model, optimizer):\n    hvd.init()\n"
            "    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())\n"
            "    hvd.broadcast_parameters(model.state_dict(), root_rank=0)\n"
            "    hvd.broadcast_optimizer_state(optimizer, root_rank=0)\n"
            "    return metric_average(0.0, 'avg_loss')\n",
            "from dftracer.python import ai\nimport horovod.torch as hvd\nimport torch\n\n\n"
            "def metric_average(val, name):\n    tensor = torch.tensor(val)\n    with ai.comm.all_reduce:\n"
            "        avg_tensor = hvd.allreduce(tensor, name=name)\n    return avg_tensor.item()\n\n\n"
            "def main(model, optimizer):\n    hvd.init()\n"
            "    optimizer = hvd.DistributedOptimizer(optimizer, named_parameters=model.named_parameters())\n"
            "    with ai.comm.bcast:\n        hvd.broadcast_parameters(model.state_dict(), root_rank=0)\n"
            "    with ai.comm.bcast:\n        hvd.broadcast_optimizer_state(optimizer, root_rank=0)\n"
            "    return metric_average(0.0, 'avg_loss')\n",
        ),
        # an mpi4py script: the communicator is known by what it holds (COMM_WORLD, a Split_type of it,
        # a parameter that callers pass one); the region covers `... / comm.Get_size()` too
        Case(
            "import numpy as np\nfrom mpi4py import MPI\n\ncomm = MPI.COMM_WORLD\n\n\ndef average(grads, world):\n"
            "    out = np.empty_like(grads)\n    world.Allreduce(grads, out, op=MPI.SUM)\n"
            "    return out / world.Get_size()\n\n\ndef main():\n"
            "    config = comm.bcast({'lr': 0.1} if comm.Get_rank() == 0 else None, root=0)\n"
            "    node = comm.Split_type(MPI.COMM_TYPE_SHARED)\n    grads = average(np.ones(8), node)\n"
            "    loss = comm.allreduce(float(grads.sum()), op=MPI.SUM) / comm.Get_size()\n    comm.Barrier()\n"
            "    return config, loss\n",
            "from dftracer.python import ai\nimport numpy as np\nfrom mpi4py import MPI\n\ncomm = MPI.COMM_WORLD\n"
            "\n\ndef average(grads, world):\n    out = np.empty_like(grads)\n    with ai.comm.all_reduce:\n"
            "        world.Allreduce(grads, out, op=MPI.SUM)\n    return out / world.Get_size()\n\n\ndef main():\n"
            "    with ai.comm.bcast:\n"
            "        config = comm.bcast({'lr': 0.1} if comm.Get_rank() == 0 else None, root=0)\n"
            "    node = comm.Split_type(MPI.COMM_TYPE_SHARED)\n    grads = average(np.ones(8), node)\n"
            "    with ai.comm.all_reduce:\n"
            "        loss = comm.allreduce(float(grads.sum()), op=MPI.SUM) / comm.Get_size()\n"
            "    with ai.comm.barrier:\n        comm.Barrier()\n    return config, loss\n",
        ),
        # async_op=True: the launch and the wait get a region each; an isend or irecv chosen in one
        # expression is left alone
        Case(
            "import torch\nimport torch.distributed as dist\n\n\ndef sync_stats(stats, rank):\n"
            "    work = dist.all_reduce(stats, async_op=True)\n    scale = 1.0 / dist.get_world_size()\n"
            "    work.wait()\n    if rank == 0:\n        dist.barrier()\n    return stats * scale\n\n\n"
            "def exchange(t, rank):\n    req = dist.isend(t, dst=1) if rank == 0 else dist.irecv(t, src=0)\n"
            "    return req\n",
            "from dftracer.python import ai\nimport torch\nimport torch.distributed as dist\n\n\n"
            "def sync_stats(stats, rank):\n    with ai.comm.all_reduce:\n"
            "        work = dist.all_reduce(stats, async_op=True)\n    scale = 1.0 / dist.get_world_size()\n"
            "    with ai.comm.all_reduce:\n        work.wait()\n    if rank == 0:\n        with ai.comm.barrier:\n"
            "            dist.barrier()\n    return stats * scale\n\n\ndef exchange(t, rank):\n"
            "    req = dist.isend(t, dst=1) if rank == 0 else dist.irecv(t, src=0)\n    return req\n",
            findings=(
                Expect("info", "its region times the launch; the wait at line 8", line=6),
                Expect("info", "collectives of different kinds in one statement", line=15),
            ),
        ),
        # a statement that calls a project function with its own all-reduce is left alone (the regions
        # would nest)
        Case(
            "import torch\nimport torch.distributed as dist\n\n\ndef mean_over_ranks(t):\n    dist.all_reduce(t)\n"
            "    return t / dist.get_world_size()\n\n\ndef log_metrics(loss, acc):\n"
            "    stats = torch.stack([mean_over_ranks(loss), mean_over_ranks(acc)])\n"
            "    dist.all_reduce(mean_over_ranks(stats))\n    dist.barrier()\n    return mean_over_ranks(stats)\n",
            "from dftracer.python import ai\nimport torch\nimport torch.distributed as dist\n\n\n"
            "def mean_over_ranks(t):\n    with ai.comm.all_reduce:\n        dist.all_reduce(t)\n"
            "    return t / dist.get_world_size()\n\n\ndef log_metrics(loss, acc):\n"
            "    stats = torch.stack([mean_over_ranks(loss), mean_over_ranks(acc)])\n"
            "    dist.all_reduce(mean_over_ranks(stats))\n    with ai.comm.barrier:\n        dist.barrier()\n"
            "    return mean_over_ranks(stats)\n",
            findings=(
                Expect("info", "also calls mean_over_ranks(), which runs its own all_reduce", line=12),
            ),
        ),
    ]

    def run(self, ctx) -> None:
        graph = ctx.analysis("callgraph")
        mpi = "mpi4py" in ctx.analysis("frameworks").names
        found_in: dict = {}
        for function_id, (fs, fn) in graph.functions.items():
            found = []
            for call in fn.calls:
                coll = collective(graph, function_id, call)
                if coll is not None:
                    found.append((call, coll))
                elif mpi and call.method in MPI_OPS and COMM_NAME.search(call.receiver.rsplit(".", 1)[-1]) \
                        and not _in_comm_region(fs, call.withs):
                    ctx.report(Finding(self.id, f"{call.callee}() not wrapped: `{call.receiver}` is not known to "
                                       "hold an mpi4py communicator (nothing assigns it one that dftpass can follow)",
                                       fs.relpath, call.line, call.col, Severity.INFO))
            if found:
                found_in[function_id] = found
        ops_in = {f: {c.op for _, c in found} for f, found in found_in.items()}
        for function_id, found in found_in.items():
            fs, fn = graph.functions[function_id]
            self._function(ctx, graph, function_id, fs, fn, found, ops_in)

    def _function(self, ctx, graph, function_id, fs, fn, found, ops_in) -> None:
        if _in_comm_region(fs, fn.decorators):
            return
        compiled = ctx.analysis("compiled")
        compiler = compiled.compiler_of(function_id) if compiled.hard(function_id) else None
        by_stmt: dict = {}
        for call, coll in found:
            by_stmt.setdefault(call.stmt, []).append((call, coll))
        waits: dict = {}  # wait statement -> (nodes, line)
        names = ctx.names(fs.relpath)
        for stmt, items in by_stmt.items():
            call, coll = min(items, key=lambda item: (item[0].line, item[0].col))
            shown = f"{call.callee}()"
            if _in_comm_region(fs, call.withs) or any(
                    (recognize(fs, c.callee) or "").startswith("comm.") and c.method == "start"
                    for c in calls_at(fn, sibling(stmt, -1))):
                continue
            if compiler:
                self._note(ctx, fs, call, f"{shown} not wrapped: it is in a function compiled by {compiler} "
                                          "(a region there would time the tracing; time the caller)")
                continue
            ops = sorted({c.op for _, c in items})
            if len(ops) > 1:
                self._note(ctx, fs, call, f"{shown} not wrapped: collectives of different kinds in one statement "
                                          f"({', '.join(ops)}); split the statement to time each")
                continue
            why = unwrappable(fs, fn, call) or self._nests(graph, function_id, fn, stmt, coll.op, ops_in)
            if why:
                self._note(ctx, fs, call, f"{shown} not wrapped: {why}")
                continue
            node = f"comm.{coll.op}"
            ctx.add_edit(fs.relpath, WrapStmt(self.id, call.line, f"{coll.library} {coll.op.replace('_', '-')} "
                                              f"{shown}", stmt, names.node(node)))
            nonblocking = [c for c, k in items if k.nonblocking]
            if not nonblocking:
                continue
            chained = any(c.method in WAITS and c.receiver.startswith(nb.callee + "()")
                          for c in calls_at(fn, stmt) for nb in nonblocking)
            if chained:
                continue  # ``dist.all_reduce(t, async_op=True).wait()``: it blocks here
            found_waits = self._waits(fs, fn, stmt)
            for w in found_waits:
                nodes, _ = waits.setdefault(w.stmt, (set(), w.line))
                nodes.add(node)
            where = ", ".join(str(w.line) for w in found_waits)
            if found_waits:
                self._note(ctx, fs, call, f"{shown} does not block: its region times the launch; the wait at line "
                                          f"{where} gets its own `{node}` region (the time this rank is blocked)")
            else:
                self._note(ctx, fs, call, f"{shown} does not block: its region times only the launch; the wait on "
                                          "its handle is not in this function (wrap it by hand in "
                                          f"`with ai.{node}:`)")
        for stmt, (nodes, line) in waits.items():
            if len(nodes) != 1 or stmt in by_stmt:
                continue
            node = next(iter(nodes))
            ctx.add_edit(fs.relpath, WrapStmt(self.id, line, f"wait for a non-blocking {node.split('.')[1]}",
                                              stmt, names.node(node)))

    @staticmethod
    def _nests(graph, function_id: str, fn, stmt, op: str, ops_in) -> str | None:
        """Why a region of ``op`` around the statement would nest another of the same node: the
        statement also calls a project function that runs that collective itself."""
        for i, call in enumerate(fn.calls):
            if call.stmt != stmt:
                continue
            for target in graph.targets(function_id, i):
                for f in (target, *graph.reachable(target)):
                    if op in ops_in.get(f, ()):
                        return (f"the statement also calls {call.callee}(), which runs its own {op} "
                                "(regions of one node must not nest)")
        return None

    @staticmethod
    def _waits(fs, fn, stmt) -> list:
        """The statements of ``fn`` that wait for the handle the statement at ``stmt`` binds."""
        handles = {a.target for a in fn.assigns if a.stmt == stmt}
        out = {}
        for c in fn.calls:
            if c.stmt == stmt or c.method not in WAITS or _in_comm_region(fs, c.withs):
                continue
            receiver = c.receiver
            if any(receiver == h or receiver.startswith(h + ".") or h in c.args for h in handles) \
                    and unwrappable(fs, fn, c) is None:
                out.setdefault(c.stmt, c)
        return list(out.values())

    def _note(self, ctx, fs, call, message: str) -> None:
        ctx.report(Finding(self.id, message, fs.relpath, call.line, call.col, Severity.INFO))
