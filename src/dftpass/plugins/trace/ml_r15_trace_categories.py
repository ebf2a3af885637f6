"""ML-R15: the trace holds the categories the annotated code should produce."""

from __future__ import annotations

from dftpass.api import account, emitter as E, Finding, Pass, PassKind, root_problem, Severity

def _cat(node: str) -> str:
    return E.NODES[node][0]


#: category -> the rules that produce its events (what to look at when it is missing)
PRODUCERS = {
    _cat(""): "ML-R1", _cat("pipeline.train"): "ML-R2/ML-R3", _cat("compute"): "ML-R7/ML-R4",
    _cat("data.item"): "ML-R9", _cat("dataloader.fetch"): "ML-R6", _cat("checkpoint.capture"): "ML-R18",
    _cat("comm.barrier"): "ML-R5", _cat("device.transfer"): "ML-R17", _cat("other.log"): "ML-R27",
}
#: categories every annotated training program produces
ALWAYS = tuple(_cat(n) for n in ("", "pipeline.train", "compute", "data.item", "dataloader.fetch"))
#: io regions whose events must carry image_size, and the rule that emits them
IO_RULES = {_cat("data.io.read"): "ML-R25", _cat("checkpoint.io.read"): "ML-R26", _cat("other.io.read"): "ML-R27"}
CHECKPOINT = _cat("checkpoint.capture")

#: what a category's rule looks for, said when the annotated source has none of it
NOTHING_FOUND = {
    _cat("data.item"): "no function that reads one sample: a data set's __getitem__, a reader",
    _cat("dataloader.fetch"): "no batch loop over a loader or a batch function",
    _cat("pipeline.train"): "no function or loop that trains",
    _cat("compute"): "no forward, backward or optimizer step",
    _cat(""): "no entry that trains",
}


def _annotated(project) -> bool:
    """Whether any file of the project imports dftracer (the source explains the trace)."""
    return any(E.aliases(fs) for fs in project.summaries())


def categories_in_code(project) -> set[str]:
    """Categories of the ``ai`` nodes the project's (annotated) source uses."""
    found: set[str] = set()
    for fs in project.summaries():
        aliases = E.aliases(fs)
        if not aliases:
            continue
        texts = set(fs.mentions)
        for fn in fs.functions:
            texts.update(fn.decorators)
            texts.update(fn.withs)
            texts.update(layer.callee for loop in fn.loops for layer in loop.layers)
        for text in texts:
            node = E.recognize(fs, text)
            if not E.is_ai_path(node) or node == "update":
                continue
            if node == "":
                found.add(E.NODES[""][0])
                continue
            for path in sorted((p for p in E.NODES if p), key=len, reverse=True):
                if node == path or node.startswith(path + "."):
                    found.add(E.NODES[path][0])
                    break
    return found


def no_events_reason(summary) -> str:
    """"no trace events found", and the likeliest reason, from what the reader saw."""
    if not summary.files:
        found = f"; {len(summary.problems)} path(s) that could not be read (see trace problems)" \
            if summary.problems else ""
        return ("no trace events found: no trace files (*.pfw, *.pfw.gz)" + found + ". Tracing was off "
                f"({E.ENV_ENABLE}=1 switches it on; `dftpass trace` sets it), or no process initialized "
                "dftracer: is the program's entry annotated (`dftpass validate`)? An un-annotated baseline "
                "has no events by design: `compare` uses its wall time")
    kinds: dict[str, int] = {}
    for p in summary.problems:
        kinds[p.kind] = kinds.get(p.kind, 0) + 1
    said = ", ".join(f"{n} {k}" for k, n in sorted(kinds.items())) or "no problems reported"
    return (f"no trace events found: {len(summary.files)} trace file(s), none with events ({said}; see trace "
            "problems). Empty files mean the processes never called finalize() (killed, or exited by "
            "os._exit)")


