"""ML-R27: ``ai.other.io.read/write`` around configuration, stats and log file I/O."""

from __future__ import annotations

import re

import attrs

from dftpass.api import (
    call_chain, CallSite, Case, data_path, does_io, Expect, facts, FileSummary, Finding, FunctionSummary, HANDLE_NAME,
    Handles, is_node, Pass, PassKind, run_inside, Severity, StmtPath, unwrappable, WrapStmt,
)

#: calls that read a configuration or metadata file: qualified name -> (index of the file
#: argument, kind of what they return: :data:`dftpass.core.emitter.IMAGE_SIZE`)
READS: dict[str, tuple[int | None, str]] = {
    "json.load": (0, "unknown"),
    "yaml.safe_load": (0, "unknown"),
    "yaml.load": (0, "unknown"),
    "yaml.full_load": (0, "unknown"),
    "yaml.unsafe_load": (0, "unknown"),
    "toml.load": (0, "unknown"),
    "tomllib.load": (0, "unknown"),
    "tomli.load": (0, "unknown"),
    "omegaconf.OmegaConf.load": (None, "unknown"),
    "pandas.read_csv": (None, "frame"),
    "numpy.loadtxt": (None, "ndarray"),
    "numpy.genfromtxt": (None, "ndarray"),
}
#: calls that write a stats, metrics or configuration file: qualified name -> (index of the
#: file argument, index of the argument whose bytes are written in memory)
WRITES: dict[str, tuple[int | None, int | None]] = {
    "json.dump": (1, None),
    "yaml.dump": (1, None),
    "yaml.safe_dump": (1, None),
    "toml.dump": (1, None),
    "omegaconf.OmegaConf.save": (None, None),
    "numpy.savetxt": (None, 1),
    # sample images written during training (GAN and diffusion programs): the file argument
    "torchvision.utils.save_image": (1, None),
}
#: DataFrame/Series methods that write a file when given a path
FRAME_WRITES = frozenset({"to_csv", "to_json", "to_parquet"})
#: methods of a ``csv.writer``/``csv.DictWriter``
CSV_WRITES = frozenset({"writerow", "writerows"})
CSV_WRITERS = frozenset({"csv.writer", "csv.DictWriter"})
#: methods of a file that read (their result: bytes or str) and write
FILE_READS = frozenset({"read", "read_text", "read_bytes"})
#: TensorBoard writers: their ``flush()``/``close()`` write the queued events (``ai.other.log``)
SUMMARY_WRITERS = frozenset({"torch.utils.tensorboard.SummaryWriter", "tensorboardX.SummaryWriter",
                             "torch.utils.tensorboard.writer.SummaryWriter"})

_NAME = HANDLE_NAME
#: names of functions that save or restore a checkpoint
CHECKPOINT_NAME = re.compile(r"(?i)checkpoint|ckpt|^_?(save|load|restore)_(state|model|weights)")


@attrs.define
class OtherIOOptions:
    #: measure ``image_size`` after each read or write (``X.update(image_size=...)`` inside the region)
    image_size: bool = True


@attrs.frozen
class _Region:
    path: StmtPath
    line: int
    node: str  # other.io.read | other.io.write | other.log
    what: str
    holder: str | None = None
    kind: str = "unknown"
    returned: bool = False
    loops: tuple[int, ...] = ()


