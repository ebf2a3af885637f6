"""The annotation flow behind ``dftpass run``, ``plan`` and ``validate``.

discover files -> summarize them (``--jobs`` workers) -> run the pass pipeline (analyses on
demand, rules queue edits) -> apply each file's edits in one libcst transform (workers
again, only for files with edits) -> results. Writing is :mod:`dftpass.core.writer`'s job;
this module never writes.
"""

from __future__ import annotations

import concurrent.futures as cf
import difflib
import gc
import os
import re
import time
from pathlib import Path
from typing import TYPE_CHECKING, Iterable

import attrs
import structlog

from dftpass.core.config import Config, effective_jobs
from dftpass.core.context import PassTiming, RunContext
from dftpass.core.edits import Edit, EditSet
from dftpass.core.emitter import plans_dynamo_backend, uses_dynamo_backend
from dftpass.core.findings import Finding, Severity
from dftpass.core.manager import PassManager, call_hook, natural_key
from dftpass.core.placement import lean_statement_regions, merge_adjacent_regions
from dftpass.core.console import Progress
from dftpass.core.provenance import record
from dftpass.core.project import TOOL, Project, pool_context

log = structlog.get_logger("dftpass")

if TYPE_CHECKING:
    from dftpass.core.apply import Applied


@attrs.define
class FileResult:
    relpath: str
    edits: list[Edit]
    original: bytes
    new: bytes | None
    encoding: str = "utf-8"
    error: str | None = None
    #: what dftpass wrote into the file, for ``dftpass strip`` (:mod:`dftpass.core.provenance`)
    provenance: dict | None = None

    @property
    def changed(self) -> bool:
        return self.new is not None and self.new != self.original

    def diff_bytes(self) -> bytes:
        """A unified diff of the file's bytes, whatever its encoding and its name's: for
        reading and review (``dftpass strip`` is the exact way back)."""
        if not self.changed:
            return b""
        name = os.fsencode(self.relpath)
        lines = difflib.diff_bytes(difflib.unified_diff, self.original.splitlines(keepends=True),
                                   self.new.splitlines(keepends=True), b"a/" + name, b"b/" + name)
        out = []
        for line in lines:
            if line.endswith(b"\n"):
                out.append(line)
            elif line.endswith(b"\r"):  # a CR-only line: a diff has no way to say so
                out.append(line + b"\n")
            else:
                out.append(line + b"\n\\ No newline at end of file\n")
        return b"".join(out)

    def diff(self) -> str:
        """The diff as text: its bytes as they are (``surrogateescape``), for printing."""
        return self.diff_bytes().decode("utf-8", "surrogateescape")


@attrs.define
class AnnotateResult:
    mode: str
    root: Path
    pipeline: list[str]
    files: dict[str, FileResult]
    findings: list[Finding]
    timings: list[PassTiming]
    n_files: int
    out: Path | None = None
    #: lines the command prints under its summary (the tracing budget's decision)
    headlines: list[str] = attrs.field(factory=list)
    #: the passes that raised and were skipped (:class:`dftpass.core.context.PassFailure`)
    failures: list = attrs.field(factory=list)

    def changed(self) -> list[FileResult]:
        return [f for f in self.files.values() if f.changed]

    def diff_bytes(self) -> bytes:
        return b"".join(f.diff_bytes() for f in sorted(self.files.values(), key=lambda f: f.relpath))

    def diff(self) -> str:
        return self.diff_bytes().decode("utf-8", "surrogateescape")

    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == Severity.ERROR]

    def edits(self) -> list[tuple[str, Edit]]:
        return [(rel, e) for rel, f in sorted(self.files.items()) for e in f.edits]

    def changes(self) -> list[tuple[str, int, str, str]]:
        """One ``(file, line, rule, why)`` per change a reader would name, sorted by file and
        line: a region's two halves (its start before a statement, its stop after it) are
        two edits but one change."""
        unique = {(rel, e.line, e.rule, e.why) for rel, e in self.edits()}
        return sorted(unique, key=lambda c: (c[0], c[1], natural_key(c[2]), c[3]))


