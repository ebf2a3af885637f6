"""What each loop does: fetch and run batches, run epochs, or something else.

A *batch loop* runs one step per iteration on data it fetches, in one of four styles:

* ``iter``: it iterates a data loader, or something derived from one: a ``DataLoader(...)``,
  a ``tf.data`` pipeline, an object a factory returns, an attribute set from a parameter,
  seen through ``enumerate``, ``tqdm``, ``zip`` and the like (:mod:`dftpass.core.values`
  follows the value; names that read like loaders count only when the value is unknown);
* ``next``: its body takes ``next(it)`` from a loader's iterator, often inside ``while
  True:`` with an ``except StopIteration:`` that starts the iterator again;
* ``producer``: its body calls a project function that produces a batch
  (``x, y = get_batch(data, i)``), in ``for i in range(0, n, bptt)`` or ``while True:``;
  a gradient-accumulation loop between the two (``for micro_step in range(k)``) is
  part of the step, not the batch loop;
* ``fed``: it iterates a project generator that itself yields the batches of a loader
  (``for batch in loader.next():``); the generator's own loop carries the fetch;
* ``made``: its step draws ``next(it)`` in the middle of an expression
  (``update(next(batches))``, ``model(next(train_loader))``) from a project generator: the
  iterator is wrapped where it is made (``batches = data_stream()``).

Where the names and shapes above say nothing, batch provenance (:mod:`dftpass.core.dataflow`)
walks the values the step consumes back to where they are drawn: a project function that
returns them (a producer, whatever its name: ``train(*random_training_set())``), or
``next()`` of a project generator (whatever it yields: slices of in-memory arrays too).

An *epoch loop* is the innermost loop that contains a batch loop, directly or through the
functions it calls: a ``for`` over numbers or an unknown iterable (never over a literal
list such as ``['train', 'val']``), or a ``while`` whose condition or counter names an
epoch (``while epoch < max_epochs:``). Module-level loops count like any other.
"""

from __future__ import annotations

import re
from typing import Any, Callable, Iterable

import attrs

from dftpass.core.callgraph import CallGraph
from dftpass.core.summary import FileSummary, FunctionSummary, LoopSummary, StmtPath, dotted
from dftpass.core.values import kind as origin_kind
from dftpass.core.values import subject as origin_subject


@attrs.define
class LoopOptions:
    """What counts as a loader. The library lists hold what a project's configuration adds;
    the ``loops`` analysis adds the plugins' knowledge (``dftpass_knowledge``) to them."""

    #: names that read like a data loader (matched on the last dotted component)
    loader_name_pattern: str = r"(?i)(^|_)(data_?)?loaders?$|(^|_)dls?$|(^|_)dataloader"
    #: more such names, each counted only in a file that imports the module it is given
    #: under (``{"tensorflow": ["(^|_)ds$"]}``: a framework plugin's ``loader_names``)
    scoped_loader_names: dict[str, list[str]] = attrs.field(factory=dict)
    #: classes/functions whose call returns a loader (matched on the last dotted component)
    loader_factories: list[str] = attrs.field(factory=list)
    #: qualified prefixes of data pipelines whose objects iterate batches (``tf.data``)
    loader_modules: list[str] = attrs.field(factory=list)
    #: calls that pass iteration through unchanged (the loop still iterates what they wrap);
    #: Python's own are always here
    transparent_wrappers: list[str] = attrs.field(factory=lambda: ["enumerate", "iter", "islice", "cycle"])
    #: project functions whose call produces one batch (matched on the function's name)
    batch_producer_pattern: str = r"(?i)^_?(get|next|load|fetch|sample|make|read|draw|build)_?(mini_?)?batch(es)?$"
    #: a ``for`` loop whose variable or bound says gradient accumulation
    accumulation_pattern: str = r"(?i)micro|accum"
    #: names that say "epoch" (``while epoch < max_epochs``)
    epoch_name_pattern: str = r"(?i)epoch"


@attrs.define
class LoopFacts:
    function: str
    loop: LoopSummary
    kind: str  # "batch" | "epoch" | "other"
    subject: str
    reason: str
    #: how many leading ``enumerate(...)`` layers stay outside a wrapper
    wrap_depth: int = 0
    #: an int loop variable usable as ``step`` (the index of an outer ``enumerate``, or of ``range(n)``)
    step_var: str | None = None
    #: an int loop variable usable as ``epoch`` (a ``range`` target or an enumerate index)
    int_var: str | None = None
    #: the dftracer node already wrapping the loop's iterable ("dataloader.fetch"), if any
    wrapped_by: str | None = None
    #: "iter" | "next" | "producer" | "fed" (see the module docstring)
    style: str = "iter"
    #: ``next`` style: the statements the fetch region covers
    fetch_regions: tuple[StmtPath, ...] = ()
    #: ``producer`` style: the project functions that produce the batch
    producers: tuple[str, ...] = ()
    #: a ``+= 1`` counter of the loop body: its step when it has no loop variable for one
    counter: str | None = None
    #: which split the loop runs over, from data flow (then names): train | evaluate | test
    split: str | None = None
    #: a generator's loop that hands each batch on with ``yield``: its consumer is the step
    yields_batches: bool = False
    #: ``fed`` style: the generator functions whose loops fetch the batches
    feeders: tuple[str, ...] = ()
    #: ``next`` style over a project generator of a loader's batches (``X, Y = next(it)`` with
    #: ``it = iter_batches(split='train')``): the generators; the fetch is the ``next()``
    sources: tuple[str, ...] = ()
    #: ``made`` style: where each iterator the step draws from is made: (the function or
    #: module scope that binds it, the ``it = gen()`` statement, its line)
    made: tuple[tuple[str, StmtPath, int], ...] = ()
    #: found by batch provenance (not by the names and shapes of the loop)
    by_flow: bool = False
    #: found by the step alone (issue 39): what the body shows ("trains: loss.backward()"),
    #: when neither names nor provenance proved where the batch comes from
    anchored: str | None = None
    #: an epoch loop of full-batch training: the project functions it calls once an epoch that
    #: each run one training step on the whole data (pygcn's ``train(epoch)``)
    full_batch: tuple[str, ...] = ()

    @property
    def wraps_iterable(self) -> bool:
        """Whether the fetch region goes around this loop's iterable (``fetch.iter``)."""
        return self.kind == "batch" and self.style == "iter" and self.loop.kind == "for"