class OtherIO(Pass):
    """Time configuration reads and stats/metrics writes with ``ai.other.io.read`` / ``.write``.

    What it does:
        In what an instrumented program runs (its entry's reach; everything when no entry
        trains), outside the data path (ML-R25's) and outside checkpoint functions and what
        they call (ML-R26's: a function with a checkpoint region, or named for checkpoints,
        or one that calls ``torch.save``/``torch.load``, ``state_dict``, ``save_pretrained``...
        and runs no loop of its own: a training function that saves its weights at the end is
        not one), these statements get ``with ai.other.io.read:`` or
        ``with ai.other.io.write:``: configuration and metadata reads (``cfg =
        yaml.safe_load(f)``, ``json.load(f)``, ``toml``, ``OmegaConf.load``, ``pd.read_csv``,
        ``np.loadtxt``, ``text = f.read()``) and stats, metrics and configuration writes
        (``json.dump(metrics, f)``, ``yaml.dump(cfg, f)``, ``np.savetxt``, ``writer.writerow``
        of a ``csv.writer``, ``df.to_csv(path)``, ``f.write(line)``, ``OmegaConf.save``).
        Inside the region, after the statement, ``.update(image_size=...)`` measures the bytes
        where something says them honestly: the file's position when the statement reads or
        writes a file opened for it (``with open(p, 'w') as f: json.dump(m, f)``: everything
        written through ``f`` so far), the array or frame in memory (``np.savetxt``,
        ``read_csv``), ``len`` of what ``f.read()`` returned, through
        ``dftpass.runtime.nbytes`` where the type is known only then (a file object's
        position, a buffer written); otherwise no size (a parsed configuration not bound to
        a name, a CSV row): never a ``-1``. A TensorBoard
        ``SummaryWriter``'s ``flush()``/``close()`` (where its queued events reach the
        file) gets ``with ai.other.log:``.

    Why:
        Start-up reads and end-of-epoch writes are usually small; when they are not (a
        configuration on a slow shared file system, a metrics file rewritten every epoch)
        they show as unexplained gaps between phases. The ``other`` category accounts for
        them, apart from data and checkpoint I/O.

    Example:
        ``with open(path) as f:`` / ``cfg = yaml.safe_load(f)`` gets ``with
        ai.other.io.read:`` around the ``yaml`` line and ``ai.other.io.read.update(image_size=
        _dft_runtime.nbytes(f))`` (the file's position: the bytes read) after it.

    Fix safety:
        Safe: a ``with`` region (it ends when the statement raises), a measure that cannot
        raise. Not wrapped, because they run once per batch (a region per log line is an event
        flood for a write of microseconds that the OS buffers): statements in a batch loop or
        in a loop that is not an epoch loop, and everything a batch loop calls; a note names
        each. ``ai.other.log`` is not put on ``print``, ``logging`` calls,
        ``writer.add_scalar`` or ``wandb.log``: they are per-step calls of a few µs that queue
        or buffer, and the write happens later, on another thread or at a flush, which a region
        on the call would not see. Not wrapped either: a read returned at once (``return
        json.load(f)``: nothing to measure after it; a note says so; wrapped when
        ``image_size`` is off), the ``open`` of a ``with open(...)`` block, statements that
        call a project function doing I/O itself, statements already in an ``other.io``
        region or run from one, and module-level code outside the entry (it runs at import,
        before tracing starts).

    Options:
        image_size: measure ``image_size`` after each read or write (default true).
    """

    id = "ML-R27"
    title = "Other I/O"
    kind = PassKind.TRANSFORM
    requires = ("callgraph", "loops", "programs", "batch_provenance")
    tags = ("io", "other")
    Options = OtherIOOptions

    VALID = [
        # the data a full-batch step trains on, read once (pygcn's genfromtxt): ML-R25's data.io,
        # not a configuration read
        "import numpy as np\nimport torch\n\n\ndef load_data(path):\n    raw = np.genfromtxt(path)\n"
        "    return torch.tensor(raw, dtype=torch.float32)\n\n\nx = load_data('features.txt')\n"
        "model = torch.nn.Linear(4, 1)\nopt = torch.optim.SGD(model.parameters(), lr=0.1)\n\n\ndef train(epoch):\n"
        "    opt.zero_grad()\n    model(x).sum().backward()\n    opt.step()\n\n\nfor epoch in range(3):\n"
        "    train(epoch)\n",
        # a metrics line written every batch: a hot path (a note says why it is left alone)
        Case(
            "import json\n\n\ndef train(model, loader, optimizer, log_path):\n    with open(log_path, 'a') as log:\n"
            "        for step, (x, y) in enumerate(loader):\n            loss = model(x, y)\n"
            "            loss.backward()\n            optimizer.step()\n"
            "            log.write(json.dumps({'step': step, 'loss': loss.item()}) + '\\n')\n",
            findings=(Expect("info", "runs once per batch"),),
        ),
        # checkpoint I/O is ML-R26's: the json beside the weights too
        "import json\nimport torch\n\n\ndef save_checkpoint(path, model, epoch):\n"
        "    torch.save(model.state_dict(), path)\n    with open(path + '.json', 'w') as f:\n"
        "        json.dump({'epoch': epoch}, f)\n",
        # already annotated
        "from dftracer.python import ai\nimport yaml\n\n\ndef load_config(path):\n    with open(path) as f:\n"
        "        with ai.other.io.read:\n            cfg = yaml.safe_load(f)\n"
        "            ai.other.io.read.update(image_size=-1)\n    return cfg\n",
        # the configuration is returned at once: nothing to measure after the read
        Case(
            "import json\n\n\ndef load_config(path):\n    with open(path) as f:\n        return json.load(f)\n",
            findings=(Expect("info", "returned at once"),),
        ),
    ]
    INVALID = [
        Case(
            # nothing names what is written: no ``update(image_size=...)``
            # lines (minGPT's setup_logging)
            "import json\nimport sys\n\n\ndef setup_logging(path, config):\n"
            "    with open(path + '/args.txt', 'w') as f:\n        f.write(' '.join(sys.argv))\n"
            "    with open(path + '/config.json', 'w') as f:\n        f.write(json.dumps(config, indent=4))\n\n\n"
            "def main():\n    setup_logging('out', {'lr': 0.1})\n\n\nif __name__ == '__main__':\n    main()\n",
            "from dftracer.python import ai\nimport json\nimport sys\n\n\ndef setup_logging(path, config):\n"
            "    with open(path + '/args.txt', 'w') as f:\n        with ai.other.io.write:\n"
            "            f.write(' '.join(sys.argv))\n    with open(path + '/config.json', 'w') as f:\n"
            "        with ai.other.io.write:\n            f.write(json.dumps(config, indent=4))\n\n\n"
            "def main():\n    setup_logging('out', {'lr': 0.1})\n\n\nif __name__ == '__main__':\n    main()\n",
        ),
        Case(
            # the start-up configuration read, and the results written at the end
            "import json\n\nimport yaml\n\n\ndef main(config_path, out):\n    with open(config_path) as f:\n"
            "        cfg = yaml.safe_load(f)\n    history = fit(cfg)\n    with open(out, 'w') as fh:\n"
            "        json.dump({'history': history}, fh, indent=2)\n\n\ndef fit(cfg):\n"
            "    return [cfg['lr']]\n",
            'import dftpass.runtime as _dft_runtime\nfrom dftracer.python import ai\nimport json\n\n'
            'import yaml\n\n\ndef main(config_path, out):\n    with open(config_path) as f:\n'
            '        with ai.other.io.read:\n            cfg = yaml.safe_load(f)\n'
            '            ai.other.io.read.update(image_size=_dft_runtime.nbytes(f))\n    history = fit(cfg)\n'
            "    with open(out, 'w') as fh:\n        with ai.other.io.write:\n"
            "            json.dump({'history': history}, fh, indent=2)\n"
            '            ai.other.io.write.update(image_size=_dft_runtime.nbytes(fh))\n\n\ndef fit(cfg):\n'
            "    return [cfg['lr']]\n",
        ),
        Case(
            # a data set's index read once in __init__ (not the data path); the one-line
            # config read has no file object to measure
            "import json\n\nimport yaml\nfrom torch.utils.data import Dataset\n\n\nclass Samples(Dataset):\n"
            "    def __init__(self, root):\n        with open(root + '/dataset.json') as fh:\n"
            "            self.labels = json.load(fh)['labels']\n"
            "        self.cfg = yaml.safe_load(open(root + '/config.yaml'))\n\n"
            "    def __getitem__(self, i):\n        return self.labels[i]\n",
            'import dftpass.runtime as _dft_runtime\nfrom dftracer.python import ai\nimport json\n\n'
            'import yaml\nfrom torch.utils.data import Dataset\n\n\nclass Samples(Dataset):\n'
            "    def __init__(self, root):\n        with open(root + '/dataset.json') as fh:\n"
            "            with ai.other.io.read:\n                self.labels = json.load(fh)['labels']\n"
            '                ai.other.io.read.update(image_size=_dft_runtime.nbytes(fh))\n'
            '        with ai.other.io.read:\n'
            "            self.cfg = yaml.safe_load(open(root + '/config.yaml'))\n\n"
            '    def __getitem__(self, i):\n        return self.labels[i]\n',
        ),
        Case(
            # per-epoch stats: a CSV row and a text array after each epoch (not per batch),
            # TensorBoard's events flushed at the end; the per-batch add_scalar is left alone
            "import csv\n\nimport numpy as np\nfrom torch.utils.tensorboard import SummaryWriter\n\n\n"
            "def fit(model, loader, optimizer, epochs, out):\n    tb = SummaryWriter(out)\n"
            "    stats = open(out + '/stats.csv', 'w', newline='')\n    writer = csv.writer(stats)\n"
            "    for epoch in range(epochs):\n        losses = []\n        for x, y in loader:\n"
            "            loss = model(x, y)\n            loss.backward()\n            optimizer.step()\n"
            "            losses.append(loss.item())\n            tb.add_scalar('loss', losses[-1])\n"
            "        writer.writerow([epoch, sum(losses)])\n        curve = np.array(losses)\n"
            "        np.savetxt(f'{out}/losses_{epoch}.txt', curve)\n    tb.flush()\n",
            'import dftpass.runtime as _dft_runtime\nfrom dftracer.python import ai\nimport csv\n\n'
            'import numpy as np\nfrom torch.utils.tensorboard import SummaryWriter\n\n\n'
            'def fit(model, loader, optimizer, epochs, out):\n    tb = SummaryWriter(out)\n'
            "    stats = open(out + '/stats.csv', 'w', newline='')\n    writer = csv.writer(stats)\n"
            '    for epoch in range(epochs):\n        losses = []\n        for x, y in loader:\n'
            '            loss = model(x, y)\n            loss.backward()\n            optimizer.step()\n'
            "            losses.append(loss.item())\n            tb.add_scalar('loss', losses[-1])\n"
            '        with ai.other.io.write:\n            writer.writerow([epoch, sum(losses)])\n'
            '        curve = np.array(losses)\n        with ai.other.io.write:\n'
            "            np.savetxt(f'{out}/losses_{epoch}.txt', curve)\n"
            '            ai.other.io.write.update(image_size=_dft_runtime.nbytes(curve))\n'
            '    with ai.other.log:\n        tb.flush()\n',
        ),
        Case(
            # sample images written after training (a GAN's save_image)
            "import torch\nfrom torchvision.utils import save_image\n\n\ndef finish(generator, z):\n"
            "    images = generator(z)\n    save_image(images, 'samples.png', nrow=5)\n",
            "from dftracer.python import ai\nimport torch\nfrom torchvision.utils import save_image\n\n\n"
            "def finish(generator, z):\n    images = generator(z)\n    with ai.other.io.write:\n"
            "        save_image(images, 'samples.png', nrow=5)\n",
        ),
    ]

    def run(self, ctx) -> None:
        graph = ctx.analysis("callgraph")
        loops = ctx.analysis("loops")
        programs = ctx.analysis("programs")
        excluded = set(data_path(graph, loops)) | _checkpoint_functions(graph) | run_inside(graph, _region_node)
        hot = _batch_reach(graph, loops)
        # the data the batches are cut from, read once (pygcn's genfromtxt): ML-R25's data.io
        loads = ctx.analysis("batch_provenance").loads()
        found: list[tuple[str, _Region]] = []
        for function_id, module_statements in sorted(_scope(graph, programs).items()):
            if function_id in excluded:
                continue
            fs, fn = graph.functions[function_id]
            if any(_region_node(fs, d) for d in fn.decorators):
                continue
            for region in _regions(graph, function_id, self.options.image_size):
                if fn.is_module and not _runs_after_start(fs, region, module_statements):
                    continue
                if region.path in loads.get(function_id, ()):
                    continue
                found.append((function_id, region))
        for function_id, region in found:
            self._emit(ctx, graph, loops, function_id, region, function_id in hot)

    def _emit(self, ctx, graph, loops, function_id: str, region: _Region, hot: bool) -> None:
        fs, fn = graph.functions[function_id]
        calls = [(i, c) for i, c in enumerate(fn.calls) if c.stmt == region.path]
        if any(_region_node(fs, w) for c in fn.calls if c.stmt[:-1] == region.path[:-1] or c.stmt == region.path
               for w in c.withs):
            return
        if any(unwrappable(fs, fn, c) for _, c in calls):
            return
        for i, _ in calls:
            if any(does_io(graph, t) or any(does_io(graph, r) for r in graph.reachable(t) if r in graph.functions)
                   for t in graph.targets(function_id, i)):
                return
        batch = [loops.facts[(function_id, k)] for k in region.loops if loops.facts[(function_id, k)].kind == "batch"]
        other = [loops.facts[(function_id, k)] for k in region.loops if loops.facts[(function_id, k)].kind == "other"]
        reason = None
        if batch or hot:
            reason = "runs once per batch" + (f" (the batch loop at line {batch[-1].loop.line})" if batch else
                                              " (a batch loop calls this function)")
        elif other:
            reason = f"runs once per iteration of the loop at line {other[-1].loop.line}"
        measure = self.options.image_size and region.node != "other.log"
        if reason is None and region.returned and measure:
            reason = ("the value read is returned at once, so its image_size cannot be measured after the read; "
                      "name it (`x = ...`, then `return x`), or set image_size = false")
        if reason is not None:
            if ctx.mode != "validate":
                ctx.report(Finding(self.id, f"{region.what} not wrapped: it {reason}" if "returned" not in reason
                                   else f"{region.what} not wrapped: {reason}", fs.relpath, region.line,
                                   severity=Severity.INFO))
            return
        names = ctx.names(fs.relpath)
        # the size of what moved, when a name holds it (no size otherwise: never a -1)
        size = names.image_size(region.holder, region.kind) if measure else None
        tail = (names.node_update(region.node, image_size=size),) if size else ()
        why = {"other.io.read": "configuration or metadata read", "other.io.write": "stats, results or metadata write",
               "other.log": "TensorBoard events written"}[region.node]
        ctx.add_edit(fs.relpath, WrapStmt(self.id, region.line, f"{region.what}: {why}, not per batch", region.path,
                                          names.node(region.node), tail))


