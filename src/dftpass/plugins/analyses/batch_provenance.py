"""The ``batch_provenance`` analysis: for each training or evaluation step, where the data it
consumes comes from, found once and read by every rule that places a data-path region.

For each batch loop (the ``loops`` analysis), the step's consumers (its backward pass, its
model calls, the project functions it calls that do a step, and theirs in turn) are walked
back with :mod:`dftpass.core.dataflow` to where their data is drawn and read. One
:class:`BatchChain` per loop holds what the walk met:

* **transfers**: the moves to the device on the way (``micro = batch[i:j].to(dev())`` two
  calls below the loop, ``x.to(device)`` in a generator, ``full_seq.to(device)`` in a data
  set's ``__getitem__``, ``imgs.type(torch.cuda.FloatTensor)``): ML-R17's regions, through
  the ``transfers`` analysis;
* **loads**: the reads the batches are cut from when they are not read per sample (a corpus
  read once with ``open().read()``, ``gzip.open`` + ``read`` of a whole data set,
  ``np.frombuffer(fh.read())`` in a helper): ML-R25 wraps those statements;
* **transforms**: project functions the data passes through that only transform it
  (``char_tensor(chunk)`` per sample, ``mnist()`` normalizing a whole data set): ML-R10's
  preprocess candidates;
* **breaks**: where the walk could not go on, and why: ``plan`` and ``validate`` say them
  (ML-R6) instead of placing a guess.

Where a loop's step has no consumer the knowledge recognises, the chain is empty and the
rules keep their own recognisers for that loop (said in each rule's docstring).
"""

from __future__ import annotations

import attrs

from dftpass.core.dataflow import Break, Site
from dftpass.core.passes import Pass, PassKind
from dftpass.plugins.knowledge import does_step, step_consumers

#: how many project calls below a batch loop the step's consumers are looked for
CONSUMER_DEPTH = 3


@attrs.frozen
class BatchChain:
    """What one batch loop's step consumes, walked back (see the module docstring)."""

    function: str
    loop_line: int
    #: the loop statement (its function's reads outside it are one-time loads)
    loop_stmt: tuple
    #: (function id, call line, call col) of each consumer walked back from
    consumers: tuple[tuple[str, int, int], ...]
    sites: tuple[Site, ...]
    breaks: tuple[Break, ...]
    #: the functions that run once per batch or per sample for this loop: what its body calls
    #: (not into the model), producers, generators, data set item functions
    per_batch: frozenset[str]
    #: project functions the data passes through that transform it (:meth:`Provenance.transforms`)
    transforms: tuple[str, ...] = ()
    #: the functions that hand the data out: producers, generators, data set item functions
    #: and what they call (their reads are the data path's own, not one-time loads)
    data_side: frozenset[str] = frozenset()
    #: :meth:`Provenance.item_preprocess` of this loop's data sets
    item_spans: dict = attrs.field(factory=dict)

    def of_kind(self, *kinds: str) -> list[Site]:
        return [s for s in self.sites if s.kind in kinds]


