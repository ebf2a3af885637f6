"""The ``cost`` analysis: what a function's event would cost against the work it does.

A traced event costs 6-13 µs with tracing on (dftracer-api.md). A region pays for itself
when the function does much more than that, and when it runs seldom enough that the events
do not add up. This analysis gives every project function two facts:

* a **static score** of its work, from what its body does. The weights are peer.md's, with
  its known defects fixed:
  - I/O, checkpoint and collective calls are recognised by their qualified names
    (``np.load``, ``torch.save``, ``dist.all_reduce``), not by a bare method name
    (``s.encode()``, ``queue.close()`` and ``json.loads(text)`` are not file I/O);
  - ``item``, ``to`` and ``numpy`` are not device transfers;
  - statements are counted at every depth, so a 200-line ``with torch.no_grad():`` body
    is not "trivial";
  - a nested function's body counts for the nested function, not for its parent;
  - names are compared word by word (``thread_pool`` does not contain ``read``).
* a **hotness**, from the call graph:
  - ``sample``: the function runs once per sample (reached from a data set's
    ``__getitem__``, a collate function or a transform);
  - ``step``: it runs once per batch (reached from inside a batch loop, from a batch
    producer, or from a model's ``forward``);
  - ``once``: it runs per epoch or less.

ML-R19 compares the score with a threshold that depends on the hotness
(docs/performance.md, "Overhead of the regions", gives the measurements behind the
defaults).
"""

from __future__ import annotations

import attrs

from dftpass.core.callgraph import CallGraph
from dftpass.core.emitter import is_tracing_test, recognize, runtime_call
from dftpass.core.loops import LoopAnalysis
from dftpass.core.passes import Pass, PassKind
from dftpass.core.summary import FileSummary, FunctionSummary
from dftpass.core.values import classes
from dftpass.plugins.knowledge import facts, is_backward, is_optimizer_step

#: peer.md's weights, per call of the kind (capped at three calls a kind)
WEIGHTS = {"io": 30, "checkpoint": 35, "comm": 25, "data": 20, "transfer": 12, "compute": 10}
LOOP_WEIGHT = 8
CALL_WEIGHT = 2
#: calls and statements stop adding past these
MAX_CALL_POINTS = 20
MAX_SIZE_POINTS = 20
PER_KIND_CAP = 3

DATA_CALLS = frozenset({"DataLoader", "collate", "default_collate", "stack", "cat", "from_numpy", "as_tensor"})
TRANSFER_METHODS = frozenset({"cuda", "pin_memory", "copy_"})
#: calls that only build or look up something small: not work (an argument parser's 30
#: ``add_argument`` calls do not make it worth an event)
CHEAP_METHODS = frozenset({"add_argument", "add_argument_group", "add_mutually_exclusive_group", "set_defaults",
                           "append", "extend", "get", "setdefault", "pop", "items", "keys", "values", "format",
                           "join", "split", "strip", "startswith", "endswith", "replace", "isinstance", "len",
                           "str", "int", "float", "bool", "range", "enumerate", "zip", "getattr", "setattr",
                           "hasattr", "min", "max", "sorted", "list", "dict", "tuple", "set", "super"})
SAMPLE_KEYWORDS = ("collate_fn", "transform", "target_transform", "transforms")


@attrs.frozen
class FunctionCost:
    score: int
    #: the score's parts, for ``explain`` and the plan's reason: kind -> points
    parts: tuple[tuple[str, int], ...]
    #: "sample" | "step" | "once"
    hot: str
    #: the function the hotness comes from (a ``__getitem__``, a batch loop's function)
    hot_because: str = ""

    def describe(self) -> str:
        parts = ", ".join(f"{k} {v}" for k, v in self.parts if v)
        return f"score {self.score} ({parts})"


@attrs.define
class Costs:
    by_function: dict[str, FunctionCost]

    def of(self, function_id: str) -> FunctionCost:
        return self.by_function[function_id]


def _kind_of_call(graph: CallGraph, fs: FileSummary, fn: FunctionSummary, call) -> str | None:
    qualified = graph.qualify(fs, call.callee)
    last = qualified.rsplit(".", 1)[-1]
    known = facts(graph)
    if qualified in known.checkpoint_functions or last in known.checkpoint_method_names or \
            ".".join(qualified.rsplit(".", 2)[-2:]) in known.checkpoint_function_tails:
        return "checkpoint"
    if known.collective_library(qualified.rpartition(".")[0]) or qualified.startswith("mpi4py.") or (
            last in known.collective_names and "." in call.callee
            and qualified.split(".", 1)[0] in ("dist", "hvd", "comm", "MPI")):
        return "comm"
    if last in known.io_calls and (qualified != call.callee or "." not in call.callee) and last not in ("load", "loads"):
        return "io"
    if qualified in ("numpy.load", "np.load", "json.load", "pickle.load", "yaml.safe_load") or \
            qualified.startswith(("h5py.", "PIL.", "cv2.imread", "imageio.", "tifffile.", "pyarrow.", "pandas.read_")):
        return "io"
    if last in DATA_CALLS:
        return "data"
    if last in TRANSFER_METHODS or (last == "to" and any(k == "non_blocking" for k, _ in call.keywords)):
        return "transfer"
    if is_backward(call, graph, fs) or is_optimizer_step(graph, fs, fn, call):
        return "compute"
    return None