def _region_node(fs: FileSummary, text: str | None) -> bool:
    return is_node(fs, text, "other.log") or any(is_node(fs, text, f"other.io.{op}")
                                                 for op in ("open", "read", "write", "close"))


def _scope(graph, programs) -> dict[str, bool]:
    """The functions the instrumented programs run (every function when none is), each with
    whether its module-level statements count: only the entry's own module's, and there only
    those of its ``__main__`` block or, for a module-level script, those after its set-up."""
    instrumented = programs.instrumented()
    if not instrumented:
        return {function_id: graph.fn(function_id).is_module for function_id in graph.functions}
    out: dict[str, bool] = {}
    for program in instrumented:
        own = graph.module_scope_id(graph.files[program.entry.relpath])
        for function_id in programs.reach(program.entry):
            if function_id in graph.functions:
                out[function_id] = out.get(function_id, False) or function_id == own
    return out


def _runs_after_start(fs: FileSummary, region: _Region, counts: bool) -> bool:
    """A module-level statement runs with tracing started: in the ``__main__`` block, or after
    a script's set-up (where ML-R1 starts tracing)."""
    if not counts:
        return False
    if any(g.stmt == region.path[:1] for g in fs.main_guards):
        return True
    return not fs.main_guards and region.path[0][1] >= fs.script_anchor


