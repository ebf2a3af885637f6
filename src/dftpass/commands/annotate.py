"""``dftpass run``, ``plan`` and ``validate``: the annotation commands."""

from __future__ import annotations

from typing import TYPE_CHECKING

import argparse
import sys

import structlog

from dftpass import __version__
from dftpass.commands.common import load
from dftpass.core.errors import EXIT_PASS_FAILED
from dftpass.core.findings import Finding, Severity, render_json, render_sarif, render_text
from dftpass.core.manager import natural_key
from dftpass.core.console import Col, Progress, emit, table
from dftpass.core.writer import write_copy, write_in_place

if TYPE_CHECKING:  # libcst is imported when a command annotates, not to build the parser
    from dftpass.core.pipeline import AnnotateResult

log = structlog.get_logger("dftpass")


def _annotate(args: argparse.Namespace, mode: str):
    """The command's result, and the pass manager that made it."""
    config, manager = load(args)
    project = args.project.resolve()
    passes = [p.strip() for p in args.passes.split(",") if p.strip()] if getattr(args, "passes", None) else None
    from dftpass.core.pipeline import annotate

    # a bar on a terminal only, and never under -q or for a machine-read format
    quiet = getattr(args, "quiet", False) or getattr(args, "format", "text") != "text"
    progress = Progress("reading", enabled=None if args.log_format == "console" and not quiet else False)
    try:
        result = annotate(project, config, mode, passes=passes, progress=progress, manager=manager)
    finally:
        progress.close()
    if args.time_passes:
        print_timings(result)
    return result, manager


def print_timings(result: AnnotateResult) -> None:
    total = sum(t.seconds for t in result.timings)
    rows = [[t.pass_id, f"{t.seconds * 1000:.1f}", f"{100 * t.seconds / total if total else 0:.1f}%",
             "" if t.status == "ran" else t.status] for t in result.timings]
    rows.append(["total", f"{total * 1000:.1f}", "", ""])
    print("pass timings:", file=sys.stderr)
    print("\n".join(table(["pass", Col("ms", True), Col("share", True), "status"], rows)), file=sys.stderr)


def _failure_findings(result: AnnotateResult) -> list[Finding]:
    """A pass that raised and was skipped, as the one warning line every format carries."""
    return [Finding(f.rule, f.line(), severity=Severity.WARNING) for f in result.failures]


def _findings_out(args: argparse.Namespace, result: AnnotateResult, manager) -> None:
    """Findings are each command's output: on stdout, for ``run``, ``plan`` and ``validate``
    alike (counts, hints and progress go to stderr). A pass that raised is one warning among
    them (its traceback on stderr with -v)."""
    findings = [*result.findings, *_failure_findings(result)]
    if args.verbose:
        for failure in result.failures:
            print(failure.traceback, end="", file=sys.stderr)
    if args.format == "json":
        print(render_json(findings))
    elif args.format == "sarif":
        print(render_sarif(findings, {c.id: c.title for c in manager.rules()}, __version__))
    elif findings:
        shown = [*_shown(args, result), *_failure_findings(result)]
        if shown:
            emit(render_text(shown))
        hidden = len(findings) - len(shown)
        if hidden:
            print(f"({plural(hidden, 'note')} not shown; -v shows them)", file=sys.stderr)


def _shown(args: argparse.Namespace, result: AnnotateResult):
    """Notes (severity info) are shown with -v only; problems always."""
    return [f for f in result.findings if args.verbose or f.severity != Severity.INFO]


def _exit_code(result: AnnotateResult, strict_warnings: bool = False) -> int:
    if result.failures:
        return EXIT_PASS_FAILED  # a pass raised and was skipped: the output lacks its edits
    bad = {Severity.ERROR, Severity.WARNING} if strict_warnings else {Severity.ERROR}
    return 1 if any(f.severity in bad for f in result.findings) else 0


def plural(n: int, word: str) -> str:
    """``1 problem``, ``2 problems``, ``0 files``."""
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _summary_line(result: AnnotateResult) -> str:
    changes = result.changes()
    rules = sorted({c[2] for c in changes}, key=natural_key)
    return (f"{len(result.changed())} of {plural(result.n_files, 'file')} changed, {plural(len(changes), 'edit')} "
            f"({', '.join(rules) or 'none'}); {plural(len(result.errors()), 'error')}")


def cmd_plan(args: argparse.Namespace) -> int:
    result, manager = _annotate(args, "plan")
    if args.format == "text":
        for rel, line, rule, why in result.changes():
            print(f"{rel}:{line}: {rule} {why}")
        if not args.no_diff and result.changed():
            print()
            print(result.diff(), end="")
        print(_summary_line(result), file=sys.stderr)
        for line in result.headlines:
            print(line, file=sys.stderr)
    _findings_out(args, result, manager)
    return _exit_code(result)


def cmd_run(args: argparse.Namespace) -> int:
    result, manager = _annotate(args, "run")
    if args.in_place:
        backup = write_in_place(result)
        where = f"in place (backups in {backup})" if backup else "in place (nothing to change)"
    else:
        out = (args.out or result.root.with_name(result.root.name + "-dftpass")).resolve()
        write_copy(result, out)
        where = f"to {out}"
    if args.diff:
        print(result.diff(), end="")
    _findings_out(args, result, manager)
    print(f"{_summary_line(result)}; written {where}", file=sys.stderr)
    for line in result.headlines:
        print(line, file=sys.stderr)
    return _exit_code(result)


def cmd_validate(args: argparse.Namespace) -> int:
    result, manager = _annotate(args, "validate")
    _findings_out(args, result, manager)
    if args.format == "text":
        missing = sum(1 for f in result.findings if f.severity != Severity.INFO)
        print(f"validate: {plural(missing, 'problem')} in {plural(result.n_files, 'file')}", file=sys.stderr)
    return _exit_code(result, strict_warnings=True)
