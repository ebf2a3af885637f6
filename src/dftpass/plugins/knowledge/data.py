"""The data path: the data sets a loader runs, the functions that produce samples, the
spans of a sample in an ``IterableDataset``."""

from __future__ import annotations

import attrs

import attrs

from dftpass.core.callgraph import CallGraph
from dftpass.core.summary import FileSummary, FunctionSummary, StmtPath
from dftpass.core.values import classes
from dftpass.plugins.knowledge.facts import facts
from dftpass.plugins.knowledge.handles import call_chain, HANDLE_NAME
from dftpass.plugins.knowledge.steps import does_io


def classes_given_to_loaders(graph: CallGraph) -> set[str]:
    """Project classes whose instances are the first argument of a ``DataLoader(...)``, and
    the project classes of a data set's protocol (:func:`protocol_datasets`) where a loader's
    data set cannot be seen."""
    seen, unseen = loader_datasets_seen(graph)
    return seen | (protocol_datasets(graph) if unseen else set())


def loader_datasets_seen(graph: CallGraph) -> tuple[set[str], bool]:
    """The project classes seen as the data set of a ``DataLoader(...)``, and whether some
    loader's data set could not be seen (a registry, a configuration, a factory outside)."""
    out: set[str] = set()
    unseen = False
    for function_id, (fs, fn) in graph.functions.items():
        for call in fn.calls:
            if call.method != "DataLoader" or not (call.args or dict(call.keywords).get("dataset")):
                continue
            given = call.args[0] if call.args and call.args[0] else dict(call.keywords).get("dataset")
            found = classes(graph.values.of(function_id, given)) if given else set()
            unseen = unseen or not found
            out |= found
    return out, unseen


def protocol_datasets(graph: CallGraph) -> set[str]:
    """Project classes that a data loader could be handed when dftpass cannot see which one
    it is (built through a registry ``DATASETS[name](...)``, a configuration, a factory
    outside the project): those with the map-style protocol (``__getitem__`` and
    ``__len__``) that are no model. Absence of a visible ``DataLoader(MyData(...))`` is no
    evidence that it is not one (issue 39); ML-R9 says so when it marks one this way."""
    return {class_id for class_id, (fs, cs) in graph.classes.items()
            if "__getitem__" in cs.methods and "__len__" in cs.methods and not graph.is_module_class(class_id)}


#: library packages whose classes are data sets (``torchvision.datasets.CocoDetection``)
DATASET_PACKAGES = ("torchvision.datasets.", "torchaudio.datasets.", "torchtext.datasets.",
                    "torch_geometric.datasets.", "datasets.Dataset")


def is_dataset_class(graph: CallGraph, class_id: str) -> bool:
    """A subclass of a ``Dataset`` base, directly or through a library's data set class."""
    return graph.has_base(class_id, graph.hints.dataset_bases) or any(
        b.startswith(DATASET_PACKAGES) for b in graph.external_bases(class_id))


#: the protocol methods a data loader calls on a data set, and the keywords that hand it
#: callables it runs itself
LOADER_PROTOCOL = ("__getitem__", "__iter__", "__len__", "__getitems__")
LOADER_CALLABLES = ("worker_init_fn", "collate_fn")


def run_by_loaders(graph: CallGraph, reach: set[str]) -> set[str]:
    """What data loaders run on a program's behalf, beyond ``reach`` (what the program calls
    itself): the protocol methods of the project data sets it builds (``DataLoader`` calls
    ``__getitem__``, not the program) and the callables it hands a loader (``worker_init_fn=
    dataset.worker_init``), with everything they call. DLIO's readers, built by a factory in
    ``worker_init`` and read from ``__getitem__``, are reached only this way."""
    starts: set[str] = set()
    loader_args = classes_given_to_loaders(graph)
    for class_id, (fs, cs) in graph.classes.items():
        built = graph.instantiated_in.get(class_id, set()) & reach
        if built and (class_id in loader_args or graph.has_base(class_id, (*graph.hints.dataset_bases, *graph.hints.iterable_dataset_bases))):
            starts |= {f"{fs.relpath}::{cs.methods[m]}" for m in LOADER_PROTOCOL if m in cs.methods}
    for function_id in reach:
        fs, fn = graph.functions.get(function_id, (None, None))
        for call in fn.calls if fn else ():
            for key, value in call.keywords:
                if key in LOADER_CALLABLES and value:
                    starts |= _callable_targets(graph, function_id, fs, value)
    out = set()
    for start in starts - reach:
        if start in graph.functions:
            out |= {start} | graph.reachable(start)
    return out - reach