def _checkpoint_functions(graph) -> set[str]:
    """Functions that save or load model state, and what they call: their I/O is ML-R26's. A
    checkpoint function has a checkpoint region, or a name that says so, or saves or loads
    state and runs no loop of its own (a training function that also saves its weights at
    the end is not one: its metrics files are this rule's)."""
    roots = set()
    known = facts(graph)  # the calls that make a function checkpoint I/O (ML-R26's, not this rule's)
    for function_id, (fs, fn) in graph.functions.items():
        if fn.is_module:
            continue
        if any(is_node(fs, d, "checkpoint.capture") or is_node(fs, d, "checkpoint.restart") for d in fn.decorators) \
                or CHECKPOINT_NAME.search(fn.name) or not fn.loops and any(
                    graph.qualify(fs, c.callee) in known.checkpoint_functions or c.method in known.checkpoint_method_names
                    or c.method == "state_dict"  # taking a model's state is what a checkpoint function does
                    for c in fn.calls):
            roots.add(function_id)
    out = set(roots)
    for r in roots:
        out |= graph.reachable(r)
    return out


def _batch_reach(graph, loops) -> set[str]:
    """Every project function a batch loop calls, directly or not: it runs once per batch."""
    out: set[str] = set()
    for facts in loops.of_kind("batch"):
        fn = graph.fn(facts.function)
        for i, call in enumerate(fn.calls):
            if facts.loop.index in call.loops:
                for target in graph.targets(facts.function, i):
                    out.add(target)
                    out |= graph.reachable(target)
    return out


