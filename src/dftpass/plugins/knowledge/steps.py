"""Training and evaluation steps: optimizer steps, backward passes, the calls that run a
step, which functions train or evaluate, and what a step consumes."""

from __future__ import annotations

import re
from typing import Iterator

from dftpass.core import work
from dftpass.core.callgraph import CallGraph
from dftpass.core.summary import CallSite, FileSummary, FunctionSummary
from dftpass.plugins.knowledge.facts import facts
from dftpass.plugins.knowledge.models import is_model_call, is_model_entry, LOSS_NAME, model_wrapper


OPTIMIZER_NAME = re.compile(r"(?i)^(opt|optim|optimi[sz]er)s?(_\w+)?$|(^|_)optim(i[sz]er)?s?$|^opt_\w+$")
SCALER_NAME = re.compile(r"(?i)(^|_)(grad_?)?scaler$")
SCHEDULER_NAME = re.compile(r"(?i)sched|lr_|warmup")
#: calls that run one training or evaluation step without showing a backward pass: a
#: benchmark's simulated ``compute``, a framework's ``train_step`` or ``train_on_batch``
COMPUTE_STEP = re.compile(
    r"(?i)^(compute|run_step|step_fn|forward_backward(_step)?|"
    r"(train|training|eval|evaluation|validation|val|test|predict)_(step|batch)|"
    r"(train|test|predict)_on_batch)$")
#: receivers of framework phase calls: ``trainer.fit``, ``model.fit`` (Keras)
PHASE_RECEIVER = re.compile(r"(?i)(^|_)trainer$|^(model|learner|engine|net|keras_model)$")


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
        if ".optim." in qualified or qualified.startswith("optim.") or _last(qualified) in facts(graph).optimizer_classes:
            return True
    return bool(OPTIMIZER_NAME.search(last))


def is_scaler(graph: CallGraph, fs: FileSummary, fn: FunctionSummary, receiver: str) -> bool:
    for value in assigned_values(graph, fs, fn, receiver):
        if _last(value) == "GradScaler":
            return True
    return bool(SCALER_NAME.search(_last(receiver)))


def is_optimizer_step(graph: CallGraph, fs: FileSummary, fn: FunctionSummary, call: CallSite) -> bool:
    """``optimizer.step()``, ``self.opt.step(closure)``, ``scaler.step(optimizer)``; and what
    framework plugins teach (``optimizer.apply_gradients(...)``, ``optax.apply_updates``,
    flax's ``optimizer.update(model, grads)``)."""
    hints = graph.hints.training
    if _known_call(graph, fs, call, hints.optimizer_calls):
        return True
    if call.method not in hints.optimizer_methods or not call.receiver or "()" in call.receiver:
        return False
    if call.method == "step":
        return is_optimizer(graph, fs, fn, call.receiver) or is_scaler(graph, fs, fn, call.receiver) \
            or is_engine(graph, f"{fs.relpath}::{fn.qualname}", call.receiver)
    return is_optimizer(graph, fs, fn, call.receiver)


def is_engine(graph: CallGraph, function_id: str, receiver: str) -> bool:
    """A training engine that steps its own optimizer (``model_engine.step()`` of a DeepSpeed
    engine, from ``deepspeed.initialize`` or handed in as a parameter)."""
    found = model_wrapper(graph, function_id, receiver) if graph.values is not None else None
    return found is not None and found[0] == "DeepSpeedEngine"


def is_backward(call: CallSite, graph: CallGraph | None = None, fs: FileSummary | None = None) -> bool:
    """``loss.backward()``, ``scaler.scale(loss).backward()``, ``accelerator.backward(loss)``,
    ``self.manual_backward(loss)``, ``torch.autograd.backward(...)``; with the graph, also the
    gradient calls framework plugins teach (``tape.gradient(...)``, ``jax.value_and_grad``)."""
    if call.method in ("backward", "manual_backward") and (bool(call.receiver) or call.callee == "backward"):
        return True
    return graph is not None and fs is not None and _known_call(graph, fs, call, graph.hints.training.gradient_calls)


def _known_call(graph: CallGraph, fs: FileSummary, call: CallSite, known: frozenset[str]) -> bool:
    """Whether ``call`` is one of ``known``: qualified functions, or ``.method`` on an object
    that is not an imported module (see :class:`~dftpass.core.callgraph.TrainingHints`)."""
    if not known:
        return False
    if call.method and f".{call.method}" in known and call.receiver \
            and call.receiver.split(".", 1)[0].rstrip("()") not in fs.imports:
        return True
    return graph.qualify(fs, call.callee) in known