@attrs.frozen
class Provenance:
    """Every batch loop's chain, and the views the rules read."""

    chains: tuple[BatchChain, ...] = ()

    def chain_of(self, function_id: str, loop_line: int) -> BatchChain | None:
        for c in self.chains:
            if (c.function, c.loop_line) == (function_id, loop_line):
                return c
        return None

    def transfers(self) -> dict[str, dict[tuple, list[Site]]]:
        """function id -> statement path -> the device moves of the data in that statement."""
        out: dict[str, dict[tuple, list[Site]]] = {}
        for chain in self.chains:
            for s in chain.of_kind("transfer"):
                moves = out.setdefault(s.function, {}).setdefault(s.stmt, [])
                if s not in moves:
                    moves.append(s)
        return out

    def loads(self) -> dict[str, set[tuple]]:
        """function id -> the statements that read the data a step's batches are cut from,
        outside the functions that run per batch (those are the data path's own reads)."""
        out: dict[str, set[tuple]] = {}
        for chain in self.chains:
            for s in chain.of_kind("read"):
                if not s.stmt or s.function in chain.per_batch or s.function in chain.data_side:
                    continue
                if s.function == chain.function and s.stmt[:len(chain.loop_stmt)] == chain.loop_stmt:
                    continue  # read in the loop itself: the data path's own read
                out.setdefault(s.function, set()).add(s.stmt)
        return out

    def transforms(self) -> dict[str, str]:
        """Project functions the data passes through on its way that transform it (what they
        return is made of data read in or drawn from a loader), and are not readers, producers
        or generators themselves: function id -> why."""
        out: dict[str, str] = {}
        for chain in self.chains:
            for target in chain.transforms:
                out.setdefault(target, f"transforms the data of the batch loop at line {chain.loop_line}")
        return out

    def breaks(self) -> list[Break]:
        return [b for c in self.chains for b in c.breaks]

    def item_preprocess(self) -> dict[str, tuple[tuple, tuple, int]]:
        """In a data set's item function that reads its sample itself, the run of its
        top-level statements after the read that transform what was read (improved-diffusion's
        resizes, crop and scaling after ``Image.open``), up to the ``return``: function id ->
        (first statement, last statement, first line)."""
        out: dict[str, tuple[tuple, tuple, int]] = {}
        for chain in self.chains:
            out.update(chain.item_spans)
        return out


class BatchProvenanceAnalysis(Pass):
    """Walk each step's data back to where it is drawn and read (``ctx.analysis("batch_provenance")``)."""

    id = "batch_provenance"
    title = "Batch provenance"
    kind = PassKind.ANALYSIS
    requires = ("callgraph", "loops")

    def run(self, ctx) -> Provenance:
        graph = ctx.analysis("callgraph")
        loops = ctx.analysis("loops")
        return build(graph, loops)


def build(graph, loops) -> Provenance:
    flow = loops.dataflow
    if flow is None:
        return Provenance()
    chains = []
    # full-batch training (an epoch loop whose step function trains on the whole data): the
    # step's data is walked back the same way, from the consumers of the step function
    full_batch = [f for f in loops.of_kind("epoch") if f.full_batch]
    for facts in sorted([*loops.of_kind("batch"), *full_batch], key=lambda f: (f.function, f.loop.line)):
        fn = graph.fn(facts.function)
        inside = loops.loop_and_descendants(facts.function, facts.loop.index)
        consumers = [(facts.function, i, receiver) for i, receiver in step_consumers(graph, facts.function, inside)]
        for step in facts.full_batch:
            consumers += [(step, i, receiver) for i, receiver in step_consumers(graph, step, None)]
        per_batch = {*facts.producers, *facts.sources, *facts.feeders, *facts.full_batch}
        frontier = [t for i, call in enumerate(fn.calls) if set(call.loops) & inside
                    for t in graph.targets(facts.function, i)]
        for depth in range(CONSUMER_DEPTH):
            following = []
            for target in dict.fromkeys(frontier):
                if target in per_batch or target == facts.function or _is_model(graph, target) \
                        or target.endswith(".__init__"):
                    continue
                per_batch.add(target)
                consumers += [(target, i, receiver) for i, receiver in step_consumers(graph, target, None)]
                following.extend(graph.callees(target))
            frontier = following
        sites: list[Site] = []
        breaks: list[Break] = []
        walked = []
        for function_id, index, receiver in consumers:
            call = graph.fn(function_id).calls[index]
            trace = flow.derive_call_args(function_id, call.line, call.col, receiver)
            walked.append((function_id, call.line, call.col))
            sites += [s for s in trace.sites if s not in sites]
            breaks += [b for b in trace.breaks if b not in breaks]
        # the functions that hand out samples and batches run per batch too
        per_batch |= {s.target for s in sites if s.kind == "generator" and s.target}
        for s in sites:
            if s.kind == "dataset":
                per_batch |= {m for m in graph.methods_of(s.target)
                              if graph.fn(m).name in ("__getitem__", "__iter__", "__next__", "__getitems__")}
        per_batch |= {r for f in list(per_batch) if f in graph.functions and f != facts.function
                      for r in _helpers(graph, f)}
        per_batch.discard(facts.function)
        per_batch |= _step_reach(graph, facts, sites, per_batch)
        data_side = _data_side(graph, facts, sites)
        sites = [s for s in sites if s.kind != "transfer" or _moves_data(flow, s, facts)]
        chains.append(BatchChain(facts.function, facts.loop.line, facts.loop.stmt, tuple(walked), tuple(sites),
                                 tuple(breaks), frozenset(per_batch),
                                 _transforms(flow, facts, sites, per_batch, data_side), frozenset(data_side),
                                 _item_spans(flow, sites)))
    return Provenance(tuple(chains))


