"""ML-R1: one ``initialize_log`` per program, ``finalize()`` on every exit path, an ``@ai`` root."""

from __future__ import annotations

from dftpass.core.callgraph import Entry, fid
from dftpass.core.edits import WrapBody
from dftpass.core.emitter import is_initialize
from dftpass.core.findings import Finding, Severity
from dftpass.core.passes import Case, Pass, PassKind
from dftpass.core.placement import function_region, has_region
from dftpass.core.summary import MODULE_SCOPE


class ProgramLifecycle(Pass):
    """Start tracing once at the program's entry, finalize it on every exit path.

    What it does:
        For each program entry (an ``if __name__ == "__main__":`` block, or a console-script
        target declared in ``pyproject.toml``/``setup.cfg``/``setup.py``) the entry's body
        becomes: initialize dftracer (only when ``DFTRACER_ENABLE=1``), register
        ``finalize`` with ``atexit``, then run the original body in ``try: ... finally:
        finalize()``. The project function the entry runs (``main()``) gets the root region
        ``@ai``, so the trace has an ``ai_root`` event spanning the run; an entry block that
        calls no project function gets ``with ai:`` instead.

    Why:
        dftracer writes nothing before ``finalize()``: a run that ends by an exception or
        ``sys.exit`` without it leaves an empty trace file. Several initializations in one
        process corrupt the trace, so there is exactly one, at the real entry, found through
        the call graph (not every file that defines ``main``). ``initialize_log`` with tracing
        off would still leave a ``dft.log`` in the working directory, hence the switch.

    Example:
        ``if __name__ == "__main__": main()`` becomes the block shown by ``dftpass explain ML-R1``.

    Fix safety:
        Safe: with tracing off the program does what it did (one ``os.environ`` lookup); the
        ``try/finally`` re-raises everything. A program that already calls
        ``initialize_log`` is left alone; one that initializes more than once is reported
        as an error (``dftpass validate`` fails on it).

    Options:
        None.
    """

    id = "ML-R1"
    title = "Program lifecycle"
    kind = PassKind.TRANSFORM
    requires = ("callgraph", "frameworks")
    tags = ("lifecycle",)

    VALID = [
        # a module without an entry point
        "def helper(x):\n    return x + 1\n",
    ]
    INVALID = [
        Case(
            '"""A script."""\nimport sys\n\n\ndef main():\n    return 0\n\n\nif __name__ == "__main__":\n'
            "    sys.exit(main())\n",
            '"""A script."""\nimport atexit\nimport os\nfrom dftracer.python import ai, dftracer\nimport sys\n\n\n'
            "@ai\ndef main():\n    return 0\n\n\nif __name__ == \"__main__\":\n    _dft_log = (\n"
            "        dftracer.initialize_log(logfile=os.environ.get(\"DFTRACER_LOG_FILE\"), data_dir=None, "
            "process_id=-1)\n"
            '        if os.environ.get("DFTRACER_ENABLE") == "1"\n        else dftracer.get_instance()\n'
            "    )\n    atexit.register(_dft_log.finalize)\n    try:\n        sys.exit(main())\n    finally:\n"
            "        _dft_log.finalize()\n",
        ),
        Case(
            "import os\n\nif __name__ == '__main__':\n    print(os.getcwd())\n",
            "import atexit\nfrom dftracer.python import ai, dftracer\nimport os\n\nif __name__ == '__main__':\n"
            "    _dft_log = (\n        dftracer.initialize_log(logfile=os.environ.get(\"DFTRACER_LOG_FILE\"), data_dir=None, "
            "process_id=-1)\n"
            '        if os.environ.get("DFTRACER_ENABLE") == "1"\n        else dftracer.get_instance()\n    )\n'
            "    atexit.register(_dft_log.finalize)\n    try:\n        with ai:\n            print(os.getcwd())\n"
            "    finally:\n        _dft_log.finalize()\n",
        ),
    ]

    def run(self, ctx) -> None:
        graph = ctx.analysis("callgraph")
        if not graph.entries:
            ml = "ml" in ctx.analysis("frameworks").names
            ctx.report(Finding(self.id, "no program entry found (no `if __name__ == \"__main__\":` block, no console "
                               "script in pyproject.toml/setup.cfg/setup.py): nothing will initialize tracing, and "
                               "the traces of a run would stay empty; add an entry block to the script you run",
                               severity=Severity.WARNING if ml else Severity.INFO))
        guarded_targets = {e.function for e in graph.entries if e.kind == "main-guard" and e.function}
        for entry in graph.entries:
            if entry.kind == "console-script" and entry.function in guarded_targets:
                continue  # the module's own entry block already initializes around it
            sites = self._initializations(graph, entry)
            if len(sites) > 1:
                where = ", ".join(f"{r}:{line}" for r, line in sites)
                ctx.report(Finding(self.id, f"this program initializes dftracer {len(sites)} times ({where}); "
                                   "several initializations in one process corrupt the trace: keep one, "
                                   "at the entry", entry.relpath, entry.line, 0, Severity.ERROR))
            if sites:
                continue
            fs = graph.files[entry.relpath]
            names = ctx.names(fs.relpath)
            if entry.kind == "main-guard":
                guard = fs.main_guards[entry.guard]
                root = None if entry.function else names.node("")
                ctx.add_edit(fs.relpath, WrapBody(self.id, guard.line, "program entry: initialize and finalize",
                                                  guard.stmt, root, tuple(names.lifecycle_prologue()),
                                                  tuple(names.lifecycle_finally())))
            else:
                fn = graph.fn(entry.function)
                ctx.add_edit(fs.relpath, WrapBody(self.id, fn.line, f"console script {entry.name}: initialize "
                                                  "and finalize", fn.stmt, names.node(""),
                                                  tuple(names.lifecycle_prologue()), tuple(names.lifecycle_finally())))
                continue
            if entry.function:
                tfs, tfn = graph.functions[entry.function]
                if not has_region(tfs, tfn, ""):
                    ctx.add_edit(tfs.relpath, function_region(ctx.names(tfs.relpath), tfn, "", self.id,
                                                              "root region of the program"))

    @staticmethod
    def _initializations(graph, entry: Entry) -> list[tuple[str, int]]:
        """The ``initialize_log`` calls the program can run: everything reachable from the
        entry file's top level (its imports' top levels included) or from the entry function."""
        start = {fid(entry.relpath, MODULE_SCOPE)} | ({entry.function} if entry.function else set())
        reach = set(start)
        for s in start:
            reach |= graph.reachable(s)
        sites = []
        for function_id in sorted(reach):
            fs, fn = graph.functions[function_id]
            sites += [(fs.relpath, c.line) for c in fn.calls if is_initialize(fs, c.callee)]
        return sorted(set(sites))