def _regions(graph, function_id: str, measure: bool) -> list[_Region]:
    fs, fn = graph.functions[function_id]
    handles = Handles(graph, function_id)
    out: dict[StmtPath, _Region] = {}
    for call in fn.calls:
        if call.stmt in out or call.in_comprehension:
            continue
        region = None
        if call.stmt_kind in ("assign", "other", "return"):
            region = _read(graph, fs, fn, handles, call)
        if region is None and call.stmt_kind == "expr":
            region = _write(graph, fs, fn, handles, call)
        if region is not None:
            out[call.stmt] = region
    return [out[p] for p in sorted(out)]


def _measure_file(handles: Handles, arg: str | None, path: StmtPath, writing: bool) -> tuple[str | None, str]:
    """(holder, kind) for a statement that reads or writes the file object ``arg``: its
    position, if it was opened for this (read: ``r``; write: ``w``/``x``, not appending)."""
    if not arg or not _NAME.match(arg):
        return None, "unknown"
    mode = handles.file_mode(arg, path)
    if mode is None or "+" in mode or "a" in mode or ("r" in mode) == writing:
        return None, "unknown"
    return arg, "position"


def _read(graph, fs, fn: FunctionSummary, handles: Handles, call: CallSite) -> _Region | None:
    """``cfg = yaml.safe_load(f)``, ``labels = json.load(fh)['labels']``, ``text = f.read()``,
    ``return json.load(f)``: the read call is the statement's whole value (subscripts after it
    allowed)."""
    if call.stmt_kind == "return":
        value, target = call.callee + "()", None
    else:
        here = [a for a in fn.assigns if a.stmt == call.stmt]
        if len(here) != 1 or not _NAME.match(here[0].target):
            return None
        value, target = here[0].value, here[0].target
    chain = call_chain(value)
    if chain is None or chain[1] or chain[0] != call.callee:
        return None
    qualified = graph.qualify(fs, call.callee)
    returned = call.stmt_kind == "return"
    if qualified in READS:
        file_arg, kind = READS[qualified]
        if qualified == "pandas.read_csv" and any(k in ("chunksize", "iterator") for k, _ in call.keywords):
            return None
        if file_arg is not None:
            holder, kind = _measure_file(handles, call.args[file_arg] if len(call.args) > file_arg else None,
                                         call.stmt, writing=False)
        else:
            holder = target if kind != "unknown" and not chain[2] else None
            kind = kind if holder else "unknown"
        return _Region(call.stmt, call.line, "other.io.read", f"{call.callee}()", holder, kind, returned, call.loops)
    receiver, method = call.receiver, call.method
    if method in FILE_READS and receiver and _NAME.match(receiver) and not chain[2] \
            and handles.kind(receiver, call.stmt) == "file":
        return _Region(call.stmt, call.line, "other.io.read", f"{call.callee}()", target,
                       "bytes" if target else "unknown", returned, call.loops)
    return None