def trains(graph: CallGraph, function_id: str, call_filter=None) -> bool:
    """Whether the function's calls (those passing ``call_filter``), or the project functions
    they call, do a backward pass or an optimizer step."""
    fs, fn = graph.functions[function_id]
    stepping = _stepping(graph)
    for call, found in graph.calls_with_targets(function_id):
        if call_filter is not None and not call_filter(call):
            continue
        if is_backward(call, graph, fs) or is_optimizer_step(graph, fs, fn, call):
            return True
        if any(t in stepping for t in found):
            return True
    return False


def _stepping(graph: CallGraph) -> frozenset[str]:
    """The functions that do a backward pass or an optimizer step, or reach one through the
    call graph: found once per graph, backwards from the steps along the callers (a question
    per loop used to walk everything below it again: quadratic on deep projects, issue 40)."""
    found = graph.memo.get("stepping")
    if found is not None:
        return found
    own = {function_id for function_id, (fs, fn) in graph.functions.items()
           if any(is_backward(c, graph, fs) or is_optimizer_step(graph, fs, fn, c) for c in fn.calls)}
    out, frontier = set(own), list(own)
    while frontier:
        node = frontier.pop()
        for caller in graph.callers(node):
            if caller not in out and caller in graph.functions:
                out.add(caller)
                frontier.append(caller)
    work.count("trains.functions", len(graph.functions) + len(out))
    graph.memo["stepping"] = frozenset(out)
    return graph.memo["stepping"]


def evaluates(fn: FunctionSummary, graph: CallGraph | None = None) -> bool:
    """Gradient-free: under ``no_grad``/``inference_mode`` (decorator or ``with``), or calls ``.eval()``."""
    no_grad = facts(graph).no_grad
    if any(_last(d) in no_grad for d in fn.decorators):
        return True
    if any(_last(w) in no_grad for w in fn.withs):
        return True
    return any(c.method == "eval" and not c.args for c in fn.calls)


def evaluated_by_callers(graph, function_id: str) -> bool:
    """Gradient-free because of where it is called: every resolved call of it sits in a
    ``with torch.no_grad():`` (or ``inference_mode``) of its caller (minGPT's
    ``eval_split``, called from a callback under ``no_grad``)."""
    sites = list(graph.call_sites_of(function_id))
    no_grad = facts(graph).no_grad
    return bool(sites) and all(any(_last(w) in no_grad for w in call.withs) for _, call in sites)


def is_compute_step(call: CallSite) -> bool:
    return bool(COMPUTE_STEP.match(call.method)) and call.callee != "step"


def framework_phase(call: CallSite, graph: CallGraph | None = None) -> str | None:
    """``trainer.fit(...)`` -> "train", ``trainer.validate(...)`` -> "evaluate", ..."""
    phase = facts(graph).framework_phases.get(call.method)
    if phase and call.receiver and PHASE_RECEIVER.search(call.receiver.rsplit(".", 1)[-1]):
        return phase
    return None


def step_calls(graph: CallGraph, loops) -> Iterator[tuple[str, int]]:
    """(function id, call index) of every call that runs once per batch: in a batch loop's
    body (a gradient-accumulation loop inside it included), or in a project function that
    such a call runs (one level down: ``train_step(model, batch)``; not into the model)."""
    seen = set()
    for facts in loops.of_kind("batch"):
        if facts.yields_batches:
            continue
        fn = graph.fn(facts.function)
        for i, call in enumerate(fn.calls):
            if facts.loop.index in call.loops and (facts.function, i) not in seen:
                seen.add((facts.function, i))
                yield facts.function, i
                for target in graph.targets(facts.function, i):
                    if is_model_entry(graph, target):
                        continue  # inside the model: its submodules, not the step's calls
                    for j, _ in enumerate(graph.fn(target).calls):
                        if (target, j) not in seen:
                            seen.add((target, j))
                            yield target, j