class TraceCategories(Pass):
    """Check that a traced run has the event categories its annotations should produce.

    What it does:
        After ``dftpass trace``, reads the run's traces and checks for ``ai_root``,
        ``pipeline``, ``compute``, ``data`` and ``dataloader`` events, plus ``checkpoint``,
        ``comm``, ``device`` and ``other`` where the annotated source uses those nodes.
        ``data.io.read/write``, ``checkpoint.io.read/write`` and ``other.io.read/write``
        events must carry ``image_size`` (bytes moved; an open or close moves none). Each gap
        names the rule that should have produced it; when the run's annotated source is known
        and has no region of that category (a script with no data set), the finding says so, as
        information: the rule found nothing to annotate, and there is nothing to fix.
        A run made with ``--data-dir`` that traced no file I/O is reported too, and so is a
        root region that covers less than half of the traced span (misplaced: ML-R1 puts it
        around the whole body of the entry).

    Why:
        A category missing from the trace is a blind spot: no data events means the time
        to produce samples cannot be seen, no ``dataloader`` events means the data stall
        cannot. It is also how a broken annotation (a region never entered, a worker that
        wrote no trace) shows itself.

    Example:
        ``no 'data' events in the trace: the function that produces samples is not
        annotated, or the workers wrote no trace (ML-R9)``

    Fix safety:
        Report only. No ``checkpoint`` events is fine when checkpointing was off in that run
        (reported as a note).

    Options:
        None.
    """

    id = "ML-R15"
    title = "Trace categories"
    kind = PassKind.RUNTIME
    requires = ("traces",)
    tags = ("trace",)

    def run(self, ctx) -> None:
        run = ctx.analysis("traces")
        summary = run.primary.analysis.summary
        if not summary.events and (getattr(run.run, "record", dict)() or {}).get("baseline"):
            ctx.report(Finding(self.id, "a baseline: no trace events, by design (tracing off, or a program that "
                               "does not import dftracer); its wall time, outputs and resource use are the "
                               "reference `compare` measures the annotated runs against", run.run.label,
                               severity=Severity.INFO))
            return
        if not summary.events:
            ctx.report(Finding(self.id, no_events_reason(summary), run.run.label, severity=Severity.ERROR))
            return  # every category is missing: one finding says why, not one per category
        present = {cat for cat, _ in summary.by_key}
        in_code = categories_in_code(ctx.project) if ctx.project.files else set()
        expected = list(ALWAYS) + sorted(in_code - set(ALWAYS))
        where = run.run.label
        for cat in expected:
            if cat in present:
                continue
            if ctx.project.files and cat not in in_code and (_annotated(ctx.project)):
                # the source is known and annotated, and nothing in it makes this category: say
                # what dftpass did not find, never "not applied" (pytorch/examples' regression
                # has no data set: no function reads a sample, ML-R9 had nothing to annotate)
                ctx.report(Finding(self.id, f"no '{cat}' events in the trace, and no '{cat}' region in the "
                                   f"annotated source: {PRODUCERS.get(cat, '?')} found nothing to annotate "
                                   f"({NOTHING_FOUND.get(cat, 'nothing of this kind in the code')}); if the "
                                   "program has one, annotate it by hand", where, severity=Severity.INFO))
                continue
            severity = Severity.INFO if cat == CHECKPOINT else Severity.WARNING
            hint = " (fine if checkpointing was off in this run)" if cat == CHECKPOINT else ""
            ctx.report(Finding(self.id, f"no '{cat}' events in the trace{hint}: look at {PRODUCERS.get(cat, '?')}"
                               " (not applied, or its region never ran in a traced process)", where,
                               severity=severity))
        root = root_problem(account(run.primary.record, summary)) if E.NODES[""][0] in present else None
        if root:
            ctx.report(Finding(self.id, root, where, severity=Severity.WARNING))
        data_dir = run.primary.record.get("environment", {}).get(E.ENV_DATA_DIR)
        if data_dir and not any(cat in E.TRACE_SYSCALL_CATS for cat in present):
            ctx.report(Finding(self.id, f"{E.ENV_DATA_DIR}={data_dir} but no file I/O was traced: dftracer matches "
                               "its prefixes against the paths as the program opens them, so a relative path "
                               "(../data/x.npy) does not match an absolute prefix; give the program absolute "
                               "paths, or add the relative prefix (or 'all')", where, severity=Severity.WARNING))
        for (cat, name), stats in sorted(summary.by_key.items()):
            # only reads and writes move bytes: an open or a close has no size to carry
            if ".io." in name and name.rsplit(".", 1)[-1] in ("read", "write") and cat in IO_RULES \
                    and stats.count and not stats.bytes:
                ctx.report(Finding(self.id, f"{stats.count} '{name}' events carry no image_size: pass the bytes "
                                   f"moved with .update(image_size=...) after the operation ({IO_RULES[cat]})",
                                   where, severity=Severity.WARNING))