def _write(graph, fs, fn: FunctionSummary, handles: Handles, call: CallSite) -> _Region | None:
    """``json.dump(m, f)``, ``np.savetxt(p, a)``, ``writer.writerow(row)``, ``df.to_csv(p)``,
    ``f.write(line)``; a TensorBoard writer's ``flush()``/``close()``."""
    qualified = graph.qualify(fs, call.callee)
    if qualified in WRITES:
        file_arg, data_arg = WRITES[qualified]
        if file_arg is not None and len(call.args) <= file_arg and not any(
                k in ("stream", "fp", "f") for k, _ in call.keywords):
            return None  # ``yaml.dump(cfg)`` returns a string
        if data_arg is not None:
            arg = call.args[data_arg] if len(call.args) > data_arg else None
            holder, kind = (arg, "any") if arg and _NAME.match(arg) else (None, "unknown")
        else:
            holder, kind = _measure_file(handles, call.args[file_arg] if file_arg is not None
                                         and len(call.args) > file_arg else None, call.stmt, writing=True)
        return _Region(call.stmt, call.line, "other.io.write", f"{call.callee}()", holder, kind, loops=call.loops)
    receiver, method = call.receiver, call.method
    if not receiver or not _NAME.match(receiver):
        return None
    origins = _origins(graph, fs, fn, receiver)
    if method in CSV_WRITES and origins & CSV_WRITERS:
        return _Region(call.stmt, call.line, "other.io.write", f"{call.callee}()", loops=call.loops)
    if method in ("flush", "close") and origins & SUMMARY_WRITERS and not call.args:
        return _Region(call.stmt, call.line, "other.log", f"{call.callee}()", loops=call.loops)
    if method in FRAME_WRITES and call.args and any(o.startswith("pandas.") for o in origins):
        return _Region(call.stmt, call.line, "other.io.write", f"{call.callee}()", receiver, "any", loops=call.loops)
    if method == "write" and len(call.args) == 1 and handles.kind(receiver, call.stmt) == "file":
        arg = call.args[0]
        holder, kind = (arg, "any") if arg and _NAME.match(arg) else (None, "unknown")
        return _Region(call.stmt, call.line, "other.io.write", f"{call.callee}()", holder, kind, loops=call.loops)
    return None


def _origins(graph, fs, fn: FunctionSummary, name: str) -> set[str]:
    """Qualified callables whose result ``name`` may hold (``csv.writer``, ``pandas.read_csv``)."""
    out = set()
    function_id = f"{fs.relpath}::{fn.qualname}"
    for origin in graph.values.of(function_id, name) if graph.values is not None else ():
        if origin.startswith("ext:"):
            chain = call_chain(origin[4:])
            if chain is not None:
                out.add(graph.qualify(fs, chain[0]))
    return out
