"""ML-R14: time a jitted JAX step at its Python call, and wait for its result there."""

from __future__ import annotations

from dftpass.api import Case, Expect, Finding, is_node, Pass, PassKind, Severity, step_calls, WrapStmt

#: compilers whose calls return before the computation ends (asynchronous dispatch)
JAX_COMPILERS = frozenset({"jax.jit", "jax.pmap", "flax.nnx.jit", "flax.nnx.pmap", "equinox.filter_jit"})
#: the name an expression statement's value is bound to, to be waited for
RESULT_NAME = "_dft_result"
BLOCK = "block_until_ready"


class JaxSteps(Pass):
    """Time each call of a jitted JAX step with ``ai.compute``, waiting for its result inside.

    What it does:
        Every statement that calls a function compiled by ``jax.jit``, ``jax.pmap``,
        ``nnx.jit`` or ``equinox.filter_jit`` once per batch (in a batch loop, or in a
        project function such a loop calls) gets ``with ai.compute:`` around it and, inside
        the region after it, ``jax.block_until_ready(<what it assigned>)``. A step written
        as a bare call (``train_step(model, optimizer, batch)``: nnx updates the model in
        place) has its value bound to ``_dft_result`` and waited for. The jitted function
        itself is never decorated (the ``compiled`` analysis drops any region on it). With
        the plugin's knowledge, ``jax.value_and_grad``/``nnx.value_and_grad`` and optax or
        ``nnx.Optimizer`` updates count as training, so the loop gets its phase (ML-R2).
        A ``with ai.compute:`` written by hand around such a call, without the wait, is
        reported.

    Why:
        A jitted call returns as soon as the work is queued: a region that ends there times
        the dispatch, not the step (measured on ``fixtures/apps/flax_nnx``: see
        docs/decisions.md). ``block_until_ready`` makes the region end when the step's
        outputs exist; jax would wait for them at the next use anyway (``float(loss)``), so
        the program's results and total time stay the same.

    Example:
        ``loss = train_step(model, optimizer, batch)`` becomes ``with ai.compute:`` /
        ``loss = train_step(model, optimizer, batch)`` / ``jax.block_until_ready(loss)``.

    Fix safety:
        Safe: the wait returns its argument unchanged and never copies it; the ``with``
        region ends even when the step raises. It moves the host's wait for the step from
        the next use of the result to the end of the step, so a loop that queued several
        steps ahead (dispatching the next before using the last) now runs them one at a
        time; such loops are rare in training code, and ``ignore: [ML-R14]`` keeps them as
        they are.

    Options:
        None.
    """

    id = "ML-R14"
    title = "JAX steps"
    kind = PassKind.TRANSFORM
    requires = ("callgraph", "loops", "compiled")
    frameworks = ("jax",)
    tags = ("compute", "jax")

    VALID = [
        # already timed and waited for
        "import jax\nfrom dftracer.python import ai\n\n\n@jax.jit\ndef step(x):\n    return x * 2\n\n\n"
        "def train(loader):\n    for x in loader.as_numpy_iterator():\n        with ai.compute:\n"
        "            y = step(x)\n            jax.block_until_ready(y)\n",
        Case(
            # written by hand without the wait: the region times the dispatch only
            "import jax\nfrom dftracer.python import ai\n\n\n@jax.jit\ndef step(x):\n    return x * 2\n\n\n"
            "def train(loader):\n    for x in loader.as_numpy_iterator():\n        with ai.compute:\n"
            "            y = step(x)\n",
            findings=(Expect("warning", "dispatch", line=13),),
        ),
    ]
    INVALID = [
        Case(
            # flax nnx: a jitted step over a Python loop of batches; the step's module is
            # never decorated; value_and_grad makes it a training loop
            "import jax\nimport optax\nfrom flax import nnx\n\n\n@nnx.jit\ndef train_step(model, optimizer, batch):\n"
            "    loss, grads = nnx.value_and_grad(lambda m: ((m(batch['x']) - batch['y']) ** 2).mean())(model)\n"
            "    optimizer.update(model, grads)\n    return loss\n\n\n"
            "def train(model, optimizer, loader):\n    for batch in loader.as_numpy_iterator():\n"
            "        loss = train_step(model, optimizer, batch)\n        print(float(loss))\n",
            "from dftracer.python import ai\nimport jax\nimport optax\nfrom flax import nnx\n\n\n@nnx.jit\n"
            "def train_step(model, optimizer, batch):\n"
            "    loss, grads = nnx.value_and_grad(lambda m: ((m(batch['x']) - batch['y']) ** 2).mean())(model)\n"
            "    optimizer.update(model, grads)\n    return loss\n\n\n"
            "def train(model, optimizer, loader):\n    for batch in loader.as_numpy_iterator():\n"
            "        with ai.compute:\n            loss = train_step(model, optimizer, batch)\n"
            "            jax.block_until_ready(loss)\n        print(float(loss))\n",
        ),
        Case(
            # a pmapped step (the flax examples' shape), a bare call, and no `import jax`
            # in the file: the wait imports it
            "import functools\n\nfrom flax import jax_utils\nfrom jax import pmap\n\nfrom data import make\n\n\n"
            "def train_step(state, batch):\n    return state\n\n\n"
            "def update(state, batch):\n    state.apply_gradients(grads=batch)\n\n\n"
            "def train(state):\n    p_train_step = pmap(train_step, axis_name='batch')\n"
            "    p_update = pmap(update)\n    for batch in make().as_numpy_iterator():\n"
            "        state, metrics = p_train_step(state, batch)\n        p_update(state, batch)\n",
            "import jax\nfrom dftracer.python import ai\nimport functools\n\n"
            "from flax import jax_utils\nfrom jax import pmap\n\nfrom data import make\n\n\n"
            "def train_step(state, batch):\n    return state\n\n\n"
            "def update(state, batch):\n    state.apply_gradients(grads=batch)\n\n\n"
            "def train(state):\n    p_train_step = pmap(train_step, axis_name='batch')\n"
            "    p_update = pmap(update)\n    for batch in make().as_numpy_iterator():\n        with ai.compute:\n"
            "            state, metrics = p_train_step(state, batch)\n"
            "            jax.block_until_ready((state, metrics))\n        with ai.compute:\n"
            "            _dft_result = p_update(state, batch)\n            jax.block_until_ready(_dft_result)\n",
            files={"data.py": "import tensorflow as tf\n\n\ndef make():\n    return tf.data.Dataset.range(8)\n"},
        ),
    ]

    def run(self, ctx) -> None:
        graph, loops, compiled = ctx.analysis("callgraph"), ctx.analysis("loops"), ctx.analysis("compiled")
        for function_id, index in step_calls(graph, loops):
            fs, fn = graph.functions[function_id]
            call = fn.calls[index]
            compiler = _jax_compiler(graph, compiled, function_id, index)
            if compiler is None or compiled.hard(function_id):
                continue
            if any(is_node(fs, w, "compute") for w in call.withs):
                self._check_wait(ctx, fs, fn, call)
                continue
            if call.stmt_kind not in ("assign", "expr"):
                if ctx.mode != "validate":
                    ctx.report(Finding(self.id, f"{call.callee}() is part of a larger expression: not timed (assign "
                                       "its result to a name to get an ai.compute region)", fs.relpath, call.line,
                                       severity=Severity.INFO))
                continue
            names = ctx.names(fs.relpath)
            results = [n for n in call.assigned_to] if call.stmt_kind == "assign" else []
            bind = "" if results else RESULT_NAME
            held = bind or (results[0] if len(results) == 1 else "(" + ", ".join(results) + ")")
            wait = f"{names.module('jax')}.{BLOCK}({held})"
            ctx.add_edit(fs.relpath, WrapStmt(self.id, call.line, f"jitted step {call.callee}() ({compiler}), "
                                              "waited for", call.stmt, names.node("compute"), (wait,), bind))

    def _check_wait(self, ctx, fs, fn, call) -> None:
        """A hand-written region around a jitted call: is the result waited for inside it?"""
        if any(c.method == BLOCK and c.stmt[:-1] == call.stmt[:-1] and c.stmt > call.stmt for c in fn.calls):
            return
        ctx.report(Finding(self.id, f"the ai.compute region around {call.callee}() ends before the step's result "
                           f"exists (jax dispatches asynchronously): it times the dispatch; add "
                           f"jax.{BLOCK}(...) of the result inside the region", fs.relpath, call.line,
                           severity=Severity.WARNING))


def _jax_compiler(graph, compiled, function_id: str, index: int) -> str | None:
    """The jax compiler behind a call: its target function is jitted, or the callee holds a
    jitted function (``p_step = jax.pmap(step)``; value flow)."""
    for target in graph.targets(function_id, index):
        found = compiled.compiler_of(target)
        if found in JAX_COMPILERS:
            return found
    call = graph.fn(function_id).calls[index]
    fs = graph.file_of(function_id)
    if graph.values is not None:
        for origin in graph.values.of(function_id, call.callee):
            name = origin.split(":", 1)[1].rstrip("()") if origin.startswith("ext:") else ""
            if name in JAX_COMPILERS:
                return name
    qualified = graph.qualify(fs, call.callee.split("(", 1)[0])
    return qualified if qualified in JAX_COMPILERS and call.callee.endswith(")") else None