def _callable_targets(graph: CallGraph, function_id: str, fs: FileSummary, text: str) -> set[str]:
    """The project functions a value handed over as a callable names: a function, or a
    method of an instance (``dataset.worker_init``)."""
    out = set()
    resolved = graph.resolve_name(fs, text)
    if resolved in graph.functions:
        out.add(resolved)
    if graph.values is not None:
        # ``collate_fn=collate`` after ``collate = collate_offset if flag else collate_length``
        out |= {o[5:] for o in graph.values.of(function_id, text) if o.startswith("func:") and o[5:] in graph.functions}
    receiver, _, attr = text.rpartition(".")
    if receiver and graph.values is not None:
        for class_id in classes(graph.values.of(function_id, receiver)):
            method = graph.method(class_id, attr)
            if method:
                out.add(method)
    return out


def dataset_sample_readers(graph: CallGraph) -> list[tuple[str, str, set[str]]]:
    """For each map-style data set (a class with ``__getitem__`` that subclasses a
    ``Dataset`` or is handed to a ``DataLoader``): (class name, ``__getitem__`` id, the
    functions that read one sample for it, :func:`sample_readers`)."""
    out = []
    loader_args = classes_given_to_loaders(graph)
    for class_id, (fs, cs) in graph.classes.items():
        if "__getitem__" not in cs.methods:
            continue
        if not is_dataset_class(graph, class_id) and class_id not in loader_args:
            continue
        getitem_id = f"{fs.relpath}::{cs.methods['__getitem__']}"
        out.append((cs.name, getitem_id, sample_readers(graph, getitem_id)))
    return out


@attrs.frozen
class SampleSpan:
    """The statements of an iterable data set's ``__iter__`` that produce one sample: a
    loop's body from its first statement through the one before the ``yield``."""

    dataset: str  # the class's name
    function: str  # the ``__iter__`` id
    first: StmtPath
    last: StmtPath
    line: int
    #: the sample the last statement binds, when it is known to be a tensor (its bytes are
    #: ``image_size``); None when the size cannot be known statically (no size is written)
    tensor: str | None = None


def iterable_dataset_generators(graph: CallGraph) -> dict[str, str]:
    """The generator ``__iter__`` methods of iterable data sets (a class that subclasses
    ``IterableDataset`` or is handed to a ``DataLoader``): ``__iter__`` id -> class name."""
    loader_args = classes_given_to_loaders(graph)
    out = {}
    for class_id, (fs, cs) in graph.classes.items():
        if "__iter__" not in cs.methods:
            continue
        if not graph.has_base(class_id, graph.hints.iterable_dataset_bases) and class_id not in loader_args:
            continue
        iter_id = f"{fs.relpath}::{cs.methods['__iter__']}"
        if graph.fn(iter_id).is_generator:
            out[iter_id] = cs.name
    return out


