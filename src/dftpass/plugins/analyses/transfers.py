"""The ``transfers`` analysis: the statements that move a batch to an accelerator, once per
batch (``x, y = x.to(device), y.to(device)``, ``images.cuda(non_blocking=True)``).

ML-R17 wraps them in ``with ai.device.transfer:``; the ``overhead`` analysis counts them as
events every step writes (the tracing budget). Where the calls that run once per batch are,
and what a move is, are ML-R17's docstring's "What it does".
"""

from __future__ import annotations

import re

import attrs

from dftpass.core.passes import Pass, PassKind
from dftpass.plugins.knowledge import (
    evaluated_by_callers, evaluates, iterable_dataset_generators, LOSS_NAME, model_classes,
)

#: device strings of accelerators (``'cuda'``, ``'cuda:1'``, ``'mps'``...); ``'cpu'`` is not one
ACCELERATORS = ("cuda", "mps", "xpu", "hpu", "npu", "xla", "mlu", "musa")
#: a name that holds a device (``device``, ``args.device``, ``self.dev``, ``args.gpu``, ``local_rank``)
DEVICE_NAME = re.compile(r"(?i)^(device|dev|gpu|cuda|rank|local_rank|device_id)s?$|(^|_)(device|gpu)(_\w+)?$")
#: receivers that are models or losses, not batches (``model.to(device)``, ``criterion.cuda()``)
NOT_A_BATCH = re.compile(r"(?i)^(self|model|net|network|module|teacher|student|ema|ema_model|classifier|"
                         r"backbone|encoder|decoder|generator|discriminator|policy|critic|actor)$|_(model|net)$")


def device_text(text: str | None) -> bool | None:
    """True when the text is an accelerator device, False when it is something else (a dtype,
    ``'cpu'``), None when the text alone does not tell."""
    if not text:
        return None
    if text[:1] in "'\"":
        value = text.strip("'\"").lower()
        return value.split(":")[0] in ACCELERATORS
    if text.isdigit():
        return True  # ``.to(0)``: cuda:0
    last = text.rsplit(".", 1)[-1]
    if "dtype" in last.lower() or text.startswith(("torch.float", "torch.int", "torch.bfloat", "torch.half",
                                                   "torch.double", "torch.long", "torch.bool", "torch.uint",
                                                   "torch.complex", "torch.channels_last", "torch.contiguous")):
        return False
    if last in ("device", "device()") or DEVICE_NAME.search(last):
        return True
    return None


def moves_to_device(fn, call) -> bool:
    """``x.to(device)``, ``x.to('cuda', non_blocking=True)``, ``x.to(device=dev)``, ``x.cuda()``."""
    if call.method == "cuda":
        return True
    if call.method != "to":
        return False
    keywords = dict(call.keywords)
    candidates = [keywords["device"]] if "device" in keywords else list(call.args[:1])
    for text in candidates:
        verdict = device_text(text)
        if verdict is None and text and "." not in text and "(" not in text:
            # a local name: what it was assigned (``dev = torch.device('cuda', rank)``)
            values = [a.value for a in fn.assigns if a.target == text]
            verdict = any(device_text(v) for v in values) or None
        if verdict:
            return True
    return False


#: methods that move their receiver to an accelerator whatever their arguments
MOVE_METHODS = frozenset({"cuda", "pin_memory"})


def moves_node_to_device(graph, function_id: str, call) -> bool:
    """The same question as :func:`moves_to_device`, on a call expression (``ast.Call``) that
    batch provenance meets: ``x.to(device)``, ``x.cuda()``, ``x.pin_memory()``, and
    ``x.type(Tensor)`` where ``Tensor`` may be a CUDA tensor type (``torch.cuda.FloatTensor``)."""
    import ast

    from dftpass.core.summary import dotted

    method = call.func.attr if isinstance(call.func, ast.Attribute) else ""
    if method in MOVE_METHODS:
        return True
    fn = graph.fn(function_id)
    if method == "to":
        keywords = {k.arg: k.value for k in call.keywords if k.arg}
        candidates = [keywords["device"]] if "device" in keywords else list(call.args[:1])
        for node in candidates:
            text = dotted(node)
            verdict = device_text(text.removesuffix("()") if text else text)
            if verdict is None and text and "." not in text and "(" not in text:
                verdict = any(device_text(a.value) for a in fn.assigns if a.target == text) or None
            if verdict:
                return True
        return False
    if method == "type" and call.args:
        text = dotted(call.args[0])
        origins = graph.values.of(function_id, text) if text and graph.values is not None else ()
        return any(o.startswith("ext:torch.cuda.") for o in origins) or bool(text and text.startswith("torch.cuda."))
    return False


