"""``dftpass analyze``, ``compare`` and ``report``.

The analysis modules (numpy, msgspec, matplotlib) are imported inside the commands, so the
annotation commands start without them.
"""

from __future__ import annotations

import argparse
import functools
import json
import sys
from pathlib import Path

from dftpass.core.console import Progress, emit
from dftpass.core.errors import EXIT_FINDINGS, EXIT_OK, EXIT_USAGE
from dftpass.commands.common import UsageError, add_config_options, add_format_options, load

ENGINES = ("local", "dask")  # dftpass.analysis.engine.ENGINES


def cmd_analyze(args: argparse.Namespace) -> int:
    from dftpass.analysis import lessons, render
    from dftpass.analysis.run import analyze_path, save

    config, manager = load(args)
    result = analyze_path(args.run, config, manager, **_engine_options(args))
    data = json.loads(json.dumps(result.to_dict(), default=str))
    saved = save(result)
    if saved:
        lessons.record(result.run.workspace, data)
    if args.format == "json":
        print(json.dumps(data, indent=2, default=str))
    elif args.format == "markdown":
        print(render.markdown(data))
    elif args.format == "sarif":
        print(_sarif(data, manager))
    else:
        emit(render.text(data, verbose=args.verbose > 0))
        if saved:
            print(f"\n(analysis saved to {saved})", file=sys.stderr)
    if not data["events"] and not data.get("baseline"):
        return EXIT_USAGE  # no trace events: nothing was analysed (the reason is printed above)
    return EXIT_FINDINGS if any(f["severity"] == "error" for f in data["findings"]) else EXIT_OK


def _engine_options(args) -> dict:
    """The options of an analysis (``jobs``: None takes ``run.jobs`` of the configuration)."""
    return {"project": getattr(args, "project", None), "engine": args.engine,
            "jobs": args.jobs, "scheduler": args.scheduler, "width_s": args.bucket_width,
            "cache": not getattr(args, "no_cache", False), "phase": getattr(args, "phase", None),
            "progress": Progress("reading traces")}  # a bar on a terminal, for many files


def _sarif(data: dict, manager) -> str:
    """The findings of an analysis as SARIF (a run's findings point at the run, or at the
    source line a cause names)."""
    from dftpass import __version__
    from dftpass.core.findings import Finding, Severity, render_sarif

    findings = [Finding(f["rule"], f["message"], f.get("path") or "", f.get("line") or 0, f.get("column") or 0,
                        Severity(f["severity"])) for f in data["findings"]]
    return render_sarif(findings, {c.id: c.title for c in manager.rules()}, __version__)


def cmd_compare(args: argparse.Namespace) -> int:
    from dftpass.analysis import render
    from dftpass.analysis.compare import compare
    from dftpass.analysis.run import load_or_analyze

    if len(args.runs) < 2:
        raise UsageError("compare needs at least two runs (the first is the baseline)")
    setup = functools.cache(lambda: load(args))  # the plugins load only if a run needs a fresh analysis
    analyses = [load_or_analyze(r, setup, **_engine_options(args)) for r in args.runs]
    result = compare(analyses).to_dict()
    base = Path(analyses[0]["path"])
    if result["proposal_impacts"] and (base / "run.json").is_file():  # a workspace's runs, not bare traces
        workspace = base.parent
        from dftpass.analysis.lessons import record_impacts

        record_impacts(workspace, result["proposal_impacts"])
    if args.format == "json":
        print(json.dumps(result, indent=2, default=str))
    elif args.format == "markdown":
        print(render.compare_markdown(result))
    else:
        emit(render.compare_text(result))
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from dftpass.analysis.report import build

    md, page, new = build(args.workspace, functools.cache(lambda: load(args)), **_engine_options(args))
    from dftpass.analysis.render import plural

    print(f"wrote {md} and {page}" + (f"; {plural(new, 'new lesson', 'new lessons')} in lessons.md" if new else ""),
          file=sys.stderr)
    return 0


