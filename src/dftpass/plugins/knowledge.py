"""What ML training code looks like: shared recognisers for the rules.

Several rules need the same facts ("is this call an optimizer step?", "does this function
train?"); they live here once, so that ML-R2 (phases), ML-R4 (optimizer step) and ML-R7
(backward) agree on them.
"""

from __future__ import annotations

import re

from dftpass.core.callgraph import CallGraph, ResolutionHints
from dftpass.core.summary import CallSite, FileSummary, FunctionSummary, StmtPath
from dftpass.core.values import ValueHints, classes, kind, subject

OPTIMIZER_NAME = re.compile(r"(?i)^(opt|optim|optimi[sz]er)s?(_\w+)?$|(^|_)optimi[sz]er$|^opt_\w+$")
SCALER_NAME = re.compile(r"(?i)(^|_)(grad_?)?scaler$")
SCHEDULER_NAME = re.compile(r"(?i)sched|lr_|warmup")
OPTIMIZER_CLASSES = {
    "SGD", "Adam", "AdamW", "Adagrad", "Adadelta", "Adamax", "RMSprop", "Rprop", "LBFGS",
    "NAdam", "RAdam", "SparseAdam", "ASGD", "LAMB", "Lamb", "FusedAdam", "FusedLAMB", "Adafactor",
    "ZeroRedundancyOptimizer", "DistributedOptimizer",
}
NO_GRAD = ("no_grad", "inference_mode")

#: calls that run one training or evaluation step without showing a backward pass: a
#: benchmark's simulated ``compute``, a framework's ``train_step`` or ``train_on_batch``
COMPUTE_STEP = re.compile(
    r"(?i)^(compute|run_step|step_fn|forward_backward(_step)?|"
    r"(train|training|eval|evaluation|validation|val|test|predict)_(step|batch)|"
    r"(train|test|predict)_on_batch)$")
#: calls that run a whole training (or evaluation) phase inside a framework
FRAMEWORK_PHASES = {"fit": "train", "fit_generator": "train", "train_on_batch": "train",
                    "validate": "evaluate", "evaluate": "evaluate", "test": "test"}
#: receivers of framework phase calls: ``trainer.fit``, ``model.fit`` (Keras)
PHASE_RECEIVER = re.compile(r"(?i)(^|_)trainer$|^(model|learner|engine|net|keras_model)$")
#: names of the objects a training step calls as its model (when nothing else tells)
MODEL_NAME = re.compile(r"(?i)^(model|net|network|module|backbone|encoder|decoder|generator|discriminator|"
                        r"policy|critic|actor|classifier|transformer|gpt|llm|lm)s?(_\w+)?$|_(model|net)$")
#: calls that build a model whose class the call site cannot tell (a registry, a hub, a
#: config): even a project's own ``create_model(name)`` is opaque
MODEL_FACTORIES = frozenset({"create_model", "from_pretrained", "instantiate", "get_model", "build_model",
                             "load_model", "model_from_name", "create_model_from_config"})
#: callables that compute a loss: a module, but not the model
LOSS_NAME = re.compile(r"(?i)loss|criterion|crossentropy")
#: methods of log sinks (what they are passed is not the function's work)
LOG_METHODS = frozenset({"debug", "info", "warning", "warn", "error", "exception", "critical", "log", "print",
                         "output"})
#: calls that read or write data in the process (for "the function that reads a sample")
IO_CALLS = {
    "open", "load", "loads", "fromfile", "frombuffer", "memmap", "imread", "read", "readinto", "read_file",
    "read_csv", "read_parquet", "read_json", "File", "Image.open", "decode_image", "read_image", "load_image",
    "get_object", "download_fileobj", "urlopen", "readlines", "read_bytes", "read_text",
}


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
    for call, found in graph.calls_with_targets(function_id):
        if call_filter is not None and not call_filter(call):
            continue
        if is_backward(call) or is_optimizer_step(graph, fs, fn, call):
            return True
        targets.extend(found)
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


# -- program and resolution knowledge ---------------------------------------------------------

#: the libraries dftpass knows out of the box, by kind (see hookspecs.dftpass_knowledge);
#: a framework plugin adds its own through the same hook
BUILTIN_KNOWLEDGE: dict[str, list[str]] = {
    "module_bases": ["nn.Module", "torch.nn.Module", "LightningModule", "pl.LightningModule"],
    "module_base_prefixes": ["torch.nn.", "nn."],
    "module_call_methods": ["forward"],
    "process_launchers": ["spawn", "start_processes", "Process"],
    "process_keywords": ["worker_init_fn"],
    "loader_factories": ["DataLoader", "StatefulDataLoader", "WebLoader", "DALIGenericIterator",
                         "DALIClassificationIterator", "MpDeviceLoader", "ParallelLoader"],
    # not torch.utils.data. or datasets.: their Dataset classes are not loaders, and a loop
    # over a dataset's items would be wrapped as a batch loop (seen on torch's own sources)
    "loader_modules": ["tensorflow.data.", "tf.data.", "torchdata.", "grain."],
    "transparent_wrappers": ["tqdm", "track", "prefetch", "as_numpy_iterator"],
}


