"""ML-R5: ``with ai.comm.<op>:`` around the collectives of torch.distributed, Horovod and mpi4py."""

from __future__ import annotations

from dftpass.api import (
    CallSite, calls_at, Case, Collective, CollectiveSites, Expect, facts, Finding, Pass,
    PassKind, recognize, Severity, sibling, unwrappable, WrapStmt,
)

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
    requires = ("callgraph", "frameworks", "compiled", "collectives")
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
        Case(
            # Accelerate: the barrier is a method of the Accelerator object
            "from accelerate import Accelerator\n\n\ndef main():\n    accelerator = Accelerator()\n"
            "    accelerator.wait_for_everyone()\n",
            "from dftracer.python import ai\nfrom accelerate import Accelerator\n\n\ndef main():\n"
            "    accelerator = Accelerator()\n    with ai.comm.barrier:\n        accelerator.wait_for_everyone()\n",
        ),
    ]

    def run(self, ctx) -> None:
        graph = ctx.analysis("callgraph")
        collectives: CollectiveSites = ctx.analysis("collectives")
        if "mpi4py" in ctx.analysis("frameworks").names:
            for function_id, index in collectives.unresolved_mpi:
                fs, fn = graph.functions[function_id]
                call = fn.calls[index]
                if not _in_comm_region(fs, call.withs):
                    ctx.report(Finding(self.id, f"{call.callee}() not wrapped: `{call.receiver}` is not known to "
                                       "hold an mpi4py communicator (nothing assigns it one that dftpass can follow)",
                                       fs.relpath, call.line, call.col, Severity.INFO))
        found_in: dict[str, list[tuple[CallSite, Collective]]] = {
            function_id: [(graph.functions[function_id][1].calls[i], coll) for i, coll in sites]
            for function_id, sites in collectives.sites.items()}
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
            chained = any(c.method in facts(graph).collective_waits and c.receiver.startswith(nb.callee + "()")
                          for c in calls_at(fn, stmt) for nb in nonblocking)
            if chained:
                continue  # ``dist.all_reduce(t, async_op=True).wait()``: it blocks here
            found_waits = self._waits(fs, fn, stmt, facts(graph).collective_waits)
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
    def _waits(fs, fn, stmt, waits: frozenset[str]) -> list:
        """The statements of ``fn`` that wait for the handle the statement at ``stmt`` binds."""
        handles = {a.target for a in fn.assigns if a.stmt == stmt}
        out = {}
        for c in fn.calls:
            if c.stmt == stmt or c.method not in waits or _in_comm_region(fs, c.withs):
                continue
            receiver = c.receiver
            if any(receiver == h or receiver.startswith(h + ".") or h in c.args for h in handles) \
                    and unwrappable(fs, fn, c) is None:
                out.setdefault(c.stmt, c)
        return list(out.values())

    def _note(self, ctx, fs, call, message: str) -> None:
        ctx.report(Finding(self.id, message, fs.relpath, call.line, call.col, Severity.INFO))