#: the sites of a walk that say the value is data: read in, or drawn from a loader or a generator
DATA_SOURCES = frozenset({"read", "loader", "generator", "dataset"})


def _moves_data(flow, site: Site, facts) -> bool:
    """A device move of data (``inp.cuda()``), not of a model's state (``hidden.cuda()`` of
    ``model.init_hidden()``) or of numbers drawn in the step (``timesteps.to(device)``).
    What the batch loop itself draws is data, whatever produced it (its iterable, its
    ``next()``): a loader that ``deepspeed.initialize`` or ``accelerator.prepare`` hands back
    is one too."""
    import ast

    call = flow.call_node(site.function, site.line, site.col)
    if call is None or not isinstance(call.func, ast.Attribute):
        return False
    trace = flow.derive(site.function, [call.func.value], site.stmt)
    return any(s.kind in DATA_SOURCES or _drawn_by_loop(s, facts) for s in trace.sites)


def _drawn_by_loop(site: Site, facts) -> bool:
    """The site is the batch loop drawing its batch: its ``for`` or a ``next()`` in its body."""
    if site.function != facts.function:
        return False
    if site.kind == "loop":
        return site.stmt == facts.loop.stmt
    return site.kind == "next" and _within(site.stmt, facts.loop.stmt)


def _step_reach(graph, facts, sites: list[Site], per_batch: set[str]) -> set[str]:
    """Every function a step runs: what the loop body calls, what those call, and what the
    walk saw them call that the call graph did not resolve (``compute_losses()``, a
    ``functools.partial`` of ``training_losses``)."""
    reach = set(per_batch)
    changed = True
    while changed:
        changed = False
        for s in sites:
            if s.kind not in ("call", "model") or not s.target or s.target in reach:
                continue
            inside_loop = s.function == facts.function and _within(s.stmt, facts.loop.stmt)
            if inside_loop or s.function in reach:
                reach |= {s.target, *(r for r in graph.reachable(s.target) if r in graph.functions)}
                changed = True
    return reach


def _data_side(graph, facts, sites: list[Site]) -> set[str]:
    """The functions that hand the step's data out (producers, generators, data set item
    functions) and the project functions they call."""
    side = {*facts.producers, *facts.sources, *facts.feeders, *(s.target for s in sites if s.kind == "generator")}
    for s in sites:
        if s.kind == "dataset":
            side |= {m for m in graph.methods_of(s.target)
                     if graph.fn(m).name in ("__getitem__", "__iter__", "__next__", "__getitems__")}
    side = {f for f in side if f in graph.functions}
    return side | {r for f in side for r in _helpers(graph, f)}


def _within(path: tuple, block: tuple) -> bool:
    return len(path) > len(block) and path[:len(block)] == block