def score(graph: CallGraph, function_id: str) -> tuple[int, tuple[tuple[str, int], ...]]:
    """The static score of a function's own body (see the module docstring)."""
    fs, fn = graph.functions[function_id]
    # dftpass's own ``if <tracing is on>:`` blocks (step metadata, logged parameters) are not
    # the function's work: counted, a second run would find more to annotate than the first
    # nor are the tracing calls themselves (``ai.compute.start()``, ``_dft_runtime.log_parameters``)
    own = [(path, n) for path, test, n in fn.if_tests if is_tracing_test(test)]
    calls = [c for c in fn.calls if not any(c.stmt[:len(p)] == p for p, _ in own)]
    tracing = [c for c in calls if recognize(fs, c.callee) is not None or runtime_call(fs, c.callee)]
    calls = [c for c in calls if all(c is not t for t in tracing)]
    tracing_stmts = len({c.stmt for c in tracing if c.stmt_kind == "expr"})
    loops = [lp for lp in fn.loops if not any(lp.stmt[:len(p)] == p for p, _ in own)]
    counts: dict[str, int] = {}
    for call in calls:
        kind = _kind_of_call(graph, fs, fn, call)
        if kind:
            counts[kind] = counts.get(kind, 0) + 1
    parts = [(k, w * min(counts.get(k, 0), PER_KIND_CAP)) for k, w in WEIGHTS.items()]
    parts.append(("loops", LOOP_WEIGHT * len(loops)))
    work_calls = [c for c in calls if c.method not in CHEAP_METHODS and c.method not in facts(graph).log_methods]
    parts.append(("calls", min(CALL_WEIGHT * len(work_calls), MAX_CALL_POINTS)))
    parts.append(("size", min((fn.n_stmts - sum(n for _, n in own) - tracing_stmts) // 2, MAX_SIZE_POINTS)))
    return sum(v for _, v in parts), tuple(parts)


def _sample_roots(graph: CallGraph) -> dict[str, str]:
    """Functions that run per sample: data sets' ``__getitem__``, and the project callables
    handed to a loader as ``collate_fn`` or to a data set as a transform."""
    roots: dict[str, str] = {}
    for class_id, (fs, cs) in graph.classes.items():
        if "__getitem__" in cs.methods and graph.has_base(class_id, (*graph.hints.dataset_bases, *graph.hints.iterable_dataset_bases)):
            method = f"{fs.relpath}::{cs.methods['__getitem__']}"
            roots[method] = method
    for function_id, (fs, fn) in graph.functions.items():
        for call in fn.calls:
            for key, value in call.keywords:
                if key in SAMPLE_KEYWORDS and value:
                    for target in _callables(graph, function_id, fs, value):
                        roots.setdefault(target, function_id)
    return roots


def _callables(graph: CallGraph, function_id: str, fs: FileSummary, text: str) -> list[str]:
    """The project functions a passed value runs when called: a function, or a class's
    ``__call__`` (an instance, or the class built in place)."""
    out = []
    resolved = graph.resolve_name(fs, text.rstrip("()"))
    if resolved in graph.functions:
        out.append(resolved)
    if graph.values is not None:
        for class_id in classes(graph.values.of(function_id, text)):
            call = graph.method(class_id, "__call__")
            if call:
                out.append(call)
    return out


def _step_roots(graph: CallGraph, loops: LoopAnalysis) -> dict[str, str]:
    """Functions that run per batch: called inside a batch loop, batch producers, and the
    ``forward`` of model classes."""
    roots: dict[str, str] = {}
    for facts in loops.of_kind("batch"):
        inside = loops.loop_and_descendants(facts.function, facts.loop.index)
        for call, targets in graph.calls_with_targets(facts.function):
            if set(call.loops) & inside:
                for t in targets:
                    roots.setdefault(t, facts.function)
        for producer in (*facts.producers, *facts.feeders):
            roots.setdefault(producer, facts.function)
    for class_id in graph.classes:
        if graph.is_module_class(class_id):
            forward = graph.method(class_id, "forward")
            if forward:
                roots.setdefault(forward, class_id)
    return roots


def _spread(graph: CallGraph, roots: dict[str, str]) -> dict[str, str]:
    out: dict[str, str] = {}
    for root, because in roots.items():
        if root not in graph.functions:
            continue
        for f in graph.reachable(root) | {root}:
            out.setdefault(f, because)
    return out


def estimate(graph: CallGraph, loops: LoopAnalysis) -> Costs:
    per_sample = _spread(graph, _sample_roots(graph))
    per_step = _spread(graph, _step_roots(graph, loops))
    out = {}
    for function_id in graph.functions:
        total, parts = score(graph, function_id)
        if function_id in per_sample:
            hot, because = "sample", per_sample[function_id]
        elif function_id in per_step:
            hot, because = "step", per_step[function_id]
        else:
            hot, because = "once", ""
        out[function_id] = FunctionCost(total, parts, hot, because)
    return Costs(out)


class CostAnalysis(Pass):
    """Estimates each project function's work and how often it runs (per sample, per
    batch, or less), for the rules that place generic regions."""

    id = "cost"
    title = "Cost estimator"
    kind = PassKind.ANALYSIS
    requires = ("callgraph", "loops")

    def run(self, ctx) -> Costs:
        return estimate(ctx.analysis("callgraph"), ctx.analysis("loops"))
