"""ML-R23: no dftracer region on a function that a compiler runs instead of Python."""

from __future__ import annotations

from dftpass.api import Case, Expect, Finding, Pass, PassKind, regions_on, RULES_THAT_PLACE, Severity

#: what each compiler does to a region (the ``compiled`` analysis finds the functions)
WHY = {
    "numba.jit": "numba compiles it: a Python decorator inside makes it fall back or fail",
    "numba.njit": "numba compiles it: a Python decorator inside makes it fail to compile",
    "numba.cuda.jit": "numba compiles it for the GPU",
    "jax.jit": "jax traces it once: the region would time the tracing, not the runs",
    "tensorflow.function": "tf.function traces it into a graph: the region would time the tracing only",
    "tensorflow.data.Dataset.map": "tf.data traces it into the pipeline's graph: the region would time the tracing "
                                   "only (wrap the Python part in tf.numpy_function to time it)",
    "torch.jit.script": "TorchScript compiles it: a dftracer decorator cannot be scripted",
    "torch.compile": "Dynamo compiles it: the region's Python calls break the graph",
}
for _name in ("jax.pmap", "flax.nnx.jit", "equinox.filter_jit"):
    WHY[_name] = WHY["jax.jit"]
for _name in ("tensorflow.data.Dataset.filter", "tensorflow.data.Dataset.flat_map", "tensorflow.data.Dataset.interleave"):
    WHY[_name] = WHY["tensorflow.data.Dataset.map"]
#: what the region should do instead
FIX = "put the region around the Python call of the compiled function (its caller) instead"


def why(compiler: str) -> str:
    return WHY.get(compiler, f"{compiler} compiles it: its Python body does not run per call")


class CompiledFunctions(Pass):
    """Report dftracer regions on functions that a compiler runs instead of Python.

    What it does:
        Finds the functions a compiler takes over: decorated with (or passed to) numba's
        ``jit``/``njit``/``vectorize``, ``jax.jit``/``pmap``/``nnx.jit``, ``tf.function``,
        ``torch.jit.script``, ``torch.compile``, or Cython's ``compile``; and the ``forward``
        of a model passed to ``torch.compile``. A dftracer region on one of them, written
        by hand or planned by another rule, is reported with what goes wrong and where the
        region belongs: around the Python call of the compiled function.

    Why:
        A compiled function does not run its Python body on each call. numba and
        TorchScript cannot compile a dftracer decorator at all; jax and ``tf.function``
        run the Python body once, while tracing, so the region times the tracing and
        then nothing; under ``torch.compile`` every dftracer call in ``forward`` is a
        graph break, which slows the step and changes what is measured.

    Example:
        ``@ai.compute\\n@jax.jit\\ndef train_step(state, batch): ...`` is reported: time
        ``state = train_step(state, batch)`` in the training loop instead (with
        ``jax.block_until_ready``, ML-R14).

    Fix safety:
        A check: it changes nothing.

    Options:
        None.
    """

    id = "ML-R23"
    title = "Compiled functions"
    kind = PassKind.CHECK
    requires = ("callgraph", "compiled")
    after = RULES_THAT_PLACE
    tags = ("safety",)

    VALID = [
        # the region is on the caller of the jitted step
        "import jax\nfrom dftracer.python import ai\n\n\n@jax.jit\ndef step(x):\n    return x * 2\n\n\n"
        "def loop(xs):\n    for x in xs:\n        with ai.compute:\n            y = step(x)\n",
        # a plain function with a region
        "from dftracer.python import ai\n\n\n@ai.compute\ndef step(x):\n    return x * 2\n",
    ]
    INVALID = [
        Case(
            "import numba\nfrom dftracer.python import ai\n\n\n@ai.data.preprocess\n@numba.njit(cache=True)\n"
            "def normalize(x):\n    return x / 255.0\n",
            findings=(Expect("error", "numba compiles it", line=7),),
        ),
        Case(
            "import tensorflow as tf\nfrom dftracer.python import ai\n\n\n@tf.function\n@ai.compute\n"
            "def train_step(x):\n    return x + 1\n",
            findings=(Expect("error", "tf.function traces it", line=7),),
        ),
        Case(
            "import torch\nfrom dftracer.python import ai\n\n\nclass Net(torch.nn.Module):\n    @ai.compute.forward\n"
            "    def forward(self, x):\n        return x\n\n\ndef main():\n    model = torch.compile(Net())\n"
            "    model(torch.ones(1))\n",
            findings=(Expect("warning", "graph", line=7),),
        ),
    ]

    def run(self, ctx) -> None:
        graph = ctx.analysis("callgraph")
        for function_id, compiler in sorted(ctx.analysis("compiled").functions.items()):
            fs, fn = graph.functions[function_id]
            for where in regions_on(ctx, fs, fn):
                severity = Severity.WARNING if compiler == "torch.compile" else Severity.ERROR
                ctx.report(Finding(self.id, f"{where} on {fn.qualname}: {why(compiler)}; {FIX}",
                                   fs.relpath, fn.line, fn.col, severity))
