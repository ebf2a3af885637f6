"""Statements: where a ``with`` region can go, the statements around a call, the functions
that run inside a region."""

from __future__ import annotations

from dftpass.core.callgraph import CallGraph
from dftpass.core.emitter import is_node
from dftpass.core.summary import CallSite, FileSummary, FunctionSummary, StmtPath


def sibling(path: StmtPath, offset: int) -> StmtPath | None:
    field, index = path[-1]
    if index + offset < 0:
        return None
    return path[:-1] + ((field, index + offset),)


def calls_at(fn: FunctionSummary, path: StmtPath | None) -> list[CallSite]:
    return [c for c in fn.calls if path is not None and c.stmt == path]


def in_compute_span(fs: FileSummary, fn: FunctionSummary, call: CallSite) -> bool:
    """Whether the call's statement is inside a step's compute region: a ``with ai.compute:``
    around it (the tracing budget's folded step), or between an ``ai.compute.start()`` and
    the ``ai.compute.stop()`` after it in the same block (as dftpass wrote it before): it is
    timed, and a second annotation must not add its own region."""
    if any(is_node(fs, w, "compute") for w in call.withs):
        return True
    block, (field, index) = call.stmt[:-1], call.stmt[-1]
    opened = False
    for c in sorted(fn.calls, key=lambda c: c.stmt):
        if c.stmt[:-1] != block or c.stmt[-1][0] != field:
            continue
        position = c.stmt[-1][1]
        if position < index and is_node(fs, c.callee, "compute", "start"):
            opened = True
        elif position < index and is_node(fs, c.callee, "compute", "stop"):
            opened = False
        elif position > index and opened and is_node(fs, c.callee, "compute", "stop"):
            return True
    return False


def unwrappable(fs: FileSummary, fn: FunctionSummary, call: CallSite) -> str | None:
    """Why ``with X:`` cannot go around the statement that holds ``call`` (None: it can).

    A call deep in an expression is fine (``loss = hvd.allreduce(loss).item()``,
    ``batch = {k: v.to(device) for k, v in batch.items()}``): the region then covers the
    whole simple statement. It cannot go around a compound statement whose header holds the
    call and whose body does work (``if comm.allreduce(flag): save()``, ``while ...:``, a
    ``with`` item, a decorator of a ``def``), a function that only *defines* the call
    (``f = lambda t: dist.all_reduce(t)``), nor a ``yield`` (the region would span the time the
    consumer holds the generator: in a generator only assignments, returns and whole-call
    statements are wrapped)."""
    path = call.stmt
    if call.stmt_kind == "with":
        return "it is a `with` item"
    if any(lp.stmt == path for lp in fn.loops):
        return "it is in a loop header"
    if any(f.stmt == path for f in fs.functions) or any(c.stmt == path for c in fs.classes):
        return "it is in a decorator or class header"
    n = len(path)
    if any(len(c.stmt) > n and c.stmt[:n] == path for c in fn.calls) or \
            any(len(a.stmt) > n and a.stmt[:n] == path for a in fn.assigns) or \
            any(len(lp.stmt) > n and lp.stmt[:n] == path for lp in fn.loops) or \
            any(len(d.stmt) > n and d.stmt[:n] == path for d in (*fs.functions, *fs.classes)):
        return "it is in the header of a compound statement (`if`, `with`, `match`) whose body does work"
    here = [a for a in fn.assigns if a.stmt == path]
    if any(a.value == "<lambda>" for a in here):
        return "it is inside a lambda (defined here, run later)"
    if fn.is_generator and call.stmt_kind not in ("expr", "assign", "return") and not any(a.value for a in here):
        return "the statement may `yield` (a region would span the consumer's time)"
    return None


def torch_name(fs: FileSummary, callee: str) -> str | None:
    """The file's name for the torch module: the head of ``callee`` as called
    (``torch.save``, ``th.load``), else a top-level ``import torch``."""
    head = callee.split(".", 1)[0]
    if "." in callee and fs.imports.get(head) == "torch":
        return head
    return next((local for local, qualified in sorted(fs.imports.items())
                 if qualified == "torch" and local in fs.top_imports), None)


def run_inside(graph: CallGraph, is_region) -> set[str]:
    """The functions run from inside a region that ``is_region(fs, text)`` recognises (a
    ``with`` around the call, or a decorated caller): a region of the same kind in them would
    nest in that one."""
    roots: set[str] = set()
    for function_id, (fs, fn) in graph.functions.items():
        decorated = any(is_region(fs, d) for d in fn.decorators)
        for i, call in enumerate(fn.calls):
            if decorated or any(is_region(fs, w) for w in call.withs):
                roots.update(graph.targets(function_id, i))
    out = set(roots)
    for r in roots:
        out |= graph.reachable(r)
    return out
