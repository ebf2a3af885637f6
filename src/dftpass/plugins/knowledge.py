"""What ML training code looks like: shared recognisers for the rules.

Several rules need the same facts ("is this call an optimizer step?", "does this function
train?"); they live here once, so that ML-R2 (phases), ML-R4 (optimizer step) and ML-R7
(backward) agree on them.
"""

from __future__ import annotations

import re

from dftpass.core.callgraph import CallGraph
from dftpass.core.summary import CallSite, FileSummary, FunctionSummary, StmtPath

OPTIMIZER_NAME = re.compile(r"(?i)^(opt|optim|optimi[sz]er)s?(_\w+)?$|(^|_)optimi[sz]er$|^opt_\w+$")
SCALER_NAME = re.compile(r"(?i)(^|_)(grad_?)?scaler$")
SCHEDULER_NAME = re.compile(r"(?i)sched|lr_|warmup")
OPTIMIZER_CLASSES = {
    "SGD", "Adam", "AdamW", "Adagrad", "Adadelta", "Adamax", "RMSprop", "Rprop", "LBFGS",
    "NAdam", "RAdam", "SparseAdam", "ASGD", "LAMB", "Lamb", "FusedAdam", "FusedLAMB", "Adafactor",
    "ZeroRedundancyOptimizer", "DistributedOptimizer",
}
NO_GRAD = ("no_grad", "inference_mode")


def _last(text: str) -> str:
    return text.rstrip("()").rsplit(".", 1)[-1]


def assigned_values(graph: CallGraph, fs: FileSummary, fn: FunctionSummary, name: str) -> list[str]:
    """Dotted values assigned to a local name or ``self`` attribute."""
    if name.startswith("self.") and fn.cls and name.count(".") == 1:
        out: list[str] = []
        for cid in graph.mro(f"{fs.relpath}::{fn.cls}"):
            out.extend(v for v in graph.classes[cid][1].attr_values.get(name[5:], ()) if v)
        return out
    return [a.value for a in fn.assigns if a.target == name and a.value]


def is_optimizer(graph: CallGraph, fs: FileSummary, fn: FunctionSummary, receiver: str) -> bool:
    last = _last(receiver)
    if SCHEDULER_NAME.search(last):
        return False
    for value in assigned_values(graph, fs, fn, receiver):
        qualified = graph.qualify(fs, value)
        if ".optim." in qualified or qualified.startswith("optim.") or _last(qualified) in OPTIMIZER_CLASSES:
            return True
    return bool(OPTIMIZER_NAME.search(last))


def is_scaler(graph: CallGraph, fs: FileSummary, fn: FunctionSummary, receiver: str) -> bool:
    for value in assigned_values(graph, fs, fn, receiver):
        if _last(value) == "GradScaler":
            return True
    return bool(SCALER_NAME.search(_last(receiver)))


def is_optimizer_step(graph: CallGraph, fs: FileSummary, fn: FunctionSummary, call: CallSite) -> bool:
    """``optimizer.step()``, ``self.opt.step(closure)``, ``scaler.step(optimizer)``."""
    if call.method != "step" or not call.receiver or "()" in call.receiver:
        return False
    return is_optimizer(graph, fs, fn, call.receiver) or is_scaler(graph, fs, fn, call.receiver)


def is_backward(call: CallSite) -> bool:
    """``loss.backward()``, ``scaler.scale(loss).backward()``, ``accelerator.backward(loss)``,
    ``self.manual_backward(loss)``, ``torch.autograd.backward(...)``."""
    return call.method in ("backward", "manual_backward") and (bool(call.receiver) or call.callee == "backward")


def trains(graph: CallGraph, function_id: str, call_filter=None) -> bool:
    """Whether the function's calls (those passing ``call_filter``), or the project functions
    they call, do a backward pass or an optimizer step."""
    fs, fn = graph.functions[function_id]
    targets = []
    for call, target in graph.calls_with_targets(function_id):
        if call_filter is not None and not call_filter(call):
            continue
        if is_backward(call) or is_optimizer_step(graph, fs, fn, call):
            return True
        if target:
            targets.append(target)
    seen: set[str] = set()
    while targets:
        t = targets.pop()
        if t in seen:
            continue
        seen.add(t)
        tfs, tfn = graph.functions[t]
        if any(is_backward(c) or is_optimizer_step(graph, tfs, tfn, c) for c in tfn.calls):
            return True
        targets.extend(graph.callees(t))
    return False


def evaluates(fn: FunctionSummary) -> bool:
    """Gradient-free: under ``no_grad``/``inference_mode`` (decorator or ``with``), or calls ``.eval()``."""
    if any(_last(d) in NO_GRAD for d in fn.decorators):
        return True
    if any(_last(w) in NO_GRAD for w in fn.withs):
        return True
    return any(c.method == "eval" and not c.args for c in fn.calls)


def sibling(path: StmtPath, offset: int) -> StmtPath | None:
    field, index = path[-1]
    if index + offset < 0:
        return None
    return path[:-1] + ((field, index + offset),)


def calls_at(fn: FunctionSummary, path: StmtPath | None) -> list[CallSite]:
    return [c for c in fn.calls if path is not None and c.stmt == path]