def _apply_one(root: str, relpath: str, edit_set: EditSet, anchor: int) -> "Applied":
    from dftpass.core.apply import apply_edits

    source = (Path(root) / relpath).read_bytes()
    return apply_edits(relpath, source, edit_set, anchor)


def _apply_chunk(root: str, items: list[tuple[str, EditSet, int]]) -> list["Applied"]:
    return [_apply_one(root, rel, es, anchor) for rel, es, anchor in items]


def _needed_imports(ctx: RunContext, edit_set: EditSet) -> None:
    """Import only what the queued code mentions (a name asked for by a dropped edit is not)."""
    names = ctx.names(edit_set.relpath)
    code = "\n".join(_edit_code(e) for e in edit_set.edits)
    api, std = names.imports_needed()
    edit_set.api_imports = [(n, a) for n, a in api if re.search(rf"\b{re.escape(a)}\b", code)]
    edit_set.std_imports = [(m, a) for m, a in std if re.search(rf"\b{re.escape(a)}\b", code)]


def _edit_code(edit: Edit) -> str:
    parts = []
    for field in ("code", "with_item", "callee", "item"):
        value = getattr(edit, field, None)
        if value:
            parts.append(value)
    parts.extend(getattr(edit, "prologue", ()))
    parts.extend(getattr(edit, "finally_", ()))
    parts.extend(getattr(edit, "tail", ()))
    return "\n".join(parts)