def iterable_sample_spans(graph: CallGraph) -> list[SampleSpan]:
    """Per-sample spans of iterable data sets (``iterable_dataset_generators``): for each
    ``yield`` in a loop's body, the statements of that body before it. A decorator would time
    only the creation of the generator, and a region around the ``yield`` would time the
    consumer too; the statements before it are the sample's read and its transforms.

    When those statements call nothing (``chunk = shard[i:j]`` before ``yield chunk``), the
    read is one level up: the enclosing loop's statements before the inner loop (the shard
    that is read, then cut into samples)."""
    out = []
    for iter_id, dataset in iterable_dataset_generators(graph).items():
        fs, fn = graph.functions[iter_id]
        seen = set()
        for (value, loops, delegated), path in zip(fn.yields, fn.yield_stmts):
            if delegated or not loops:
                continue
            span = _span_before(fn, loops, path)
            if span is None or span[0] in seen:
                continue
            first, last, line = span
            seen.add(first)
            out.append(SampleSpan(dataset, iter_id, first, last, line, _span_tensor(graph, fs, fn, first, last)))
    return out


def _span_before(fn, loops: tuple[int, ...], path: StmtPath) -> tuple[StmtPath, StmtPath, int] | None:
    """(first, last, line of the first call) of the statements that come before ``path`` (a
    yield, or the inner loop that holds it) in the body of its loop, climbing to the
    enclosing loop while the run calls nothing; None when no level has a run with calls."""
    for depth in range(len(loops) - 1, -1, -1):
        loop = fn.loops[loops[depth]]
        n = len(loop.stmt)
        if len(path) <= n or path[:n] != loop.stmt or path[n][0] != "body":
            return None
        if len(path) > n + 1 and depth == len(loops) - 1:
            return None  # the yield is under an ``if`` of the body: no one run of statements
        index = path[n][1]
        if index == 0:
            return None
        first, last = loop.stmt + (("body", 0),), loop.stmt + (("body", index - 1),)
        inside = [c for c in fn.calls if c.stmt[:n] == loop.stmt and len(c.stmt) > n
                  and first[n] <= c.stmt[n] <= last[n]]
        if inside:
            return first, last, min(c.line for c in inside)
        path = loop.stmt  # only names moved around: look at the loop that holds this one
    return None


#: torch calls whose result is always a tensor
TENSOR_MAKERS = frozenset({"torch.from_numpy", "torch.tensor", "torch.as_tensor", "torch.stack", "torch.cat",
                           "torch.zeros", "torch.ones", "torch.empty", "torch.frombuffer"})
#: methods whose result is a tensor when called on a sample (``shard.to(device)``)
TENSOR_METHODS = frozenset({"to", "cuda", "pin_memory", "contiguous", "long", "float", "half", "int"})


def _makes_tensor(graph: CallGraph, fs: FileSummary, value: str | None) -> bool:
    """``torch.from_numpy(...)`` and its kin, also with tensor methods after (``.long()``),
    and a tensor method on a name (``shard.to(self.device)``)."""
    chain = call_chain(value)
    if chain is None or chain[2]:
        return False
    receiver, _, method = chain[0].rpartition(".")
    return graph.qualify(fs, chain[0]) in TENSOR_MAKERS or (
        method in TENSOR_METHODS and bool(HANDLE_NAME.match(receiver)) and not receiver.startswith("self."))


def _span_tensor(graph: CallGraph, fs: FileSummary, fn: FunctionSummary, first: StmtPath,
                 last: StmtPath) -> str | None:
    """The name the span's last tensor-making statement binds (its bytes are the sample's
    ``image_size``), unless a later statement of the span binds it to something else."""
    n = len(first) - 1
    tensor = None
    for a in sorted((a for a in fn.assigns if len(a.stmt) == n + 1 and a.stmt[:n] == first[:n]
                     and first[n] <= a.stmt[n] <= last[n] and HANDLE_NAME.match(a.target)
                     and not a.target.startswith("self.")), key=lambda a: a.stmt[n]):
        if _makes_tensor(graph, fs, a.value):
            tensor = a.target
        elif a.target == tensor:
            tensor = None
    return tensor


