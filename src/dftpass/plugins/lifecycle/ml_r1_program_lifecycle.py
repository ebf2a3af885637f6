"""ML-R1: one ``initialize_log`` per program, ``finalize()`` on every exit path, an ``@ai`` root."""

from __future__ import annotations

from dftpass.api import (
    aliases, Case, emitter, Entry, Expect, fid, Finding, function_region, has_region, InsertBefore, is_initialize,
    MODULE_SCOPE, Pass, PassKind, recognize, Severity, WrapBody,
)


class ProgramLifecycle(Pass):
    """Start tracing once in every program that trains or evaluates, finalize it on every exit path.

    What it does:
        Every way a process starts is an entry (the ``programs`` analysis): an ``if __name__
        == "__main__":`` block, a module-level script (no guard), a console script declared
        in ``pyproject.toml``/``setup.cfg``/``setup.py``, a ``python -m`` ``__main__.py``, and a
        function started in a new process (``mp.spawn(main_worker)``, ``Process(target=...)``).
        Each entry that trains or evaluates gets exactly one initialization that runs on every
        path through it:

        * a ``__main__`` block: one line in front of the block's own statements, which are
          left as they were (not re-indented): ``_dft_log = _dft_runtime.initialize()``
          (``dftpass.runtime``: initialize when tracing is on, ``atexit`` finalizes); the
          root region ``@ai`` goes on the one function the block runs (``main()``,
          ``sys.exit(main())``), or ``initialize(root=True)`` opens it when the block runs
          several statements (or a decorated function such as a ``@hydra.main``, where a
          decorator underneath would be outside the run), and ``atexit`` closes it;
        * a console-script or process target: the same inside the function's body, with
          ``with ai:`` around the rest; a function that is also called from a ``__main__``
          block is initialized there once, whichever way the program starts. Only a child
          process finalizes when the function returns (a forked one ends without ``atexit``);
          the main process finalizes at exit, since the function may run again;
        * a module-level script: ``initialize(root=True)`` right after its imports and set-up,
          ``atexit`` closing the root region and finalizing (last registered runs first).

    Why:
        dftracer writes nothing before ``finalize()``: a run that ends by an exception or
        ``sys.exit`` without it leaves an empty trace file. Several initializations in one
        process corrupt the trace, so the emitted one is guarded (it runs only when the
        process does not trace yet, e.g. a forked child), and a program whose own code
        initializes more than once is an error. An entry block of an *imported* module
        never runs on import: it is not a second initialization of the importer.
        ``initialize_log`` with tracing off would leave a ``dft.log`` in the working
        directory, hence the switch. dftracer's import replaces SIGINT's handler with one that
        exits; the emitted code gives the program Python's own back, so its ``except
        KeyboardInterrupt:`` path and exit code stay what they were.

    Example:
        ``if __name__ == "__main__": sys.exit(main())`` becomes the block shown by
        ``dftpass explain ML-R1``.

    Fix safety:
        Safe: with tracing off the program does what it did (an ``os.environ`` lookup). A
        ``__main__`` block and a module-level script are not re-indented: ``atexit``
        finalizes on normal end, ``sys.exit`` and uncaught exceptions alike (``os._exit`` and
        fatal signals skip it, as they would skip ``finally``). A console-script or process
        target's body is wrapped in ``try/finally`` (a child process may end without
        ``atexit``).
        Entries that only prepare data or build a model are left alone (``project.entries``
        chooses by hand). A program that already initializes is left alone; one that
        initializes twice is reported as an error.

    Options:
        None (see ``project.entries`` and ``project.kind``).
    """

    id = "ML-R1"
    title = "Program lifecycle"
    kind = PassKind.TRANSFORM
    requires = ("callgraph", "programs", "frameworks", "overhead")
    tags = ("lifecycle",)
    #: it decides itself which entries to instrument (none in a library) and checks them all
    runs_on_libraries = True

    VALID = [
        # an entry that trains nothing (a smoke test of a module) is not a training program
        "import torch\n\n\nclass Net(torch.nn.Module):\n    pass\n\n\nif __name__ == '__main__':\n    Net()\n",
        # a process that already initializes is left alone
        "import torch\nfrom dftracer.python import dftracer\n\n\ndef main():\n"
        "    log = dftracer.initialize_log(None, None, -1)\n    torch.ones(1).sum().backward()\n"
        "    log.finalize()\n\n\nif __name__ == '__main__':\n    main()\n",
        # the initializer dftpass gives DataLoader workers (ML-R21) runs in each worker process,
        # not in the program's: with the program's own initialization, once per process
        'import functools\nimport multiprocessing\nimport os\n\nimport torch\n'
        'from dftracer.python import dftracer\nfrom torch.utils.data import DataLoader\n\n\n'
        'def _dft_worker_init(worker_id, chain=None):\n'
        '    """dftpass: trace this DataLoader worker, then run the loader\'s own worker_init_fn."""\n'
        '    log = dftracer.get_instance()\n'
        '    if os.environ.get("DFTRACER_ENABLE") == "1" and log.logger is None:\n'
        '        log = dftracer.initialize_log(logfile=os.environ.get("DFTRACER_LOG_FILE"), data_dir=None, process_id=-1)\n'
        '        multiprocessing.util.Finalize(None, log.finalize, exitpriority=0)\n'
        '    if chain is not None:\n        chain(worker_id)\n\n\ndef main():\n'
        '    log = dftracer.initialize_log(None, None, -1)\n'
        '    loader = DataLoader(torch.ones(8, 2), batch_size=4, num_workers=2)\n'
        '    loader.worker_init_fn = functools.partial(_dft_worker_init, chain=loader.worker_init_fn)\n'
        '    for x in loader:\n        x.sum()\n    torch.ones(1, requires_grad=True).sum().backward()\n'
        "    log.finalize()\n\n\nif __name__ == '__main__':\n    main()\n",
        # two initializations in one process: nothing is added, and it is an error
        Case("import torch\nfrom dftracer.python import dftracer\n\n\ndef setup():\n"
             "    return dftracer.initialize_log(None, None, -1)\n\n\ndef main():\n"
             "    log = dftracer.initialize_log(None, None, -1)\n    setup()\n    torch.ones(1).sum().backward()\n"
             "    log.finalize()\n\n\nif __name__ == '__main__':\n    main()\n",
             findings=(Expect("error", "initializes dftracer 2 times", line=16),)),
    ]
    INVALID = [
        Case(
            '"""A script."""\nimport sys\n\nimport torch\n\n\ndef main():\n    torch.ones(1, requires_grad=True)'
            '.sum().backward()\n    return 0\n\n\nif __name__ == "__main__":\n    sys.exit(main())\n',
            '"""A script."""\nimport dftpass.runtime as _dft_runtime\nfrom dftracer.python import ai\n'
            'import sys\n\nimport torch\n\n\n@ai\ndef main():\n'
            '    torch.ones(1, requires_grad=True).sum().backward()\n    return 0\n\n\n'
            'if __name__ == "__main__":\n    _dft_log = _dft_runtime.initialize()\n    sys.exit(main())\n',
        ),
        Case(
            # several statements: the root region wraps them (never a getter such as get_config)
            "import torch\n\n\ndef get_config():\n    return 3\n\n\ndef fit(n, opt):\n    for _ in range(n):\n"
            "        opt.step()\n\n\nif __name__ == '__main__':\n    n = get_config()\n"
            "    fit(n, torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1))\n",
            'import dftpass.runtime as _dft_runtime\nimport torch\n\n\ndef get_config():\n    return 3\n\n\n'
            "def fit(n, opt):\n    for _ in range(n):\n        opt.step()\n\n\nif __name__ == '__main__':\n"
            '    _dft_log = _dft_runtime.initialize(root=True)\n    n = get_config()\n'
            '    fit(n, torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.1))\n',
        ),
        Case(
            # a function started in new processes initializes its own tracer there (and, being a
            # child, finalizes when it returns); the launcher is a program of its own
            "import torch\nimport torch.multiprocessing as mp\n\n\ndef worker(rank):\n"
            "    torch.ones(1, requires_grad=True).sum().backward()\n\n\nif __name__ == '__main__':\n"
            "    mp.spawn(worker, nprocs=2)\n",
            'import dftpass.runtime as _dft_runtime\nfrom dftracer.python import ai\nimport torch\n'
            'import torch.multiprocessing as mp\n\n\ndef worker(rank):\n'
            '    _dft_log = _dft_runtime.initialize()\n    try:\n        with ai:\n'
            '            torch.ones(1, requires_grad=True).sum().backward()\n    finally:\n'
            "        _dft_runtime.finalize_child(_dft_log)\n\n\nif __name__ == '__main__':\n"
            '    _dft_log = _dft_runtime.initialize(root=True)\n    mp.spawn(worker, nprocs=2)\n',
        ),
        Case(
            # a decorated main (hydra, click): a decorator underneath would be outside the run
            "import hydra\nimport torch\n\n\n@hydra.main(config_path='conf')\ndef main(cfg):\n"
            "    torch.ones(1, requires_grad=True).sum().backward()\n\n\nif __name__ == '__main__':\n    main()\n",
            'import dftpass.runtime as _dft_runtime\nimport hydra\nimport torch\n\n\n'
            "@hydra.main(config_path='conf')\ndef main(cfg):\n"
            "    torch.ones(1, requires_grad=True).sum().backward()\n\n\nif __name__ == '__main__':\n"
            '    _dft_log = _dft_runtime.initialize(root=True)\n    main()\n',
        ),
        Case(
            # a module-level script: initialized after its imports, finalized at exit
            "import torch\n\nw = torch.zeros(1, requires_grad=True)\nfor _ in range(3):\n"
            "    (w * 2).sum().backward()\n",
            'import dftpass.runtime as _dft_runtime\nimport torch\n\n'
            '_dft_log = _dft_runtime.initialize(root=True)\n\nw = torch.zeros(1, requires_grad=True)\n'
            'for _ in range(3):\n    (w * 2).sum().backward()\n',
        ),
        Case(
            # steps too short for the budget (overhead.sample-every, or chosen from --step-time):
            # the runtime traces the step regions of one step in k
            "import torch\n\nw = torch.zeros(1, requires_grad=True)\nfor _ in range(3):\n    (w * 2).sum().backward()\n",
            'import dftpass.runtime as _dft_runtime\nimport torch\n\n'
            '_dft_log = _dft_runtime.initialize(root=True, sample_every=8)\n\nw = torch.zeros(1, requires_grad=True)\n'
            'for _ in range(3):\n    (w * 2).sum().backward()\n',
            options={"overhead.sample-every": 8},
        ),
        Case(
            # a console script whose target is also run by the module's __main__ block:
            # initialized once, in the function, whichever way the program starts
            "import torch\n\n\ndef main():\n    torch.ones(1, requires_grad=True).sum().backward()\n\n\n"
            "if __name__ == '__main__':\n    main()\n",
            'import dftpass.runtime as _dft_runtime\nfrom dftracer.python import ai\nimport torch\n\n\n'
            'def main():\n    _dft_log = _dft_runtime.initialize()\n    try:\n        with ai:\n'
            '            torch.ones(1, requires_grad=True).sum().backward()\n    finally:\n'
            "        _dft_runtime.finalize_child(_dft_log)\n\n\nif __name__ == '__main__':\n    main()\n",
            path="pkg/cli.py",
            files={"pkg/__init__.py": "", "pyproject.toml": '[project]\nname = "pkg"\n'
                   '[project.scripts]\npkg-train = "pkg.cli:main"\n'},
        ),
    ]

    def run(self, ctx) -> None:
        graph = ctx.analysis("callgraph")
        programs = ctx.analysis("programs")
        planned: set[str] = set()  # functions that get the initialization
        calls = self._initialize_calls(graph)
        order = {"console-script": 0, "process-target": 1, "main-guard": 2, "module-script": 3}
        for program in sorted(programs.programs, key=lambda p: order[p.entry.kind]):
            entry = program.entry
            reach = programs.reach(entry)
            sites = self._initializations(calls, entry, reach)
            hand = sorted({(r, line) for r, line, emitted in sites if not emitted})
            if len(hand) > 1:
                where = ", ".join(f"{r}:{line}" for r, line in hand)
                ctx.report(Finding(self.id, f"this program initializes dftracer {len(hand)} times ({where}); "
                                   "several initializations in one process corrupt the trace: keep one, "
                                   "at the entry", entry.relpath, entry.line, 0, Severity.ERROR))
            if not program.instrumented or sites or reach & planned:
                continue  # initialized on this path already (or will be, by a function it runs)
            self._plan(ctx, graph, entry)
            if entry.function and entry.kind in ("console-script", "process-target"):
                planned.add(entry.function)

    def _plan(self, ctx, graph, entry: Entry) -> None:
        fs = graph.files[entry.relpath]
        ctx.starts_tracing(fs.relpath)  # the import prelude goes here, and nowhere else
        names = ctx.names(fs.relpath)
        every = ctx.analysis("overhead").sample_every  # the tracing budget's sampling, or the user's k
        prologue, final = tuple(names.lifecycle_prologue(every)), tuple(names.lifecycle_finally())
        if entry.kind in ("console-script", "process-target"):
            final = tuple(names.function_lifecycle_finally())
            fn = graph.fn(entry.function)
            what = f"console script {entry.name}" if entry.kind == "console-script" else \
                f"started in a new process by {entry.name}()"
            root = None if has_region(fs, fn, "") else names.node("")
            ctx.add_edit(fs.relpath, WrapBody(self.id, fn.line, f"{what}: initialize and finalize", fn.stmt,
                                              root, prologue, final))
        elif entry.kind == "module-script":
            code = "".join(names.script_prologue(every))
            ctx.add_edit(fs.relpath, InsertBefore(self.id, entry.line, "module-level script: initialize after "
                                                  "the imports, finalize at exit", (("body", fs.script_anchor),),
                                                  code, take_comments=False, separate=True))
        else:
            guard = fs.main_guards[entry.guard]
            target = entry.function
            decorated = target is not None and any(
                recognize(graph.file_of(target), d) is None for d in graph.fn(target).decorators)
            root = None if target and not decorated else names.node("")
            # statements put in front of the block's own, which stay as they were (no try/finally
            # re-indenting the block: atexit finalizes on every exit finally would see)
            code = "".join(names.script_prologue(every) if root else prologue)
            ctx.add_edit(fs.relpath, InsertBefore(self.id, guard.line, "program entry: initialize, finalize at exit",
                                                  (*guard.stmt, ("body", 0)), code))
            if root is None:
                tfs, tfn = graph.functions[target]
                if not has_region(tfs, tfn, ""):
                    ctx.add_edit(tfs.relpath, function_region(ctx.names(tfs.relpath), tfn, "", self.id,
                                                              "root region of the program"))

    @staticmethod
    def _initialize_calls(graph) -> dict[str, list[tuple[str, int, bool, bool]]]:
        """Every ``initialize_log`` call of the project, by function: (file, line, emitted by
        dftpass, inside a ``__main__`` block). Only files that import dftracer can have one
        (in torch, none of 2,350 files: ML-R1 went from 108 s to nothing)."""
        out: dict[str, list[tuple[str, int, bool, bool]]] = {}
        for fs in graph.files.values():
            if not aliases(fs) and emitter.RUNTIME_MODULE not in fs.imports.values():
                continue  # neither dftracer nor dftpass's runtime (whose initialize() dftpass writes)
            for fn in fs.functions:
                for c in fn.calls:
                    if is_initialize(fs, c.callee):
                        # dftpass's own: its lifecycle prologue, and its DataLoader workers'
                        # initializer (it runs in each worker process, not in the program's)
                        emitted = any(emitter.is_emitted_name(n, "log") for n in c.assigned_to) or \
                            emitter.is_emitted_name(fn.qualname, "worker_init")
                        out.setdefault(fid(fs.relpath, fn.qualname), []).append(
                            (fs.relpath, c.line, emitted, c.in_main_guard))
        return out

    @staticmethod
    def _initializations(calls, entry: Entry, reach: set[str]) -> list[tuple[str, int, bool]]:
        """The ``initialize_log`` calls one run of the entry can make: (file, line, emitted by
        dftpass). Calls in another file's ``__main__`` block do not run."""
        own = fid(entry.relpath, MODULE_SCOPE)
        guard_runs = entry.kind in ("main-guard", "module-script")
        sites = []
        for function_id in reach & calls.keys():
            for relpath, line, emitted, in_guard in calls[function_id]:
                if in_guard and not (guard_runs and function_id == own):
                    continue
                sites.append((relpath, line, emitted))
        return sorted(set(sites))
