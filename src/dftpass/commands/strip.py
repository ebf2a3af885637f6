"""``dftpass strip``: remove what dftpass added (``--all``: every dftracer region)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dftpass.commands.common import UsageError, add_config_options, load
from dftpass.core.findings import Finding, Severity, render_text
from dftpass.core.project import TOOL
from dftpass.core.provenance import Records
from dftpass.core.writer import STATE_DIR, strip_outputs


def add_parser(sub) -> None:
    p = sub.add_parser("strip", help="remove every annotation dftpass added (the exact way back)")
    p.add_argument("project", type=Path, help="an annotated project (a copy or in place)")
    where = p.add_mutually_exclusive_group()
    where.add_argument("--out", type=Path,
                       help="where the stripped copy goes (default: PROJECT-stripped)")
    where.add_argument("--in-place", action="store_true", help="edit the project's files (backups in .dftpass/backup)")
    p.add_argument("--all", action="store_true",
                   help="also remove dftracer regions dftpass did not write (hand annotations)")
    p.add_argument("--diff", action="store_true", help="print the unified diff")
    add_config_options(p, rules=False)
    p.set_defaults(func=cmd_strip)


def cmd_strip(args: argparse.Namespace) -> int:
    from dftpass.core.pipeline import AnnotateResult, FileResult

    config, manager = load(args)
    root = args.project.resolve()
    records = Records.read(root / STATE_DIR)
    if records is None and not args.all:
        raise UsageError(f"{root}: no record of what dftpass wrote here ({STATE_DIR}/annotations.json); "
                         "`--all` removes every dftracer annotation")
    project, summaries = _project(root, config, args.all)
    exported = _imported_names(summaries.values())
    findings = list(project.problems())
    files: dict[str, FileResult] = {}
    relpaths = sorted(set(records.files if records else ()) | (set(project.files) if args.all else set()))
    for rel in relpaths:
        path = root / rel
        if not path.is_file():
            findings.append(Finding(TOOL, "recorded as annotated, but the file is gone", rel,
                                    severity=Severity.WARNING))
            continue
        source = path.read_bytes()
        from dftpass.core.strip import strip_source  # libcst: only when there is something to strip

        fs = summaries.get(rel)
        result = strip_source(source, records.files.get(rel, []) if records else [], fs, args.all,
                              exported.get(fs.module, frozenset()) if fs is not None else frozenset())
        if result.error:
            findings.append(Finding(TOOL, result.error, rel, severity=Severity.ERROR))
        files[rel] = FileResult(rel, [], source, result.new, error=result.error)
    result = AnnotateResult("strip", root, [], files, findings, [], len(relpaths))
    where = strip_outputs(result, args.out, args.in_place)
    if args.diff:
        print(result.diff(), end="")
    if findings:
        print(render_text(findings), file=sys.stderr)
    print(f"{len(result.changed())} of {len(relpaths)} files stripped; written {where}", file=sys.stderr)
    return 1 if any(f.severity == Severity.ERROR for f in findings) else 0


def _project(root, config, strip_all: bool):
    """The project's files and, for ``--all``, their summaries with the dftracer names each
    one has from other modules (the call graph follows re-exports)."""
    from dftpass.core.callgraph import build_callgraph
    from dftpass.core.project import Project

    project = Project.discover(root, config.get("files.include"), config.exclude_globs())
    if not strip_all:
        return project, {}
    project.load(config.get("files.max-bytes"), jobs=config.get("run.jobs"))
    build_callgraph(project.summaries())
    return project, {f.relpath: f.summary for f in project.files.values() if f.summary is not None}


def _imported_names(summaries) -> dict[str, frozenset[str]]:
    """Module name -> the names other project files import from it (``from m import a``):
    strip keeps an import that binds one, or the importer breaks."""
    out: dict[str, set[str]] = {}
    for fs in summaries:
        for qualified in fs.imports.values():
            module, _, name = qualified.rpartition(".")
            if module and module != fs.module:
                out.setdefault(module, set()).add(name)
    return {m: frozenset(names) for m, names in out.items()}