def does_step(graph: CallGraph, function_id: str, loops: set[int] | None = None) -> bool:
    """Whether calls of the function (those in ``loops``, if given) run a training or
    evaluation step: a backward pass, an optimizer step, a compute-step call, a model call,
    or a project function that does one of these."""
    fs, fn = graph.functions[function_id]
    pending = []
    for i, call in enumerate(fn.calls):
        if loops is not None and not (set(call.loops) & loops):
            continue
        if is_backward(call, graph, fs) or is_optimizer_step(graph, fs, fn, call) or is_compute_step(call) \
                or is_model_call(graph, function_id, i):
            return True
        pending.extend(graph.targets(function_id, i))
    # a project helper that runs the model (dlrm's ``dlrm_wrap(X, ...)``: ``return dlrm(X.to(device), ...)``),
    # one level down and not a model's own method
    return any(trains(graph, t) for t in pending) or any(
        not is_model_entry(graph, t) and not t.endswith(".__init__") and not graph.in_model_class(t)
        and any(is_model_call(graph, t, j) for j in range(len(graph.fn(t).calls))) for t in dict.fromkeys(pending))



def step_consumers(graph: CallGraph, function_id: str, loops: set[int] | None) -> list[tuple[int, bool]]:
    """The calls of a step (those directly in ``loops``) that consume the batch, for batch
    provenance to walk back from: (call index, whether the data is the receiver). A backward
    pass consumes its loss (``loss.backward()``: the receiver; ``accelerator.backward(loss)``:
    the argument), a model call and a compute-step call their arguments, and so does a call of
    a project function that does a step (``train(*get_batch())``, ``update(i, state, batch)``).
    A loss call (``criterion(output, target)``) consumes its arguments too.
    ``loops`` None: every call of the function."""
    fs, fn = graph.functions[function_id]
    out = []
    for i, call in enumerate(fn.calls):
        if loops is not None and (not call.loops or call.loops[-1] not in loops):
            continue
        if is_backward(call, graph, fs):
            out.append((i, call.method == "backward" and call.callee != "backward" and not call.args))
        elif is_model_call(graph, function_id, i) or is_compute_step(call) or \
                LOSS_NAME.search(call.callee.rsplit(".", 1)[-1]) and "(" not in call.callee:
            # a loss consumes the targets (an evaluation loop has no backward to walk from)
            out.append((i, False))
        elif any(trains(graph, t) or does_step(graph, t) for t in graph.targets(function_id, i)
                 if not t.endswith(".__init__")):
            out.append((i, False))
    return out


def does_io(graph: CallGraph, function_id: str) -> bool:
    """Whether the function itself reads or writes data (not through project functions)."""
    fs, fn = graph.functions[function_id]
    for i, call in enumerate(fn.calls):
        if graph.targets(function_id, i):
            continue
        qualified = graph.qualify(fs, call.callee)
        last = qualified.rsplit(".", 1)[-1]
        io_calls = facts(graph).io_calls
        if last in io_calls or ".".join(qualified.rsplit(".", 2)[-2:]) in io_calls:
            return True
        if qualified.startswith(("h5py.", "cv2.imread", "PIL.", "imageio.", "tifffile.", "pyarrow.")):
            return True
    return False


def step_anchor(graph: CallGraph, function_id: str, inside: set[int], targets: tuple[str, ...]) -> str | None:
    """What the body of a loop (the calls directly in ``inside``: the loop and its
    gradient-accumulation loops) shows of a step, read the way an expert reads it, whatever the
    loop iterates: "trains: <the call>" when it runs a backward pass or an optimizer step
    (itself, or in a project function it calls); "evaluates: <the call>" when, in a function
    that runs without gradients (``no_grad``/``inference_mode``, ``model.eval()``, or called
    only under ``no_grad``), it calls a model on what the loop draws (``targets``: the loop's
    variables). None when the body shows no step.

    This is the consumer-side evidence of a batch loop (issue 39): it needs no proof of where
    the batch comes from."""
    fs, fn = graph.functions[function_id]
    direct = [(i, call) for i, call in enumerate(fn.calls) if call.loops and call.loops[-1] in inside]
    for i, call in direct:
        if is_backward(call, graph, fs) or is_optimizer_step(graph, fs, fn, call):
            return f"trains: {call.callee}()"
    for i, call in direct:
        for t in graph.targets(function_id, i):
            if not is_model_entry(graph, t) and not t.endswith(".__init__") and trains(graph, t):
                return f"trains: {call.callee}() runs a backward pass or an optimizer step"
    if not targets or not (evaluates(fn, graph) or evaluated_by_callers(graph, function_id)):
        return None
    names = set(targets)
    for i, call in direct:
        roots = {a.split("[", 1)[0].split(".", 1)[0] for a in (*call.args, *(v for _, v in call.keywords)) if a}
        if roots & names and is_model_call(graph, function_id, i):
            return f"evaluates: {call.callee}() without gradients"
    return None