def per_sample_functions(graph: CallGraph, loops) -> dict[str, str]:
    """Project functions a batch producer calls once per sample (``torch.stack([read(i) for
    i in ix])``): function id -> the producer's name (the first producer that calls it)."""
    out: dict[str, str] = {}
    for facts in loops.of_kind("batch"):
        for producer in (*facts.producers, *loop_generators(graph, facts)):
            pfn = graph.fn(producer)
            for i, call in enumerate(pfn.calls):
                if not (call.in_comprehension or call.loops):
                    continue
                for target in graph.targets(producer, i):
                    tfn = graph.fn(target)
                    if not tfn.is_generator and not target.endswith(".__init__"):
                        out.setdefault(target, pfn.name)
    return out


def loop_generators(graph: CallGraph, facts) -> list[str]:
    """The project generators a batch loop iterates (``for batch in batches(files, 32):``):
    they build each batch, like a producer."""
    if facts.style != "iter":
        return []
    fn = graph.fn(facts.function)
    out = []
    for i, call in enumerate(fn.calls):
        if call.stmt == facts.loop.stmt and call.stmt_kind == "other":
            out += [t for t in graph.targets(facts.function, i) if graph.fn(t).is_generator]
    return out


def data_path(graph: CallGraph, loops) -> dict[str, str]:
    """Every function of the data path, with why: the functions that produce one sample
    (each data set's ``__getitem__`` and the readers it dispatches to, the functions a batch
    producer calls per sample: ML-R9's targets), the batch producers of producer-style batch
    loops (``get_batch()``), and every project function those call."""
    roots: dict[str, str] = {}
    for name, getitem_id, readers in dataset_sample_readers(graph):
        for function_id in sorted({getitem_id, *readers}):
            roots.setdefault(function_id, f"produces one sample of {name}")
    for function_id, producer in per_sample_functions(graph, loops).items():
        roots.setdefault(function_id, f"produces one sample of the batch {producer}() builds")
    for facts in loops.of_kind("batch"):
        for producer in facts.producers:
            roots.setdefault(producer, f"produces the batches of the loop at {facts.loop.line}")
    out = dict(roots)
    for function_id, why in roots.items():
        for reached in sorted(graph.reachable(function_id)):
            if reached in graph.functions:
                out.setdefault(reached, f"called from the data path ({why})")
    return out


def sample_readers(graph: CallGraph, getitem_id: str, depth: int = 6) -> set[str]:
    """The functions that really read one sample for ``__getitem__``: follow what it only
    dispatches to (``return self.reader.read_index(i)``, through factories and overrides
    that call ``super()``) until a function does the reading itself."""
    frontier, found = [getitem_id], set()
    for _ in range(depth):
        following = []
        for function_id in frontier:
            targets = _dispatches_to(graph, function_id)
            if targets and not does_io(graph, function_id):
                following.extend(targets)
            else:
                found.add(function_id)
        if not following:
            break
        frontier = list(dict.fromkeys(following))
    else:
        found.update(frontier)
    # an override that calls the base's version nests in it: keep the innermost
    return {f for f in found if not any(o != f and o in graph.reachable(f) for o in found)}


def _dispatches_to(graph: CallGraph, function_id: str) -> list[str]:
    """The project functions ``function_id`` hands the sample over to: every project call it
    makes is the one it returns (a 4-line ``__getitem__`` that counts and logs still only
    dispatches)."""
    fn = graph.fn(function_id)
    returned, other = [], False
    # calls inside a log line's arguments (``logger.debug(f"... {rank()}")``) are not work
    logged = {c.stmt for c in fn.calls if c.stmt_kind == "expr" and c.method in facts(graph).log_methods}
    for i, call in enumerate(fn.calls):
        targets = [t for t in graph.targets(function_id, i)
                   if not graph.fn(t).is_generator and not graph.fn(t).is_async]
        if not targets or (call.stmt in logged and call.stmt_kind != "expr"):
            continue
        if call.stmt_kind == "return":
            returned.extend(targets)
        else:
            other = True
    return [] if other else returned
