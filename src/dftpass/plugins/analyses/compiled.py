"""The ``compiled`` analysis: the functions a compiler runs instead of Python.

A function decorated with (or passed to) one of the ``compilers`` the plugins know
(``jax.jit``, ``nnx.jit``, ``tf.function``, numba's ``jit``, ``torch.jit.script``, ...) does
not run its Python body per call: jax and ``tf.function`` run it once, to trace it; numba
and TorchScript cannot compile a dftracer call at all. A function given to a ``tf.data``
pipeline's ``map``/``filter``/``flat_map`` is traced into the pipeline's graph the same way
(unless it goes through ``tf.numpy_function``/``tf.py_function``, which call Python).
``torch.compile``'s models are here too, with their ``forward``: a region there is a graph
break, not a failure, so rules may still choose it (ML-R23 warns).

The run context consults this analysis for every edit (``RunContext.add_edit``): an edit
on or inside a function that a tracing compiler takes over is dropped with a note, so no
rule, built-in or third-party, places a region where it would time the tracing.
"""

from __future__ import annotations

import attrs

from dftpass.core.callgraph import CallGraph
from dftpass.core.passes import Pass, PassKind
from dftpass.core.summary import StmtPath
from dftpass.core.values import classes

#: compilers whose functions still run Python (regions there are a choice, with a warning)
SOFT = frozenset({"torch.compile"})
#: dataset methods whose function argument tf.data traces into a graph
TF_DATA_METHODS = frozenset({"map", "filter", "flat_map", "interleave"})
TF_DATA = "tensorflow.data"
#: calls that hand a function to Python from inside a traced graph
PYTHON_BRIDGES = frozenset({"tensorflow.numpy_function", "tensorflow.py_function", "tensorflow.compat.v1.py_func"})


def normalize(qualified: str) -> str:
    """``tf.function`` -> ``tensorflow.function``, ``nnx.jit`` -> ``flax.nnx.jit``: the usual
    aliases of a file that imported them in a way the summaries cannot follow."""
    for short, full in (("tf.", "tensorflow."), ("nnx.", "flax.nnx."), ("nb.", "numba."), ("jnp.", "jax.numpy.")):
        if qualified.startswith(short):
            return full + qualified[len(short):]
    return qualified


@attrs.define
class Compiled:
    """function id -> the qualified compiler that takes it over."""

    functions: dict[str, str] = attrs.field(factory=dict)
    #: relpath -> [(the function's statement path, compiler)] of hard-compiled functions
    _by_file: dict[str, list[tuple[StmtPath, str]]] = attrs.field(factory=dict)

    def compiler_of(self, function_id: str) -> str | None:
        return self.functions.get(function_id)

    def hard(self, function_id: str) -> bool:
        """Compiled so that its Python body does not run per call (not ``torch.compile``)."""
        compiler = self.functions.get(function_id)
        return compiler is not None and compiler not in SOFT

    def compiles_forward(self, graph: CallGraph, class_id: str) -> str | None:
        """The compiler that takes over calling a model of ``class_id`` (its ``forward``, or
        what the framework calls): ML-R7 then times the call site, and ML-R11 agrees."""
        fs, cs = graph.classes[class_id]
        method = next((m for m in graph.hints.module_call_methods if m in cs.methods), None)
        return self.functions.get(f"{fs.relpath}::{cs.methods[method]}") if method else None

    def enclosing(self, relpath: str, path: StmtPath) -> str | None:
        """The compiler of the hard-compiled function at or around statement ``path``."""
        for stmt, compiler in self._by_file.get(relpath, ()):
            if path[: len(stmt)] == stmt:
                return compiler
        return None


def find_compiled(graph: CallGraph, compilers: frozenset[str]) -> Compiled:
    out = Compiled()

    def compiler(fs, text: str | None) -> str | None:
        if not text:
            return None
        qualified = normalize(graph.qualify(fs, text.split("(", 1)[0]))
        return qualified if qualified in compilers else None

    for function_id, (fs, fn) in graph.functions.items():
        for d in fn.decorators:
            found = compiler(fs, d)
            if found:
                out.functions.setdefault(function_id, found)
        tf_file = any(normalize(q).startswith("tensorflow") for q in fs.imports.values())
        for call in fn.calls:
            found = compiler(fs, call.callee)
            if found is None and tf_file and call.method in TF_DATA_METHODS and call.receiver \
                    and _is_tf_dataset(graph, function_id, fs, call.receiver):
                found = f"{TF_DATA}.Dataset.{call.method}"
            if not found or not call.args or not call.args[0]:
                continue
            given = call.args[0].rstrip("()") if found in compilers else call.args[0]
            resolved = graph.resolve_name(fs, given)
            if resolved in graph.functions:
                out.functions.setdefault(resolved, found)
            if graph.values is not None and found in compilers:
                for class_id in classes(graph.values.of(function_id, call.args[0])):
                    forward = graph.method(class_id, "forward")
                    if forward:
                        out.functions.setdefault(forward, found)
    for function_id, found in out.functions.items():
        if found not in SOFT:
            fs, fn = graph.functions[function_id]
            out._by_file.setdefault(fs.relpath, []).append((fn.stmt, found))
    return out


def _is_tf_dataset(graph: CallGraph, function_id: str, fs, receiver: str) -> bool:
    """Whether ``receiver`` holds a ``tf.data`` dataset: written as one (``tf.data.Dataset
    .range(4)``), or assigned one (value flow)."""
    if normalize(graph.qualify(fs, receiver)).startswith(TF_DATA):
        return True
    if graph.values is None:
        return False
    return any(normalize(origin[4:]).startswith(TF_DATA) for origin in graph.values.of(function_id, receiver)
               if origin.startswith("ext:"))


class CompiledAnalysis(Pass):
    """Functions a compiler runs instead of Python (jit, tf.function, tf.data maps, numba)."""

    id = "compiled"
    title = "Compiled functions"
    kind = PassKind.ANALYSIS
    requires = ("callgraph",)

    def run(self, ctx) -> Compiled:
        return find_compiled(ctx.analysis("callgraph"), frozenset(ctx.manager.knowledge["compilers"]))
