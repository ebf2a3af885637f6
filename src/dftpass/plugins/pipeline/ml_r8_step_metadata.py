"""ML-R8: ``ai.update(step=..., epoch=...)`` once per batch-loop iteration."""

from __future__ import annotations

import attrs

from dftpass.api import Case, Enumerate, InsertBefore, LoopFacts, Pass, PassKind, recognize

STEP_NAME = "_dft_step"


@attrs.define
class StepMetadataOptions:
    #: the ``ai`` subtrees a batch loop's update goes to (``comm`` is added for a distributed
    #: project); an empty list updates the whole tree with ``ai.update``
    step_nodes: list[str] = attrs.field(factory=lambda: ["compute", "dataloader", "device"])


class StepMetadata(Pass):
    """Tell dftracer the current step and epoch: ``ai.compute.update(step=..., epoch=...)``.

    What it does:
        Inserts ``ai.compute.update(step=S, epoch=E); ai.dataloader.update(step=S, epoch=E);
        ai.device.update(step=S, epoch=E)`` as the first statement of every batch loop (and
        ``ai.comm.update(...)`` in a distributed project): the subtrees whose events a step
        writes in the training process. A batch loop that runs inside another loop's step
        (an evaluation every N training steps) gets none: the step stays the training
        step's, instead of the evaluation's last batch index tagging the step's later events.
        With a tracing budget (``--step-time``) the update may run every k-th step only
        (docs/performance.md, "The tracing budget").
        ``S`` is the loop's ``enumerate`` index, or its variable when it counts the steps
        itself (``for i in range(n)``, ``for batch_idx in itertools.count(1)``); a loop
        without one is enumerated
        (``for batch in loader`` -> ``for _dft_step, batch in enumerate(...)``). ``E`` is the
        enclosing epoch loop's variable, or the parameter through which every caller passes
        it. Every epoch loop with an integer variable also gets ``ai.update(epoch=E)`` (the
        whole tree, once per epoch) first, so the events outside batch loops (evaluation,
        checkpoints, items) carry the epoch too.

    Why:
        ``X.update`` sets ``step`` and ``epoch`` on the nodes of X; they stick to all later
        events, which is how a trace is cut by step and epoch. ``ai.update`` walks the whole
        tree (~45 nodes): ~25 µs with tracing off and ~110 µs on, 11 % of a 1 ms step by
        itself; the three subtrees cost ~4 / ~20 µs (bench/overhead.py). Events of other
        nodes inside a step (a checkpoint saved mid-epoch) carry the epoch, not the step.

        A ``while`` loop's step is the counter its body counts up (``iter_num += 1``); a
        ``for i in range(0, n, bptt)`` loop's variable is an offset, not a step, so it is
        enumerated like a loop over a loader.

    Example:
        ``for step, (x, y) in enumerate(loader):`` gets ``ai.update(step=step, epoch=epoch)``
        as its first statement when ``epoch`` is the epoch loop's variable.

    Fix safety:
        Safe: ``enumerate`` adds an index without changing what the loop unpacks; the values
        passed are the loop's own integers (never ``None``, which dftracer cannot take).
        A loop whose body already starts with ``ai.update`` is left alone.

    Options:
        step_nodes (["compute", "dataloader", "device"]): the subtrees a batch loop's update
        goes to; ``[]`` updates the whole tree with ``ai.update`` (every event gets the step,
        at ~5x the cost).
    """

    Options = StepMetadataOptions

    id = "ML-R8"
    title = "Step and epoch metadata"
    kind = PassKind.TRANSFORM
    requires = ("loops", "frameworks", "overhead", "cost")
    after = ("ML-R6", "ML-R3")
    tags = ("pipeline", "metadata")

    VALID = [
        "def f(model, items):\n    for i, x in enumerate(items):\n        model(x)\n",
    ]
    INVALID = [
        # an evaluation run inside a training step (nanoGPT's estimate_loss every N steps) keeps
        # the training step: its own batch index would stay on the step's later events
        Case("import torch\n\n\ndef get_batch():\n    return torch.randn(4, 8)\n\n\n@torch.no_grad()\n"
             "def estimate_loss(model):\n    out = 0.0\n    for k in range(5):\n"
             "        out += model(get_batch()).sum().item()\n    return out\n\n\ndef train(model, opt):\n"
             "    for it in range(100):\n        if it % 20 == 0:\n            print(estimate_loss(model))\n"
             "        loss = model(get_batch()).sum()\n        loss.backward()\n        opt.step()\n",
             "from dftracer.python import ai, env as _dft_env\nimport torch\n\n\ndef get_batch():\n"
             "    return torch.randn(4, 8)\n\n\n@torch.no_grad()\ndef estimate_loss(model):\n    out = 0.0\n"
             "    for k in range(5):\n        out += model(get_batch()).sum().item()\n    return out\n\n\n"
             "def train(model, opt):\n    for it in range(100):\n        if _dft_env.DFTRACER_ENABLE:\n"
             "            ai.compute.update(step=it); ai.dataloader.update(step=it); ai.device.update(step=it)\n"
             "        if it % 20 == 0:\n            print(estimate_loss(model))\n"
             "        loss = model(get_batch()).sum()\n        loss.backward()\n        opt.step()\n"),
        Case(
            # the counter counted every iteration is the step, not one counted under a
            # condition before it (DLIO's ``block += 1`` after a checkpoint)
            "import torch\n\n\ndef train(model, loader, opt, ckpt_every):\n    block = 1\n    overall_step = 1\n"
            "    for batch in loader:\n        loss = model(batch).sum()\n        loss.backward()\n        opt.step()\n"
            "        if overall_step % ckpt_every == 0:\n            torch.save(model.state_dict(), 'm.pt')\n"
            "            block += 1\n        overall_step += 1\n",
            "from dftracer.python import ai, env as _dft_env\nimport torch\n\n\n"
            "def train(model, loader, opt, ckpt_every):\n    block = 1\n    overall_step = 1\n    for batch in loader:\n"
            "        if _dft_env.DFTRACER_ENABLE:\n            ai.compute.update(step=overall_step); "
            "ai.dataloader.update(step=overall_step); ai.device.update(step=overall_step)\n"
            "        loss = model(batch).sum()\n        loss.backward()\n        opt.step()\n"
            "        if overall_step % ckpt_every == 0:\n            torch.save(model.state_dict(), 'm.pt')\n"
            "            block += 1\n        overall_step += 1\n",
        ),
        Case(
            # itertools.count(1) counts the steps itself (regression's batch_idx): no enumerate
            "from itertools import count\n\n\ndef get_batch():\n    return 1\n\n\ndef run(model, opt):\n"
            "    for batch_idx in count(1):\n        x = get_batch()\n        model(x).backward()\n"
            "        opt.step()\n        if batch_idx > 3:\n            break\n",
            "from dftracer.python import ai, env as _dft_env\nfrom itertools import count\n\n\n"
            "def get_batch():\n    return 1\n\n\ndef run(model, opt):\n    for batch_idx in count(1):\n"
            "        if _dft_env.DFTRACER_ENABLE:\n"
            "            ai.compute.update(step=batch_idx); ai.dataloader.update(step=batch_idx); ai.device.update(step=batch_idx)\n"
            "        x = get_batch()\n        model(x).backward()\n        opt.step()\n"
            "        if batch_idx > 3:\n            break\n",
        ),
        Case(
            # a while loop: the step is the counter its body counts up; the update of each
            # step runs only with tracing on (off, it would walk its nodes for nothing)
            "def run(model, loader):\n    it = iter(loader)\n    iter_num = 0\n    while iter_num < 100:\n"
            "        x = next(it)\n        model(x)\n        iter_num += 1\n",
            "from dftracer.python import ai, env as _dft_env\n\n\ndef run(model, loader):\n    it = iter(loader)\n"
            "    iter_num = 0\n    while iter_num < 100:\n        if _dft_env.DFTRACER_ENABLE:\n"
            "            ai.compute.update(step=iter_num); ai.dataloader.update(step=iter_num); "
            "ai.device.update(step=iter_num)\n        x = next(it)\n        model(x)\n        iter_num += 1\n",
        ),
        Case(
            # a counter kept in a dict (zoo/loss_threshold.py): written back as the expression
            # it is, never as the name `state[]`
            "def run(model, loader, state):\n    while state[\"batches\"] < 10:\n        x = next(loader)\n"
            "        model(x)\n        state[\"batches\"] += 1\n",
            "from dftracer.python import ai, env as _dft_env\n\n\ndef run(model, loader, state):\n"
            "    while state[\"batches\"] < 10:\n        if _dft_env.DFTRACER_ENABLE:\n"
            "            ai.compute.update(step=state['batches']); ai.dataloader.update(step=state['batches']); "
            "ai.device.update(step=state['batches'])\n        x = next(loader)\n        model(x)\n"
            "        state[\"batches\"] += 1\n",
        ),
        Case(
            "def run(model, loader, epochs):\n    for epoch in range(epochs):\n"
            "        for i, (x, y) in enumerate(loader):\n            model(x)\n",
            "from dftracer.python import ai, env as _dft_env\n\n\ndef run(model, loader, epochs):\n"
            "    for epoch in range(epochs):\n        ai.update(epoch=epoch)\n        for i, (x, y) in enumerate(loader):\n"
            "            if _dft_env.DFTRACER_ENABLE:\n                ai.compute.update(step=i, epoch=epoch); "
            "ai.dataloader.update(step=i, epoch=epoch); ai.device.update(step=i, epoch=epoch)\n            model(x)\n",
        ),
        Case(
            "def evaluate(model, val_loader):\n    for x, y in val_loader:\n        # forward only\n"
            "        model(x)\n",
            "from dftracer.python import ai, env as _dft_env\n\n\ndef evaluate(model, val_loader):\n"
            "    for _dft_step, (x, y) in enumerate(val_loader):\n        if _dft_env.DFTRACER_ENABLE:\n"
            "            ai.compute.update(step=_dft_step); ai.dataloader.update(step=_dft_step); "
            "ai.device.update(step=_dft_step)\n        # forward only\n        model(x)\n",
        ),
        Case(
            "def train_one(model, loader, ep):\n    for step, x in enumerate(loader):\n        model(x)\n\n\n"
            "def main(model, loader):\n    for epoch in range(1, 4):\n        train_one(model, loader, epoch)\n",
            "from dftracer.python import ai, env as _dft_env\n\n\ndef train_one(model, loader, ep):\n"
            "    for step, x in enumerate(loader):\n        if _dft_env.DFTRACER_ENABLE:\n"
            "            ai.compute.update(step=step, epoch=ep); ai.dataloader.update(step=step, epoch=ep); "
            "ai.device.update(step=step, epoch=ep)\n        model(x)\n\n\n"
            "def main(model, loader):\n    for epoch in range(1, 4):\n        ai.update(epoch=epoch)\n"
            "        train_one(model, loader, epoch)\n",
        ),
        Case(
            # the loop's first line holds two statements: the guarded update goes above it
            "def run(model, loader):\n    for step, x in enumerate(loader):\n        y = model(x); print(y)\n",
            "from dftracer.python import ai, env as _dft_env\n\n\ndef run(model, loader):\n"
            "    for step, x in enumerate(loader):\n        if _dft_env.DFTRACER_ENABLE:\n"
            "            ai.compute.update(step=step); ai.dataloader.update(step=step); ai.device.update(step=step)\n"
            "        y = model(x); print(y)\n",
        ),
        Case(
            # the evaluation loop inside the training loop tells no step: its index would stay
            # on the training step's later events
            'import torch\nfrom torch.utils.data import DataLoader\n\nGRADIENT_ACCUMULATE_EVERY = 2\n\n\n'
            'def cycle(loader):\n    while True:\n        for data in loader:\n            yield data\n\n\n'
            'model = torch.nn.Linear(4, 1)\noptim = torch.optim.Adam(model.parameters())\n'
            'train_loader = DataLoader(torch.randn(64, 4), batch_size=4)\ntrain_loader = cycle(train_loader)\n'
            'val_loaders = {}\nfor length in (2, 4):\n'
            '    val_loader = DataLoader(torch.randn(16, 4), batch_size=length)\n'
            '    val_loaders[length] = cycle(val_loader)\n\nfor i in range(10):\n    model.train()\n'
            '    for _ in range(GRADIENT_ACCUMULATE_EVERY):\n        data = next(train_loader)\n'
            '        model(data).sum().backward()\n        optim.step()\n        optim.zero_grad()\n'
            '    if i % 5 == 0:\n        model.eval()\n        with torch.inference_mode():\n'
            '            for length in (2, 4):\n                val_loader = val_loaders[length]\n'
            '                val_data = next(val_loader)\n                print(model(val_data).sum().item())\n',
            'from dftracer.python import ai, env as _dft_env\nimport torch\n'
            'from torch.utils.data import DataLoader\n\nGRADIENT_ACCUMULATE_EVERY = 2\n\n\ndef cycle(loader):\n'
            '    while True:\n        for data in loader:\n            yield data\n\n\n'
            'model = torch.nn.Linear(4, 1)\noptim = torch.optim.Adam(model.parameters())\n'
            'train_loader = DataLoader(torch.randn(64, 4), batch_size=4)\ntrain_loader = cycle(train_loader)\n'
            'val_loaders = {}\nfor length in (2, 4):\n'
            '    val_loader = DataLoader(torch.randn(16, 4), batch_size=length)\n'
            '    val_loaders[length] = cycle(val_loader)\n\nfor i in range(10):\n'
            '    if _dft_env.DFTRACER_ENABLE:\n'
            '        ai.compute.update(step=i); ai.dataloader.update(step=i); ai.device.update(step=i)\n'
            '    model.train()\n    for _ in range(GRADIENT_ACCUMULATE_EVERY):\n'
            '        data = next(train_loader)\n        model(data).sum().backward()\n        optim.step()\n'
            '        optim.zero_grad()\n    if i % 5 == 0:\n        model.eval()\n'
            '        with torch.inference_mode():\n            for length in (2, 4):\n'
            '                val_loader = val_loaders[length]\n                val_data = next(val_loader)\n'
            '                print(model(val_data).sum().item())\n',
        ),
    ]

    def run(self, ctx) -> None:
        self._subtrees = list(self.options.step_nodes)
        if self._subtrees and "comm" not in self._subtrees and ctx.analysis("frameworks").distributed:
            self._subtrees.append("comm")
        loops = ctx.analysis("loops")
        graph = ctx.analysis("callgraph")
        for facts in loops.of_kind("epoch"):
            if facts.int_var and not self._has_update(graph, facts):
                self._insert(ctx, graph, facts, [], epoch=facts.int_var)
        costs = ctx.analysis("cost")
        for facts in loops.of_kind("batch"):
            if self._has_update(graph, facts) or facts.yields_batches:
                continue  # a generator handing batches on: its consumer's loop counts the steps
            if costs.of(facts.function).hot == "step" or loops.enclosing(facts, "batch") is not None:
                # a loop that runs inside another loop's step (nanoGPT's and makemore's
                # evaluation every N steps, or x-transformers' inside the training loop itself):
                # its batch index would stay on the training step's later events; the training
                # loop's step is the one to keep
                continue
            if any(self._has_update(graph, f) for feeder in facts.feeders for f in loops.loops_of(feeder)
                   if f.yields_batches):
                continue  # the generator that feeds the loop tells the step already
            fs, fn = graph.functions[facts.function]
            step = facts.step_var
            if step is None and facts.loop.kind == "for":
                step = STEP_NAME if STEP_NAME not in fs.bound_names else STEP_NAME + "_"
                ctx.add_edit(fs.relpath, Enumerate(self.id, facts.loop.line, "a step index for ai.update",
                                                   facts.loop.stmt, step))
            if step is None:
                continue  # a while loop that counts nothing: no step to tell
            self._insert(ctx, graph, facts, self._subtrees, step=step, epoch=self._epoch(loops, graph, facts),
                         every=ctx.analysis("overhead").update_every)

    @staticmethod
    def _has_update(graph, facts: LoopFacts) -> bool:
        """An update among the loop's own statements (also inside an ``if``: the guarded
        one; not in a loop nested in it)."""
        fs, fn = graph.functions[facts.function]
        if any((recognize(fs, c) or "").rpartition(".")[2] == "update" for c in facts.loop.body_calls):
            return True
        return any(c.loops and c.loops[-1] == facts.loop.index and c.method == "update"
                   and (recognize(fs, c.callee) or "").rpartition(".")[2] == "update" for c in fn.calls)

    def _insert(self, ctx, graph, facts: LoopFacts, subtrees: list[str], every: int = 1, **values) -> None:
        fs = graph.file_of(facts.function)
        names = ctx.names(fs.relpath)
        code = names.subtree_update(subtrees, **values)
        if facts.kind == "batch":  # once a step: nothing to do with tracing off
            # the tracing budget (--step-time) may ask for one update every k steps
            code = names.when_tracing(code, every=f"{values['step']} % {every} == 0" if every > 1 else "")
        ctx.add_edit(fs.relpath, InsertBefore(self.id, facts.loop.line, f"{facts.kind} metadata: {code}",
                                              facts.loop.body_first, code, take_comments=False))

    @staticmethod
    def _epoch(loops, graph, facts: LoopFacts) -> str | None:
        """The epoch variable in scope: an enclosing epoch loop's, or the parameter that
        every caller inside an epoch loop passes that loop's variable through."""
        outer = loops.enclosing(facts, "epoch")
        if outer is not None:
            return outer.int_var
        fn = graph.fn(facts.function)
        params = set()
        for caller, call in graph.call_sites_of(facts.function):
            epoch_vars = {loops.facts[(caller, i)].int_var for i in call.loops
                          if loops.facts[(caller, i)].kind == "epoch"} - {None}
            if not epoch_vars:
                continue
            offset = 1 if fn.cls and fn.positional[:1] in (("self",), ("cls",)) else 0
            found = [fn.positional[j + offset] for j, a in enumerate(call.args)
                     if a in epoch_vars and j + offset < len(fn.positional)]
            found += [k for k, v in call.keywords if v in epoch_vars and k in fn.params]
            if not found:
                return None
            params.add(found[0])
        return params.pop() if len(params) == 1 else None