def _add_engine_options(p) -> None:
    p.add_argument("--engine", choices=ENGINES, default="local", help="where traces are read (default: local)")
    p.add_argument("--scheduler", help="address of a running Dask scheduler (with --engine dask)")
    p.add_argument("--bucket-width", type=float, help="overlap bucket width in seconds (default: the shorter "
                   "class's median event)")
    p.add_argument("--no-cache", action="store_true", help="read every trace file again, and keep nothing in "
                   "<workspace>/.dftpass-cache")


def cmd_view(args: argparse.Namespace) -> int:
    """Write a run's traces as one Chrome trace-event file for Perfetto / chrome://tracing."""
    import os
    import tempfile

    from dftpass.runs.layout import LayoutError, RunDir, open_run
    from dftpass.traces.export import write_chrome_trace

    try:
        run = open_run(args.run)
        repeats = [r["repeat"] for r in run.record()["repeats"]]
    except LayoutError as exc:
        raise UsageError(str(exc)) from exc
    repeat = args.repeat or repeats[0]
    if repeat not in repeats:
        raise UsageError(f"{args.run}: no repeat {repeat} (it has {', '.join(map(str, repeats))})")
    # a run of a workspace keeps its view beside its traces; a folder dftpass did not make is
    # only read: the view goes to the current folder
    out = args.out or (run.path / f"trace-rep-{repeat}.json" if isinstance(run, RunDir)
                       else Path(f"{run.label}-trace.json"))
    out = out.resolve()
    fd, tmp = tempfile.mkstemp(dir=out.parent, prefix=f".{out.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            done = write_chrome_trace(run.trace_dirs(repeat), fh)
        os.replace(tmp, out)
    except BaseException:
        os.unlink(tmp)
        raise
    for problem in done.problems:
        print(f"  {problem}", file=sys.stderr)
    if not done.events:
        print(f"{args.run}: no trace events to show", file=sys.stderr)
        return EXIT_USAGE
    aggregated = f"; {done.aggregated_left_out} aggregated records left out" if done.aggregated_left_out else ""
    print(f"wrote {out} ({done.events} events from {done.processes} process"
          f"{'' if done.processes == 1 else 'es'}{aggregated})\n"
          "open it in Perfetto (https://ui.perfetto.dev, 'Open trace file') or in Chrome at chrome://tracing")
    return EXIT_OK


def add_parsers(sub) -> None:
    p = sub.add_parser("analyze", help="summary, categories, overlap, diagnosis and proposals of a traced run")
    p.add_argument("run", type=Path, help="a run folder of `dftpass trace` (or any folder/file of traces)")
    p.add_argument("--project", type=Path, help="the source the run came from (default: the command's folder)")
    p.add_argument("--phase", choices=("train", "evaluate", "test", "outside"),
                   help="judge this phase (default: the loop phase with the most time, training first)")
    _add_engine_options(p)
    add_format_options(p, ("text", "json", "markdown", "sarif"))
    add_config_options(p)
    p.set_defaults(func=cmd_analyze)

    p = sub.add_parser("compare", help="runs side by side: per metric the change %%, improved/regressed/neutral, "
                       "and a verdict")
    p.add_argument("runs", type=Path, nargs="+", help="run folders; the first is the baseline")
    _add_engine_options(p)
    add_format_options(p, ("text", "json", "markdown"), findings=False)
    add_config_options(p)
    p.set_defaults(func=cmd_compare, project=None)

    p = sub.add_parser("view", help="a run's traces as one Chrome trace-event file for Perfetto or "
                       "chrome://tracing")
    p.add_argument("run", type=Path, help="a run folder of `dftpass trace` (or any folder/file of traces)")
    p.add_argument("--repeat", type=int, help="which repeat (default: the first)")
    p.add_argument("--out", type=Path, help="the file to write (default: RUN/trace-rep-K.json for a run of "
                   "a workspace, ./LABEL-trace.json for a folder of traces)")
    add_config_options(p)
    p.set_defaults(func=cmd_view, project=None)

    p = sub.add_parser("report", help="report.md and a self-contained report.html for a workspace")
    p.add_argument("workspace", type=Path, nargs="?", default=Path("workspace"),
                   help="the workspace of `dftpass trace` (default: ./workspace)")
    _add_engine_options(p)
    add_config_options(p)
    p.set_defaults(func=cmd_report, project=None)