def batch_calls(graph, batch_loops):
    """(function id, call indexes or None for all): the calls that run once per batch: in a
    batch loop's body, in the project functions that body calls (one level, not into the
    model), in the functions that produce the batches (``get_batch()``), and in the
    ``__iter__`` generators of iterable data sets."""
    scopes: dict[str, set[int] | None] = {}

    def add(function_id: str, indexes: set[int] | None) -> None:
        if function_id in scopes and scopes[function_id] is None:
            return
        scopes[function_id] = None if indexes is None else scopes.get(function_id, set()) | indexes

    for facts in batch_loops:
        fn = graph.fn(facts.function)
        inside = {i for i, call in enumerate(fn.calls) if facts.loop.index in call.loops}
        add(facts.function, inside)
        for producer in (*facts.producers, *facts.sources):
            add(producer, None)  # get_batch(), or the generator next() takes the batch from
        for i in inside:
            if moves_to_device(fn, fn.calls[i]):
                continue  # ``x = to_device(x).cuda()``: this statement is the region
            for target in graph.targets(facts.function, i):
                owner = graph.class_of_method(target)
                if owner is not None and graph.fn(target).name in ("forward", "__call__") \
                        and graph.is_module_class(owner):
                    continue  # the model's own code
                add(target, None)
    # an iterable data set that moves what it reads to the device (``shard.to(self.device)``
    # in ``__iter__``): its batches reach the loop already moved, the move is in the generator
    for iter_id in iterable_dataset_generators(graph):
        add(iter_id, None)
    return scopes


def batch_move(graph, function_id: str, fn, call) -> bool:
    """A move of a batch, not of a model or a loss (``model.to(device)``)."""
    if not moves_to_device(fn, call):
        return False
    receiver = call.receiver
    if not receiver:
        return False
    last = receiver.rsplit(".", 1)[-1]
    if NOT_A_BATCH.search(last) or LOSS_NAME.search(last):
        return False
    if "(" not in receiver and model_classes(graph, function_id, receiver):
        return False
    return True



@attrs.frozen
class Transfers:
    """function id -> statement path -> the batch moves of that statement, in source order."""

    by_function: dict = attrs.field(factory=dict)
    #: the functions that run once per *training* batch (not under ``no_grad``, no ``.eval()``)
    training: frozenset = frozenset()

    def per_step(self, graph, enabled=lambda relpath: True) -> int:
        """The regions ML-R17 would place that every training step writes (statements of the
        files where ``enabled`` says the rule is on)."""
        return sum(len(stmts) for function_id, stmts in self.by_function.items()
                   if function_id in self.training and enabled(graph.file_of(function_id).relpath))


class TransfersAnalysis(Pass):
    """Find the per-batch host-to-device moves (``ctx.analysis("transfers")``).

    For each batch loop whose step batch provenance could walk back (the
    ``batch_provenance`` analysis), the moves are the ones on the data's way, wherever they
    are (two calls below the loop, in a generator, in a data set's ``__getitem__``), and
    nothing else (``hidden = hidden.cuda()`` moves the model's state, not the batch). For the
    other loops, the calls that run once per batch and move a name that is not a model."""

    id = "transfers"
    title = "Device transfers"
    kind = PassKind.ANALYSIS
    requires = ("callgraph", "loops", "batch_provenance")

    def run(self, ctx) -> Transfers:
        graph = ctx.analysis("callgraph")
        batch = list(ctx.analysis("loops").of_kind("batch"))
        provenance = ctx.analysis("batch_provenance")
        out: dict = {}
        walked, training = set(), set()
        for facts in batch:
            chain = provenance.chain_of(facts.function, facts.loop.line)
            if chain is None or not chain.consumers:
                continue
            walked.add((facts.function, facts.loop.line))
            if not evaluates(graph.fn(facts.function), graph) and not evaluated_by_callers(graph, facts.function):
                training |= {facts.function, *chain.per_batch}
        for function_id, stmts in provenance.transfers().items():
            fn = graph.fn(function_id)
            at = {(c.line, c.col): c for c in fn.calls}
            for stmt, sites in stmts.items():
                moves = [at[(s.line, s.col)] for s in sites if (s.line, s.col) in at]
                if moves:
                    out.setdefault(function_id, {}).setdefault(stmt, []).extend(moves)
        for facts in batch:
            # ``batch.to(device)`` as a statement of its own (a BatchEncoding moved in place):
            # no value flows from it, so the walk back from the step never meets it
            fn = graph.fn(facts.function)
            drawn = set(facts.loop.target_names) | {facts.loop.single_target} - {None}
            for call in fn.calls:
                if facts.loop.index in call.loops and call.stmt_kind == "expr" and call.receiver in drawn \
                        and batch_move(graph, facts.function, fn, call):
                    moves = out.setdefault(facts.function, {}).setdefault(call.stmt, [])
                    if call not in moves:
                        moves.append(call)
        rest = [f for f in batch if (f.function, f.loop.line) not in walked]
        for function_id, indexes in sorted(batch_calls(graph, rest).items(), key=lambda kv: kv[0]):
            fn = graph.fn(function_id)
            for i, call in enumerate(fn.calls):
                if (indexes is None or i in indexes) and batch_move(graph, function_id, fn, call):
                    moves = out.setdefault(function_id, {}).setdefault(call.stmt, [])
                    if call not in moves:
                        moves.append(call)
        for stmts in out.values():
            for moves in stmts.values():
                moves.sort(key=lambda c: (c.line, c.col))
        rest_training = [f for f in rest if not evaluates(graph.fn(f.function), graph)
                         and not evaluated_by_callers(graph, f.function)]
        return Transfers(out, frozenset(training | set(batch_calls(graph, rest_training))))