def resolution_hints(knowledge: dict[str, tuple[str, ...]] | None = None) -> ResolutionHints:
    """What the call graph and value flow cannot read from the project's code: the plugins'
    ``knowledge`` (:attr:`PassManager.knowledge`; default: dftpass's own) and the value-flow
    facts below."""
    knowledge = knowledge if knowledge is not None else BUILTIN_KNOWLEDGE
    return ResolutionHints(
        process_launchers=frozenset(knowledge["process_launchers"]),
        process_keywords=frozenset(knowledge["process_keywords"]),
        module_bases=tuple(knowledge["module_bases"]),
        module_base_prefixes=tuple(knowledge["module_base_prefixes"]),
        module_call_methods=tuple(knowledge["module_call_methods"]),
        values=ValueHints(
            identity_methods=frozenset({"to", "cuda", "cpu", "train", "eval", "float", "half", "double",
                                        "bfloat16", "requires_grad_", "share_memory", "to_empty"}),
            opaque_calls=MODEL_FACTORIES,
            passthrough_calls=frozenset({
                "torch.compile", "torch.nn.parallel.DistributedDataParallel", "DistributedDataParallel",
                "torch.nn.DataParallel", "nn.DataParallel", "DataParallel",
                "torch.distributed.fsdp.FullyShardedDataParallel", "FullyShardedDataParallel", "FSDP", "DDP",
                "iter",
            }),
        ),
    )


def is_compute_step(call: CallSite) -> bool:
    return bool(COMPUTE_STEP.match(call.method)) and call.callee != "step"


def framework_phase(call: CallSite) -> str | None:
    """``trainer.fit(...)`` -> "train", ``trainer.validate(...)`` -> "evaluate", ..."""
    phase = FRAMEWORK_PHASES.get(call.method)
    if phase and call.receiver and PHASE_RECEIVER.search(call.receiver.rsplit(".", 1)[-1]):
        return phase
    return None


def model_classes(graph: CallGraph, function_id: str, callee: str) -> set[str]:
    """The project model classes (torch modules, not losses) a call of ``callee`` runs
    ``forward`` of."""
    if graph.values is None:
        return set()
    return {c for c in classes(graph.values.of(function_id, callee)) if graph.is_module_class(c)
            and not LOSS_NAME.search(graph.classes[c][1].name) and not graph.has_base(c, ("_Loss", "_WeightedLoss"))}


def built_by_factory(graph: CallGraph, function_id: str, callee: str) -> bool:
    """Whether the model called as ``callee`` may come from a model factory (registry, hub)."""
    if graph.values is None:
        return False
    return any(kind(o) == "ext" and subject(o).rstrip("()").rsplit(".", 1)[-1] in MODEL_FACTORIES
               for o in graph.values.of(function_id, callee))


def is_model_call(graph: CallGraph, function_id: str, index: int) -> bool:
    """Call ``index`` of the function is ``model(x)``, ``self.net(x)``: an instance of a model
    class, or a name that reads like a model when what it holds is unknown (a factory's)."""
    callee = graph.fn(function_id).calls[index].callee
    if "(" in callee or callee.count(".") > 1 or (callee.count(".") == 1 and not callee.startswith("self.")):
        return False
    if LOSS_NAME.search(callee.rsplit(".", 1)[-1]):
        return False  # ``loss_fn(output, target)``, ``criterion(...)``
    if model_classes(graph, function_id, callee):
        return True
    if graph.targets(function_id, index):
        return False  # a project function, not a model
    return bool(MODEL_NAME.search(callee.rsplit(".", 1)[-1]))


def does_step(graph: CallGraph, function_id: str, loops: set[int] | None = None) -> bool:
    """Whether calls of the function (those in ``loops``, if given) run a training or
    evaluation step: a backward pass, an optimizer step, a compute-step call, a model call,
    or a project function that does one of these."""
    fs, fn = graph.functions[function_id]
    pending = []
    for i, call in enumerate(fn.calls):
        if loops is not None and not (set(call.loops) & loops):
            continue
        if is_backward(call) or is_optimizer_step(graph, fs, fn, call) or is_compute_step(call) \
                or is_model_call(graph, function_id, i):
            return True
        pending.extend(graph.targets(function_id, i))
    return any(trains(graph, t) for t in pending)


def does_io(graph: CallGraph, function_id: str) -> bool:
    """Whether the function itself reads or writes data (not through project functions)."""
    fs, fn = graph.functions[function_id]
    for i, call in enumerate(fn.calls):
        if graph.targets(function_id, i):
            continue
        qualified = graph.qualify(fs, call.callee)
        last = qualified.rsplit(".", 1)[-1]
        if last in IO_CALLS or ".".join(qualified.rsplit(".", 2)[-2:]) in IO_CALLS:
            return True
        if qualified.startswith(("h5py.", "cv2.imread", "PIL.", "imageio.", "tifffile.", "pyarrow.")):
            return True
    return False