def _transforms(flow, facts, sites: list[Site], per_batch: set[str], data_side: set[str]) -> tuple[str, ...]:
    """The project functions on the data's way to the step that transform it (see
    :meth:`Provenance.transforms`): called where the data is handed out (a producer, a
    generator, a data set's item) or read in before the loop, never inside the step itself
    (the step's own arithmetic on its batch is its compute)."""
    readers = {s.function for s in sites if s.kind == "read"}
    skip = {*readers, *facts.producers, *facts.sources, *facts.feeders,
            *(s.target for s in sites if s.kind == "generator")}
    graph = flow.graph
    items = {m for s in sites if s.kind == "dataset" for m in graph.methods_of(s.target)
             if graph.fn(m).name in ("__getitem__", "__iter__", "__next__", "__getitems__")}
    item_side = items | {r for f in items for r in _helpers(graph, f)}
    out = []
    for s in sites:
        target = s.target
        if s.kind != "call" or not target or target in skip or target in out:
            continue
        # read in before the loop (and outside every other loop of the function: a call in a
        # second batch loop, dlrm's warm-up over the same loader, runs per batch there)
        in_a_loop = any(_within(s.stmt, lp.stmt) for lp in graph.fn(s.function).loops)
        before_loop = s.function == facts.function and not in_a_loop
        if not (s.function in data_side or before_loop or (s.function not in per_batch
                                                             and s.function != facts.function and not in_a_loop)):
            continue
        if s.function in item_side:
            continue  # a data set's item: ML-R9 times the sample, ML-R10 its named transforms
        if flow.graph.fn(target).is_generator or does_step(flow.graph, target):
            continue  # a generator hands batches out; a step (a jitted update) consumes them
        returned = flow.derive_returns(target).sites
        # data read in or drawn, and not yet through a model (a loss of the model's output
        # is made of data too, downstream: not a transform of the input)
        if any(r.kind in DATA_SOURCES for r in returned) and not any(r.kind == "model" for r in returned):
            out.append(target)
    # a function that reads the data once and transforms it with these helpers (pygcn's
    # ``load_data``: genfromtxt, then ``normalize``) is the outermost transform: it is marked
    # instead of its helpers (one preprocess region around the whole preparation)
    callers = {s.target: s.function for s in sites if s.kind == "call" and s.target in out}
    outer = []
    for target in out:
        caller = callers.get(target)
        if caller in readers and caller not in per_batch and caller not in data_side and caller != facts.function \
                and not graph.fn(caller).is_module:
            target = caller
        if target not in outer:
            outer.append(target)
    return tuple(outer)


def _item_spans(flow, sites: list[Site]) -> dict[str, tuple[tuple, tuple, int]]:
    """See :meth:`Provenance.item_preprocess`: for each data set item function with a read
    site in its own body, the top-level statements after the last read that use what it read
    (directly or through what they bound), from the first to the last of them, the ``return``
    left out; two statements at least (one is a conversion, not preprocessing)."""
    import ast

    graph = flow.graph
    items = {m for s in sites if s.kind == "dataset" for m in graph.methods_of(s.target)
             if graph.fn(m).name in ("__getitem__", "__getitems__")}
    out = {}
    for item in sorted(items):
        scope = flow.scope(item)
        if scope is None or not isinstance(scope.node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body = scope.node.body
        depth = len(graph.fn(item).stmt) + 1
        reads = [s for s in sites if s.kind == "read" and s.function == item and len(s.stmt) >= depth]
        if not reads:
            continue
        last_read = max(s.stmt[depth - 1][1] for s in reads if s.stmt[depth - 1][0] == "body")
        derived = {n.id for n in ast.walk(body[last_read]) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
        marked = []
        for k in range(last_read + 1, len(body)):
            stmt = body[k]
            if isinstance(stmt, ast.Return):
                break
            names = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name)}
            bound = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}
            if names & derived and bound:
                derived |= bound
                marked.append(k)
        if len(marked) >= 2:
            prefix = graph.fn(item).stmt
            first, last = prefix + (("body", marked[0]),), prefix + (("body", marked[-1]),)
            out[item] = (first, last, body[marked[0]].lineno)
    return out


def _is_model(graph, function_id: str) -> bool:
    owner = graph.class_of_method(function_id)
    return owner is not None and graph.is_module_class(owner)


def _helpers(graph, function_id: str) -> set[str]:
    """The project functions a per-batch function calls (they run per batch too), not into models."""
    return {r for r in graph.reachable(function_id) if r in graph.functions and not _is_model(graph, r)}