def annotate(root: Path, config: Config, mode: str = "plan", *, passes: Iterable[str] | None = None,
             jobs: int | None = None, progress: Progress | None = None,
             manager: PassManager | None = None) -> AnnotateResult:
    """Plan (and, unless ``mode == "validate"``, apply in memory) the annotation of ``root``.

    The cyclic garbage collector is off while this runs (and in the worker processes, which
    fork from here): parsing allocates millions of small objects without cycles (AST nodes,
    summaries, libcst nodes), and the collector's passes over them were a third of the time
    (keras, 625 files: plan 5.0 s -> 3.4 s; docs/performance.md). Memory is freed by
    reference counting as before."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        return _annotate(root, config, mode, passes, jobs, progress, manager)
    finally:
        if collecting:
            gc.enable()


def _annotate(root: Path, config: Config, mode: str, passes: Iterable[str] | None, jobs: int | None,
              progress: Progress | None, manager: PassManager | None) -> AnnotateResult:
    jobs = jobs if jobs is not None else config.get("run.jobs")
    manager = manager or PassManager(config)
    manager.check_config()

    start = time.perf_counter()
    project = Project.discover(root, config.get("files.include"), config.exclude_globs())
    if progress is not None:
        progress.start(len(project.files))
    jobs = effective_jobs(jobs, len(project.files))
    project.load(config.get("files.max-bytes"), jobs=jobs, progress=progress)
    ctx = RunContext(config, project, manager, mode)
    ctx.timings.append(PassTiming("(read + parse + summarize)", time.perf_counter() - start))
    ctx.findings.extend(project.problems())
    if not project.files:  # almost always the wrong folder, or include/exclude globs that miss
        ctx.findings.append(Finding(TOOL, "no Python files to read here (files.include and files.exclude decide "
                                    "which are read; `dftpass config` shows them)", "", 0, 0, Severity.WARNING))
    log.info("project read", root=str(project.root), files=len(project.files),
             unreadable=len(ctx.findings), seconds=round(time.perf_counter() - start, 3), jobs=jobs)

    pipeline = manager.order(manager.selected_rules(passes))
    log.info("pipeline", passes=pipeline)
    manager.run(ctx, pipeline)
    if mode != "validate" and "install" in manager.registry and project.files:
        install = ctx.analysis("install")
        if install.source_build:  # the wheel would not trace what the project runs
            ctx.findings.append(Finding(TOOL, f"dftracer must be built from source for this project: {install.why()}"
                                        "; `dftpass install` runs the build", "", 0, 0, Severity.INFO))

    files: dict[str, FileResult] = {}
    for relpath, edit_set in sorted(ctx.edit_sets.items()):
        if mode != "validate" and ctx.config.get("emit.lean-regions"):
            merge_adjacent_regions(edit_set)
            lean_statement_regions(edit_set, ctx.summary(relpath))
        _needed_imports(ctx, edit_set)
    # the prelude stubs dftracer's Dynamo module: not in a project that uses its backend,
    # written already or planned now (ML-R29)
    prelude = ctx.config.get("emit.skip-dynamo-import") and not any(
        uses_dynamo_backend(fs) for fs in ctx.project.summaries()) and not any(
        plans_dynamo_backend(es.api_imports) for es in ctx.edit_sets.values())
    for edit_set in ctx.edit_sets.values():
        # once per process: in the file that starts tracing, whose dftracer import runs first
        edit_set.import_prelude = prelude and edit_set.starts_tracing

    if mode == "validate":
        for relpath, edit_set in sorted(ctx.edit_sets.items()):
            said = set()  # a region's start and stop are one thing missing, said once
            for e in edit_set.edits:
                if (e.line, e.rule, e.why) in said:
                    continue
                said.add((e.line, e.rule, e.why))
                ctx.findings.append(Finding(e.rule, f"not annotated: {e.why}", relpath, e.line, 0,
                                            Severity.WARNING, fix=type(e).__name__))
            files[relpath] = FileResult(relpath, list(edit_set.edits), b"", None)
    else:
        start = time.perf_counter()
        items = []
        limit = config.get("files.max-rewrite-bytes")
        for rel, es in ctx.edit_sets.items():
            if not es:
                continue
            if project.files[rel].size > limit:
                # libcst holds ~800 bytes per byte of a heavily edited file (1 MB, 60k edits: 838 MB)
                ctx.findings.append(Finding(TOOL, f"{len(es.edits)} edits not applied: the file is "
                                            f"{project.files[rel].size} bytes, above files.max-rewrite-bytes "
                                            f"({limit}); left untouched", rel, 0, 0, Severity.ERROR))
                files[rel] = FileResult(rel, list(es.edits), b"", None, error="too large to rewrite")
                continue
            items.append((rel, es, project.files[rel].summary.import_anchor))
        for applied in _apply_all(str(project.root), items, jobs):
            edit_set = ctx.edit_sets[applied.relpath]
            files[applied.relpath] = FileResult(applied.relpath, list(edit_set.edits), applied.original,
                                                applied.new, applied.encoding, applied.error,
                                                None if applied.error else record(ctx.summary(applied.relpath),
                                                                                  edit_set))
            if applied.error:
                log.warning("file left untouched", path=applied.relpath, reason=applied.error)
                ctx.findings.append(Finding(TOOL, applied.error, applied.relpath, 0, 0, Severity.ERROR))
        ctx.timings.append(PassTiming("(apply edits: libcst)", time.perf_counter() - start))

    result = AnnotateResult(mode, project.root, pipeline, files, ctx.findings, ctx.timings, len(project.files),
                            failures=ctx.failures)
    budget = ctx.cached("overhead")
    if budget is not None and budget.describe():
        result.headlines.append(budget.describe())
    log.info("planned", mode=mode, edits=len(result.edits()), files_changed=len(result.changed()),
             findings=len(result.findings))
    call_hook(manager.pm, "dftpass_run_finished", ctx=ctx, result=result)
    return result


def _apply_all(root: str, items: list[tuple[str, EditSet, int]], jobs: int) -> Iterable["Applied"]:
    # libcst is imported only when some file has edits (it costs ~0.15 s), before forking
    from dftpass.core import rewrite  # noqa: F401

    if jobs <= 1 or len(items) < 2:
        return [_apply_one(root, rel, es, anchor) for rel, es, anchor in items]
    # biggest files first, one file per task: libcst's cost is per byte and files vary 100x
    items = sorted(items, key=lambda it: -os.path.getsize(os.path.join(root, it[0])))
    size = max(1, min(16, len(items) // (jobs * 8)))
    chunks = [items[i:i + size] for i in range(0, len(items), size)]
    with cf.ProcessPoolExecutor(max_workers=jobs, mp_context=pool_context()) as pool:
        return [a for chunk in pool.map(_apply_chunk, [root] * len(chunks), chunks) for a in chunk]