def _last(text: str) -> str:
    return text.rstrip("()").rsplit(".", 1)[-1]


#: the sites of a walk that say the value is data: read in, or drawn from a loader or a generator
DATA_SOURCES = frozenset({"read", "loader", "generator", "dataset"})


def _within(path: StmtPath, block: StmtPath) -> bool:
    """``path`` is a statement inside the compound statement ``block`` (its body or else)."""
    return len(path) > len(block) and path[:len(block)] == block


class _Text:
    """A ``next()`` site's iterator text, asked like a site (``_drawn_from``)."""

    def __init__(self, target: str) -> None:
        self.target = target


_SPLITS = (
    ("test", re.compile(r"(?i)(^|[^a-z])test")),
    ("evaluate", re.compile(r"(?i)(^|[^a-z])(val|valid|validation|eval|evaluate|evaluation|dev)([^a-z]|$)")),
    ("train", re.compile(r"(?i)train")),
)


#: keywords that choose a data set's split by a boolean (torchvision's ``train=False`` is the test set)
TRAIN_FLAGS = frozenset({"train", "training", "is_train", "is_training"})


def split_of(texts: Iterable[str | None]) -> str | None:
    """The data split the texts name, nearest evidence first."""
    for text in texts:
        if not text:
            continue
        for name, pattern in _SPLITS:
            if pattern.search(text):
                return name
    return None


@attrs.define
class LoopAnalysis:
    graph: CallGraph
    options: LoopOptions
    recognize: Callable  # (fs, callee) -> node path | None (from the emitter)
    #: does this function do a training or evaluation step's compute (knowledge)?
    does_step: Callable[[str, set[int] | None], bool] = lambda function_id, loops: False
    #: the backward passes, model calls and step calls of a loop body (knowledge):
    #: (call index, whether the batch is the call's receiver)
    consumers: Callable[[str, set[int]], list[tuple[int, bool]]] = lambda function_id, loops: []
    #: does the loop body (those loops of the function) train: a backward pass or an optimizer step?
    trains: Callable[[str, set[int]], bool] = lambda function_id, loops: False
    #: what a loop body shows of a step, whatever it iterates (knowledge): "trains: ..." /
    #: "evaluates: ..." or None; (function id, the loop and its accumulation loops, the loop's variables)
    anchor: Callable[[str, set[int], tuple[str, ...]], str | None] = lambda function_id, inside, targets: None
    #: does the function run a training step outside any loop of its own (knowledge): a
    #: full-batch step (``def train(epoch): ...; loss.backward(); optimizer.step()``)
    trains_once: Callable[[str], bool] = lambda function_id: False
    #: batch provenance's walker (:class:`dftpass.core.dataflow.DataFlow`), when the files can be read
    dataflow: Any = None
    facts: dict[tuple[str, int], LoopFacts] = attrs.field(factory=dict)
    _generators: dict[str, bool] = attrs.field(factory=dict)
    _patterns: dict[str, re.Pattern] = attrs.field(factory=dict)

    # -- loader-ness ----------------------------------------------------------------------
    def _name_looks_like_loader(self, fs: FileSummary, text: str) -> bool:
        pattern = self._patterns.get(fs.relpath)
        if pattern is None:
            names = [self.options.loader_name_pattern]
            for prefix, patterns in self.options.scoped_loader_names.items():
                if any(m == prefix or m.startswith(prefix + ".") for m in fs.imported_modules):
                    names.extend(patterns)
            # each alternative keeps its own flags: ``(?i)x`` -> ``(?i:x)``
            pattern = self._patterns[fs.relpath] = re.compile("|".join(
                f"(?i:{p[4:]})" if p.startswith("(?i)") else f"(?:{p})" for p in dict.fromkeys(names)))
        return bool(pattern.search(_last(text)))

    def _origin_is_loader(self, origin: str) -> bool | None:
        """True/False when the origin tells, None when it does not."""
        k, s = origin_kind(origin), origin_subject(origin)
        if k == "ext":
            qualified = s
            if any(_last(part) in self.options.loader_factories for part in qualified.split("()")):
                return True
            if qualified.startswith(tuple(self.options.loader_modules)):
                return True
            return None
        if k == "gen":
            # a generator over a loader's batches is ``fed`` (its own loop is wrapped); one
            # that delegates (``yield from loader``) is a loader; any other may produce batches
            if self.batch_generator(s):
                return False
            return True if self._delegates_to_loader(s) else None
        if k == "inst":
            g = self.graph
            if g.has_base(s, self.options.loader_factories):
                return True
            iterate = g.method(s, "__iter__")
            if iterate and self.batch_generator(iterate):
                return True
            return None
        return False  # literals, functions, classes

    def loader_like(self, fs: FileSummary, fn: FunctionSummary, text: str | None,
                    call_args: tuple = (), depth: int = 0) -> bool:
        if not text or depth > 6 or "?" in text:
            return False
        g = self.graph
        function_id = f"{fs.relpath}::{fn.qualname}"
        if text.endswith("()"):
            callee = text[:-2]
            if _last(callee) in self.options.transparent_wrappers:
                if call_args:
                    return self.loader_like(fs, fn, call_args[0], (), depth + 1)
                # a wrapper called as a method wraps its receiver: ``ds.as_numpy_iterator()``
                receiver = callee.rsplit(".", 1)[0] if "." in callee else ""
                return bool(receiver) and self.loader_like(fs, fn, receiver, (), depth + 1)
            if _last(g.qualify(fs, callee)) in self.options.loader_factories:
                return True
        elif "." not in text:
            # ``it = iter(loader)``: follow the transparent call's argument
            for a in fn.assigns:
                if a.target == text and a.value and a.value.endswith("()") and \
                        _last(a.value) in self.options.transparent_wrappers:
                    return bool(a.call_args) and self.loader_like(fs, fn, a.call_args[0], (), depth + 1)
        origins = g.values.of(function_id, text) if g.values is not None else frozenset()
        verdicts = [self._origin_is_loader(o) for o in origins]
        if any(v is True for v in verdicts):
            return True
        if origins and all(v is False for v in verdicts):
            return False  # known, and not a loader: a list of closures, a model, a string
        return self._name_looks_like_loader(fs, text) and not text.endswith("()")

    def batch_generator(self, function_id: str) -> bool:
        """A project generator that yields the batches of a loader it iterates (a loader
        class's ``next()``/``__iter__``), or ``yield from`` one."""
        if function_id in self._generators:
            return self._generators[function_id]
        self._generators[function_id] = False  # cycle guard
        fs, fn = self.graph.functions[function_id]
        result = False
        if fn.is_generator:
            for value, loops, delegated in fn.yields:
                for index in loops:
                    loop = fn.loops[index]
                    names = loop.target_names + (loop.single_target,)
                    # ``yield batch`` or ``yield x, y`` of the loop's own targets
                    parts = value.split(", ") if value else [value]
                    if loop.kind != "while" and any(p in names for p in parts if p) and \
                            self._iterable_is_loader(fs, fn, loop):
                        result = True
        self._generators[function_id] = result
        return result

    def _passes_through(self, function_id: str) -> bool:
        """A generator whose batch loop iterates one of its own parameters
        (``def log_every(self, iterable, freq): for obj in iterable: yield obj``): a wrapper
        of whatever loader its caller hands it, not a loader of its own."""
        fn = self.graph.fn(function_id)
        params = set(fn.params)
        for _, loops, _ in fn.yields:
            for index in loops:
                loop = fn.loops[index]
                texts = [loop.core, *(a for layer in loop.layers for a in layer.args[:1])]
                if any(t in params for t in texts if t):
                    return True
        return False

    def _delegates_to_loader(self, function_id: str) -> bool:
        """A generator that hands on a loader's batches with ``yield from loader``."""
        key = f"yield-from:{function_id}"
        if key not in self._generators:
            self._generators[key] = False  # cycle guard: ``yield from self.items()``
            fs, fn = self.graph.functions[function_id]
            self._generators[key] = any(delegated and self.loader_like(fs, fn, value)
                                        for value, _, delegated in fn.yields)
        return self._generators[key]

    def _iterable_is_loader(self, fs: FileSummary, fn: FunctionSummary, loop: LoopSummary) -> bool:
        layers = loop.layers
        k = 0
        while k < len(layers) and (_last(layers[k].callee) in self.options.transparent_wrappers
                                   or self.recognize(fs, layers[k].callee)):
            k += 1
        if k < len(layers):
            layer = layers[k]
            if _last(layer.callee) == "zip":
                return any(self.loader_like(fs, fn, a) for a in layer.args)
            return self.loader_like(fs, fn, layer.callee + "()", layer.args)
        return self.loader_like(fs, fn, loop.core)

    # -- classification -----------------------------------------------------------------
    def _classify(self, function_id: str, fs: FileSummary, fn: FunctionSummary, loop: LoopSummary) -> LoopFacts:
        facts = LoopFacts(function_id, loop, "other", loop.iter_text, "")
        if loop.counters:
            facts.counter = loop.counters[0]
        # a gradient-accumulation loop's next() is its parent loop's fetch (the parent steps)
        next_calls = () if self._is_accumulation(fn, loop) else (
            *(n for i in self._accumulation_children(fn, loop) for n in fn.loops[i].next_calls), *loop.next_calls)
        regions = tuple(dict.fromkeys(n.region for n in next_calls if self.loader_like(fs, fn, n.iterator)))
        sources = () if regions else self._next_sources(function_id, next_calls)
        if sources:
            regions = tuple(dict.fromkeys(n.region for n in next_calls if n.iterator in sources))
            facts.sources = tuple(sorted({g for gens in sources.values() for g in gens}))
        if regions:
            it = next(n.iterator for n in next_calls if n.region == regions[0])
            facts.kind, facts.style, facts.fetch_regions = "batch", "next", regions
            facts.subject, facts.reason = it or "", f"takes next({it}) from a data loader"
            self._ints(facts)
            return facts
        if loop.kind == "for":
            self._classify_iterable(facts, fs, fn, loop)
            if facts.kind == "batch":
                return facts
        producers = () if self._is_accumulation(fn, loop) else self._producers(function_id, loop)
        if producers and self.does_step(function_id, {loop.index, *self._accumulation_children(fn, loop)}):
            names = ", ".join(p.rsplit("::", 1)[-1] for p in producers)
            facts.kind, facts.style, facts.producers = "batch", "producer", producers
            facts.reason = f"runs a step on the batch {names}() produces"
            self._ints(facts)
        elif self.dataflow is not None and not self._is_accumulation(fn, loop):
            self._flow_fetch(facts, function_id, fn, loop)
        return facts

    # -- batch provenance: where the step's data is drawn ---------------------------------------
    def _flow_fetch(self, facts: LoopFacts, function_id: str, fn: FunctionSummary, loop: LoopSummary) -> None:
        """Walk what the loop's step consumes back to where it is drawn in this loop: a
        ``next()`` of a project generator (style ``next``, or ``made`` when the ``next()`` is
        inside a larger expression), or a project function that returns it (``producer``)."""
        inside = {loop.index, *self._accumulation_children(fn, loop)}
        if not self.does_step(function_id, inside):
            return
        flow = self.dataflow
        nexts: dict[tuple[int, int], tuple[str, tuple[str, ...]]] = {}
        producers: list[str] = []
        for index, receiver in self.consumers(function_id, inside):
            call = fn.calls[index]
            trace = flow.derive_call_args(function_id, call.line, call.col, receiver)
            for site in trace.sites:
                if site.function != function_id or not _within(site.stmt, loop.stmt):
                    continue
                if site.kind == "next" and (site.line, site.col) not in nexts:
                    drawn = self._drawn_from(function_id, site)
                    if drawn:
                        nexts[(site.line, site.col)] = (site.target, drawn)
                elif site.kind == "call" and site.target not in producers and self._produces_data(site.target):
                    producers.append(site.target)
        if nexts:
            self._next_style(facts, function_id, fn, loop, nexts)
        elif producers and self.trains(function_id, inside):
            # only a training step: a sampling loop's helpers (``top_k(logits)``) return data too
            facts.kind, facts.style, facts.producers = "batch", "producer", tuple(producers)
            facts.by_flow = True
            names = ", ".join(p.rsplit("::", 1)[-1] for p in producers)
            facts.reason = f"runs a step on the data {names}() returns (batch provenance)"
            self._ints(facts)

    def _drawn_from(self, function_id: str, site) -> tuple[str, ...]:
        """The project generators a ``next()`` draws from (empty when it draws from anything else)."""
        g = self.graph
        origins = g.values.of(function_id, site.target) if site.target and g.values is not None else ()
        return tuple(sorted(o.split(":", 1)[1] for o in origins if o.startswith("gen:")))

    def _produces_data(self, function_id: str) -> bool:
        """A project function whose result is data drawn for a step: not a step itself, not a
        model's method, and what it returns comes from data (a slice, a read, a loader, a
        generator, another producer), not from nothing (``model.init_hidden()``)."""
        g = self.graph
        fn = g.fn(function_id)
        if fn.is_generator or function_id.endswith(".__init__") or self.does_step(function_id, None):
            return False
        owner = g.class_of_method(function_id)
        if owner is not None and g.is_module_class(owner):
            return False
        trace = self.dataflow.derive_returns(function_id)
        return any(s.kind in DATA_SOURCES for s in trace.sites)

    def _next_style(self, facts: LoopFacts, function_id: str, fn: FunctionSummary, loop: LoopSummary,
                    nexts: dict[tuple[int, int], tuple[str, tuple[str, ...]]]) -> None:
        """``x = next(it)`` statements get start/stop (style ``next``); a ``next()`` inside a
        larger expression gets its iterator wrapped where it is made (style ``made``)."""
        whole = {n.stmt: n for n in loop.next_calls if n.iterator}
        regions, made, sources = [], [], set()
        for (line, col), (iterator, generators) in sorted(nexts.items()):
            sources.update(generators)
            stmt = next((c.stmt for c in fn.calls if (c.line, c.col) == (line, col)), None)
            nc = whole.get(stmt) if stmt is not None else None
            if nc is not None and nc.iterator == iterator:
                regions.append(nc.region)
                continue
            for b in self.dataflow.bindings(function_id, iterator):
                if b.whole and b.function == function_id and _within(b.stmt, loop.stmt):
                    continue  # re-made inside the loop (a restart): the first making is outside
                # only where the value itself makes the generator (``it = gen()``): wrapping
                # ``loader = DataLoader(...)`` would hand a library a generator, not its loader
                made_by = dotted(b.value) if b.value is not None else None
                if b.whole and made_by and self._drawn_from(b.function, _Text(made_by)) \
                        and (b.function, b.stmt, b.line) not in made:
                    made.append((b.function, b.stmt, b.line))
        if not regions and not made:
            return
        facts.kind, facts.sources = "batch", tuple(sorted(sources))
        names = ", ".join(s.rsplit("::", 1)[-1] for s in sorted(sources))
        facts.by_flow = True
        if regions:
            facts.style, facts.fetch_regions = "next", tuple(dict.fromkeys(regions))
            facts.reason = f"takes next() from {names}, a project generator (batch provenance)"
        else:
            facts.style, facts.made = "made", tuple(made)
            facts.reason = f"draws next() from {names}, a project generator, inside a larger expression"
        facts.subject = next(iter(nexts.values()))[0]
        self._ints(facts)

    def _next_sources(self, function_id: str, next_calls) -> dict[str, tuple[str, ...]]:
        """The iterators the loop takes ``next()`` from that are project generators over a
        loader's batches (through ``functools.partial``, attributes, globals): iterator text ->
        the generators."""
        g = self.graph
        if g.values is None:
            return {}
        found: dict[str, tuple[str, ...]] = {}
        for n in next_calls:
            if not n.iterator or n.iterator in found:
                continue
            gens = tuple(sorted(origin_subject(o) for o in g.values.of(function_id, n.iterator)
                                if origin_kind(o) == "gen" and self.batch_generator(origin_subject(o))))
            if gens:
                found[n.iterator] = gens
        return found

    def _classify_iterable(self, facts: LoopFacts, fs: FileSummary, fn: FunctionSummary, loop: LoopSummary) -> None:
        layers = loop.layers
        wrapped = None
        depth = 0
        while depth < len(layers) and _last(layers[depth].callee) == "enumerate":
            depth += 1
        facts.wrap_depth = depth
        k = depth
        while k < len(layers):
            node = self.recognize(fs, layers[k].callee)
            if node:
                wrapped = wrapped or node.rsplit(".", 1)[0]
            elif _last(layers[k].callee) not in self.options.transparent_wrappers:
                break
            k += 1
        facts.wrapped_by = wrapped
        if k < len(layers):
            layer = layers[k]
            facts.subject = f"zip({', '.join(a or '?' for a in layer.args)})" if _last(layer.callee) == "zip" \
                else layer.callee + "(...)"
        else:
            facts.subject = loop.core or loop.iter_text
        feeders = self._feeders(fs, fn, loop, k) if wrapped is None else ()
        # a generator that passes what it is handed through (``log_every(loader)``, a
        # prefetcher, a progress wrapper) is the loop's own iterable: the wait is the loop's
        through = tuple(f for f in feeders if self._passes_through(f))
        feeders = () if through else feeders
        fed = bool(feeders)
        facts.feeders = feeders
        loader = not fed and (bool(through) or wrapped == "dataloader.fetch" or self._iterable_is_loader(fs, fn, loop)
                              or self._generator_of_steps(fs, fn, loop, k))
        if loader or fed:
            facts.kind = "batch"
            facts.style = "fed" if fed else "iter"
            facts.reason = (f"iterates {facts.subject}, a generator over a data loader" if fed
                            else f"iterates {facts.subject}, which passes a data loader's batches through"
                            if through else f"iterates {facts.subject}, a data loader")
            facts.yields_batches = fn.is_generator and any(loop.index in loops for _, loops, _ in fn.yields)
        self._ints(facts)

    def _generator_of_steps(self, fs: FileSummary, fn: FunctionSummary, loop: LoopSummary, k: int) -> bool:
        """A loop over a project generator (``for x, y in batches(data, 32):``) whose body
        runs a step: the generator produces the batches."""
        g = self.graph
        function_id = f"{fs.relpath}::{fn.qualname}"
        text = (loop.layers[k].callee + "()") if k < len(loop.layers) else loop.core
        if g.values is None or not any(origin_kind(o) == "gen" for o in g.values.of(function_id, text)):
            return False
        return self.does_step(function_id, {loop.index})

    def _feeders(self, fs: FileSummary, fn: FunctionSummary, loop: LoopSummary, k: int) -> tuple[str, ...]:
        """The project generators over a loader's batches that the loop iterates."""
        g = self.graph
        if g.values is None:
            return ()
        text = (loop.layers[k].callee + "()") if k < len(loop.layers) else loop.core
        return tuple(sorted(origin_subject(o) for o in g.values.of(f"{fs.relpath}::{fn.qualname}", text)
                            if origin_kind(o) == "gen" and self.batch_generator(origin_subject(o))))

    def _ints(self, facts: LoopFacts) -> None:
        """The loop's integer variables: ``step`` (a 0-based count) and ``epoch``."""
        loop = facts.loop
        if loop.kind == "while":
            facts.int_var = facts.counter
            facts.step_var = facts.counter
            return
        callees = [_last(layer.callee) for layer in loop.layers]
        layers = loop.layers
        while callees[:1] and callees[0] in ("tqdm", "track") and len(callees) > 1:
            # ``tqdm(range(n))``: the progress bar passes the numbers through
            callees, layers = callees[1:], layers[1:]
        if facts.counter and not facts.wrap_depth:
            facts.step_var = facts.counter  # the loop's own step count (``step += 1``)
        if facts.wrap_depth and loop.first_target:
            facts.step_var = facts.int_var = loop.first_target
        elif callees[:1] in (["range"], ["trange"]):
            facts.int_var = loop.single_target
            # range(n), range(1, n + 1): the variable counts the steps; range(0, n, bptt) is an offset
            if len(layers[0].args) in (1, 2) and not facts.step_var:
                facts.step_var = loop.single_target
        elif callees[:1] == ["count"] and len(layers[0].args) <= 1 and loop.single_target:
            # itertools.count(1): the variable counts the steps (regression's batch_idx), from its start
            facts.int_var = loop.single_target
            facts.step_var = facts.step_var or loop.single_target

    def _is_accumulation(self, fn: FunctionSummary, loop: LoopSummary) -> bool:
        """``for micro_step in range(k)`` inside another loop: part of that loop's step."""
        pattern = re.compile(self.options.accumulation_pattern)
        return loop.parent is not None and loop.kind == "for" and bool(
            pattern.search(loop.iter_text) or any(pattern.search(n) for n in loop.target_names))

    def _accumulation_children(self, fn: FunctionSummary, loop: LoopSummary) -> list[int]:
        """Nested gradient-accumulation loops: part of this loop's step."""
        return [lp.index for lp in fn.loops if lp.parent == loop.index and self._is_accumulation(fn, lp)]

    def _producers(self, function_id: str, loop: LoopSummary) -> tuple[str, ...]:
        fn = self.graph.fn(function_id)
        inside = {loop.index, *self._accumulation_children(fn, loop)}
        pattern = re.compile(self.options.batch_producer_pattern)
        found = []
        for i, call in enumerate(fn.calls):
            if not call.loops or call.loops[-1] not in inside:
                continue
            for target in self.graph.targets(function_id, i):
                tfn = self.graph.fn(target)
                if not tfn.is_generator and (pattern.search(tfn.name) or self._takes_from_loader(target)):
                    found.append(target)
        return tuple(dict.fromkeys(found))

    def _takes_from_loader(self, function_id: str) -> bool:
        """A project function that hands out a loader's next batch: ``next(self.data_iter)``
        over ``iter(DataLoader(...))`` (makemore's ``InfiniteDataLoader.next``, which restarts
        the iterator on ``StopIteration``), whatever it is called."""
        fs, fn = self.graph.functions[function_id]
        return any(c.callee == "next" and c.args[:1] and c.args[0] and self.loader_like(fs, fn, c.args[0])
                   and _hands_out(fn, c) for c in fn.calls)

    def run(self) -> "LoopAnalysis":
        g = self.graph
        for function_id, (fs, fn) in g.functions.items():
            for loop in fn.loops:
                self.facts[(function_id, loop.index)] = self._classify(function_id, fs, fn, loop)
        self._anchor_on_steps()
        self._innermost_batches()
        self._steps_inside_steps()
        self._library_sources()
        self._mark_epochs()
        self._mark_splits()
        return self

    # -- the step's own evidence (issue 39) ---------------------------------------------------
    #: iterables that count rather than fetch: a loop over them that trains has no fetch to time
    _COUNTING = frozenset({"range", "trange", "count", "repeat", "arange"})

    def _anchor_on_steps(self) -> None:
        """A loop that names and provenance left unexplained is a batch loop when its body
        runs a step (``anchor``: a backward pass or an optimizer step, in the body or in a
        function it calls; or a model call without gradients on what the loop draws). Its
        fetch is what it iterates, or the ``next()`` it takes, whatever produced them: an
        expert needs no proof of the loader to see a training step. Only the innermost such
        loop is one: a loop whose body reaches another training batch loop (its function's or
        one it calls) is around it, an epoch loop."""
        candidates: dict[tuple[str, int], str] = {}
        for (function_id, index), facts in self.facts.items():
            if facts.kind != "other":
                continue
            fs, fn = self.graph.functions[function_id]
            loop = facts.loop
            if self._is_accumulation(fn, loop) or any(index in loops for _, loops, _ in fn.yields):
                continue  # part of its parent's step; a generator's loop (its consumer steps)
            if self.graph.in_model_class(function_id):
                continue  # a model's own loop (sampling in ``generate``) draws no batches
            inside = {index, *self._accumulation_children(fn, loop)}
            evidence = self.anchor(function_id, inside, loop.target_names)
            if evidence and self._fetch_of(facts, fs, fn, loop):
                candidates[(function_id, index)] = evidence
        if not candidates:
            return
        training = {key for key, f in self.facts.items() if f.kind == "batch"} | \
            {key for key, e in candidates.items() if e.startswith("trains")}
        holders = self._functions_reaching({fid for fid, _ in training})
        for (function_id, index), evidence in sorted(candidates.items()):
            others = training - {(function_id, index)}
            if self._loop_reaches(function_id, index, others, holders - {function_id} if any(
                    fid == function_id for fid, _ in others) else holders):
                continue  # around another batch loop: an epoch loop (or a sweep), not a batch loop
            facts = self.facts[(function_id, index)]
            fs, fn = self.graph.functions[function_id]
            self._anchor(facts, fs, fn, evidence)

    def _fetch_of(self, facts: LoopFacts, fs: FileSummary, fn: FunctionSummary, loop: LoopSummary) -> bool:
        """Whether the loop has a fetch to place by its shape alone: a ``next()`` statement in
        its body, or an iterable that is not a count (``range``) or a literal."""
        if self._anchor_nexts(facts.function, fn, loop):
            return True
        if loop.kind != "for" or loop.literal_iter or loop.iter_text.endswith(".items()"):
            return False
        if any(self.recognize(fs, layer.callee) for layer in loop.layers):
            return False  # wrapped by dftracer already: ``ai.pipeline.epoch.iter(range(n))`` is an epoch loop
        heads = [_last(layer.callee) for layer in loop.layers
                 if _last(layer.callee) not in ("enumerate", "tqdm", "track", "zip")]
        if heads[:1] and heads[0] in self._COUNTING:
            return False
        zipped = [layer for layer in loop.layers if _last(layer.callee) == "zip"]
        if zipped and all(a and _last(a.split("(")[0]) in self._COUNTING for a in zipped[0].args):
            return False
        return True

    def _anchor_nexts(self, function_id: str, fn: FunctionSummary, loop: LoopSummary):
        """The ``x = next(it)`` statements of the loop's step (its accumulation loops' too),
        leaving out counters (``next(itercount)`` of ``itertools.count()``)."""
        calls = (*loop.next_calls, *(n for i in self._accumulation_children(fn, loop) for n in fn.loops[i].next_calls))
        g = self.graph
        out = []
        for n in calls:
            if not n.iterator:
                continue
            origins = g.values.of(function_id, n.iterator) if g.values is not None else frozenset()
            if origins and all(origin_kind(o) == "ext" and _last(origin_subject(o)) == "count" for o in origins):
                continue
            out.append(n)
        return out

    def _anchor(self, facts: LoopFacts, fs: FileSummary, fn: FunctionSummary, evidence: str) -> None:
        loop = facts.loop
        what = evidence.split(": ", 1)[-1]
        nexts = self._anchor_nexts(facts.function, fn, loop)
        if nexts:
            facts.kind, facts.style = "batch", "next"
            facts.fetch_regions = tuple(dict.fromkeys(n.region for n in nexts))
            facts.subject = nexts[0].iterator or ""
            facts.reason = f"runs a step ({what}) on what next({facts.subject}) returns: the step shows the fetch"
            self._ints(facts)
        else:
            self._classify_iterable(facts, fs, fn, loop)
            facts.kind, facts.style = "batch", facts.style if facts.kind == "batch" else "iter"
            facts.reason = f"runs a step ({what}) on what it iterates, {facts.subject}: the step shows the fetch"
            facts.yields_batches = False
        facts.anchored = evidence

    def _innermost_batches(self) -> None:
        """A loop around another batch loop of its function is not one itself (a burn-in
        stage, a sweep): it fetched a batch before the inner loop, the inner loop runs the
        steps. Loops over a loader are kept: they are what they iterate. So is a training loop
        whose inner batch loops only evaluate (x-transformers' validation over several sequence
        lengths every k steps): the outer loop trains, the inner ones do not."""
        for (function_id, index), facts in self.facts.items():
            if facts.kind != "batch" or facts.style in ("iter", "fed"):
                continue
            fn = self.graph.fn(function_id)
            inner = [d for d in self._loop_descendants(fn, index) if self.facts[(function_id, d)].kind == "batch"]
            if inner and self.trains(function_id, {index}) and not any(
                    self.trains(function_id, self.loop_and_descendants(function_id, d)) for d in inner):
                continue
            if inner:
                facts.kind, facts.style, facts.producers, facts.fetch_regions = "other", "iter", (), ()
                facts.sources, facts.made, facts.by_flow = (), (), False
                if facts.loop.kind == "for":
                    # what it iterates, and whether a region wraps that already (ML-R3's test)
                    self._classify_iterable(facts, *self.graph.functions[function_id], facts.loop)
                facts.kind, facts.style = "other", "iter"
                facts.reason = "runs a batch loop inside"

    def _steps_inside_steps(self) -> None:
        """A loop batch provenance found inside a function that another batch loop's body calls
        (a microbatch loop in ``forward_backward``, called by ``run_step`` in the training loop)
        is part of that loop's step, not a batch loop of its own."""
        flow = [f for f in self.facts.values() if f.kind == "batch" and (f.by_flow or f.anchored)]
        if not flow:
            return
        named = [f for f in self.facts.values() if f.kind == "batch" and not (f.by_flow or f.anchored)]
        inside: set[str] = set()
        for facts in named + flow:
            for call, targets in self.graph.calls_with_targets(facts.function):
                if facts.loop.index in call.loops:
                    for t in targets:
                        inside |= {t, *self.graph.reachable(t)}
        for facts in flow:
            if facts.function in inside:
                facts.kind, facts.style, facts.producers, facts.made, facts.sources = "other", "iter", (), (), ()
                facts.fetch_regions, facts.by_flow, facts.anchored = (), False, None
                facts.reason = "runs inside the step of another batch loop"

    def _library_sources(self) -> None:
        """A generator that hands a loader's batches on, but that no loop of the project
        iterates, feeds a library's pipeline (``tf.data.Dataset.from_generator``, a DALI
        external source): the waits inside it are not the training loop's."""
        fed = {feeder for f in self.facts.values() for feeder in f.feeders}
        taken = {source: f for f in self.facts.values() if f.kind == "batch" for source in f.sources}
        for facts in self.facts.values():
            if facts.kind == "batch" and facts.yields_batches and facts.function not in fed:
                facts.kind, facts.style = "other", "iter"
                consumer = taken.get(facts.function)
                facts.reason = (f"hands batches to next() in {consumer.function}, where the fetch is"
                                if consumer else "hands batches to a library pipeline, not to a loop of the project")

    # -- splits ----------------------------------------------------------------------------
    def _mark_splits(self) -> None:
        for facts in self.facts.values():
            if facts.kind == "batch":
                facts.split = split_of(self._split_evidence(facts))

    def _split_evidence(self, facts: LoopFacts) -> list[str | None]:
        """Texts that name the data the loop runs over, nearest first: the loader's name and
        how it was built, the producer's arguments."""
        fs, fn = self.graph.functions[facts.function]
        texts: list[str | None] = [facts.subject]
        loop = facts.loop
        head = facts.subject.split("(")[0]
        names = [head, head.split(".")[0], ".".join(head.split(".")[:2])]
        names += [a for layer in loop.layers for a in layer.args if a]
        names += [n.iterator for n in loop.next_calls if n.iterator]
        for name in dict.fromkeys(names):
            for a in fn.assigns:
                if a.target == name:
                    texts.append(a.value)
                    texts.extend(a.call_args)
                    texts.extend(v for _, v in a.call_keywords)
                    # ``MNIST(root, train=False)``, ``get_loader(..., training=False)``: the test
                    # split, said by any call of the statement that builds the loader
                    flags = [kv for c in fn.calls if c.stmt == a.stmt for kv in c.keywords]
                    texts.extend(("train" if v == "True" else "test") for k, v in (*a.call_keywords, *flags)
                                 if k in TRAIN_FLAGS and v in ("True", "False"))
        inside = {loop.index, *self._accumulation_children(fn, loop)}
        for i, call in enumerate(fn.calls):
            if call.loops and call.loops[-1] in inside and set(self.graph.targets(facts.function, i)) & \
                    set(facts.producers):
                texts.extend(call.args)
        return texts

    # -- epochs ----------------------------------------------------------------------------
    def _loop_descendants(self, fn: FunctionSummary, index: int) -> list[int]:
        out = []
        for loop in fn.loops:
            p = loop.parent
            while p is not None:
                if p == index:
                    out.append(loop.index)
                    break
                p = fn.loops[p].parent
        return out

    def loop_and_descendants(self, function_id: str, index: int) -> set[int]:
        """Loop ``index`` of the function and the loops nested in it."""
        return {index, *self._loop_descendants(self.graph.fn(function_id), index)}

    def _calls_in_loop(self, function_id: str, index: int) -> Iterable[str]:
        """The project functions that calls in loop ``index`` run. ``it = gen(...)`` runs none
        of a generator's body: it only makes the iterator (x-transformers builds one
        ``cycle(loader)`` per validation length in a loop that is no epoch loop); the loop
        that draws from it is the one that runs it."""
        fn = self.graph.fn(function_id)
        assigns = {c.stmt for c in fn.calls if c.stmt_kind == "assign"}  # also ``it = wrap(gen(...))``
        for call, targets in self.graph.calls_with_targets(function_id):
            if index in call.loops:
                if call.stmt in assigns:
                    targets = [t for t in targets if not self.graph.fn(t).is_generator]
                yield from targets

    def _functions_reaching(self, targets: set[str]) -> set[str]:
        """``targets`` and every function that calls one of them, directly or not."""
        reach = set(targets)
        frontier = list(targets)
        while frontier:
            node = frontier.pop()
            for caller in self.graph.callers(node):
                if caller not in reach:
                    reach.add(caller)
                    frontier.append(caller)
        return reach

    def _loop_reaches(self, function_id: str, index: int, loops: set[tuple[str, int]],
                      functions: set[str]) -> bool:
        """Whether loop ``index`` contains one of ``loops``, or calls into ``functions``."""
        fn = self.graph.fn(function_id)
        if any((function_id, d) in loops for d in self._loop_descendants(fn, index)):
            return True
        return any(t in functions for t in self._calls_in_loop(function_id, index))

    def _epoch_shaped(self, facts: LoopFacts) -> bool:
        loop = facts.loop
        fn = self.graph.fn(facts.function)
        if any(loop.index in loops for _, loops, _ in fn.yields):
            return False  # a generator's loop around its yields: its consumer has the epochs
        if loop.kind == "while":
            pattern = re.compile(self.options.epoch_name_pattern)
            return any(pattern.search(n) for n in (*loop.test_names, *loop.counters))
        # not over a literal (``for split in ['train', 'val']``) nor a mapping's items
        return loop.kind == "for" and not loop.literal_iter and not loop.iter_text.endswith(".items()")

    def _full_batch_epochs(self, batch: set[tuple[str, int]]) -> None:
        """A loop named for epochs (``for epoch in range(args.epochs):``) that calls a project
        function which trains once, outside any loop of its own, and reaches no batch loop:
        full-batch training, one step an epoch. The loop is the epoch loop; the function is
        the training phase (ML-R2)."""
        reach_batch = self._functions_reaching({fid for fid, _ in batch})
        pattern = re.compile(self.options.epoch_name_pattern)
        for (function_id, index), facts in self.facts.items():
            loop = facts.loop
            if facts.kind != "other" or not self._epoch_shaped(facts) or not any(
                    pattern.search(n) for n in (*loop.target_names, loop.iter_text, *loop.test_names, *loop.counters)):
                continue
            if self._loop_reaches(function_id, index, batch, reach_batch):
                continue
            fn = self.graph.fn(function_id)
            steps = []
            for i, call in enumerate(fn.calls):
                if call.loops and call.loops[-1] == index:
                    for t in self.graph.targets(function_id, i):
                        if t not in steps and not any(f.kind == "batch" for f in self.loops_of(t)) \
                                and self.trains_once(t):
                            steps.append(t)
            if steps:
                facts.kind, facts.full_batch = "epoch", tuple(steps)
                names = ", ".join(t.rsplit("::", 1)[-1] + "()" for t in steps)
                facts.reason = f"full-batch training: each iteration runs one step, {names}"
                facts.int_var = facts.int_var or (loop.single_target if loop.kind == "for" else facts.counter)

    def _mark_epochs(self) -> None:
        batch = {k for k, f in self.facts.items() if f.kind == "batch"}
        self._full_batch_epochs(batch)
        reach_batch = self._functions_reaching({fid for fid, _ in batch})
        candidates = {
            (function_id, index) for (function_id, index), f in self.facts.items()
            if f.kind == "other" and self._epoch_shaped(f)
            and self._loop_reaches(function_id, index, batch, reach_batch)
        }
        # innermost only: a loop that reaches another candidate is around the epoch loop
        for key in sorted(candidates):
            function_id, index = key
            others = candidates - {key}
            reach_others = self._functions_reaching({fid for fid, _ in others})
            if not self._loop_reaches(function_id, index, others, reach_others):
                facts = self.facts[key]
                facts.kind = "epoch"
                facts.reason = "the innermost loop around a batch loop"
                if facts.loop.kind == "while":
                    pattern = re.compile(self.options.epoch_name_pattern)
                    # a variable, not a bound read off an object (``args.nepochs``)
                    named = [n for n in (*facts.loop.counters, *facts.loop.test_names)
                             if pattern.search(n) and "." not in n]
                    facts.int_var = named[0] if named else None

    # -- queries -----------------------------------------------------------------------------
    def loops_of(self, function_id: str) -> list[LoopFacts]:
        fn = self.graph.fn(function_id)
        return [self.facts[(function_id, lp.index)] for lp in fn.loops]

    def of_kind(self, kind: str) -> list[LoopFacts]:
        return [f for f in self.facts.values() if f.kind == kind]

    def enclosing(self, facts: LoopFacts, kind: str) -> LoopFacts | None:
        """The nearest enclosing loop of ``kind`` in the same function."""
        fn = self.graph.fn(facts.function)
        p = facts.loop.parent
        while p is not None:
            f = self.facts[(facts.function, p)]
            if f.kind == kind:
                return f
            p = fn.loops[p].parent
        return None


def _hands_out(fn: FunctionSummary, call) -> bool:
    """Whether the batch ``call`` (a ``next()``) draws leaves the function: drawn outside any
    loop, or returned (``return next(it)`` in a loop that restarts the iterator). A function
    that draws batches in a loop of its own and keeps them (open_clip's ``evaluate``) runs a
    batch loop; it does not produce batches for its caller's loop."""
    return not call.loops or call.stmt_kind == "return" or any(a in fn.returns for a in call.assigned_to)
