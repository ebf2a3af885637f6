"""``dftpass trace``: run a command with tracing into the canonical workspace layout."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dftpass.commands.common import UsageError, add_config_options, load, positive_int



def cmd_trace(args: argparse.Namespace) -> int:
    from dftpass.runs.layout import LayoutError
    from dftpass.runs.tracer import trace

    command = list(args.cmd)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError("dftpass trace needs a command after --, e.g. dftpass trace --label base -- python train.py")
    config, _ = load(args)
    data_dir = args.data_dir or config.get("trace.data-dir")
    failed = 0
    exit_code = 0  # the traced program's own, passed through

    def show(rep: dict) -> None:
        nonlocal failed, exit_code
        files = rep["trace_files"]
        roles = {}
        for f in files:
            role = f["name"].rsplit("-", 1)[-1].split(".")[0]
            roles[role] = roles.get(role, 0) + 1
        kinds = ", ".join(f"{n} {r}" for r, n in sorted(roles.items())) or "none"
        empty = len(rep["empty_trace_files"])
        status = "ok" if rep["exit_code"] == 0 else f"exit code {rep['exit_code']}"
        failed += rep["exit_code"] != 0
        if rep["exit_code"] != 0 and not exit_code:
            # a signal's negative code, or a command that could not start: 1
            exit_code = rep["exit_code"] if 0 < rep["exit_code"] < 256 and not rep.get("launch_error") else 1
        print(f"{args.label} repeat {rep['repeat']}: {status}, {rep['wall_s']:.2f} s, "
              f"{len(files)} trace files ({kinds})" + (f", {empty} EMPTY (no finalize?)" if empty else ""),
              file=sys.stderr)
        if rep.get("launch_error"):
            print(f"  {rep['launch_error']}", file=sys.stderr)
        for problem in rep.get("problems", []):
            print(f"  warning: {problem}", file=sys.stderr)

    from dftpass.commands.optimize import output_options

    try:
        run = trace(args.workspace, args.label, command, cwd=args.cwd, data_dir=data_dir, repeats=args.repeat,
                    append=args.append, chunk_mb=config.get("trace.chunk-mb"), compact=not args.no_compact,
                    applies=args.applies, on_repeat=show, keep=output_options(args, config, echo=True),
                    baseline=True if args.baseline else None, aggregate=args.aggregate,
                    sample_every=args.sample_every or config.get("overhead.sample-every"))
    except LayoutError as exc:
        raise UsageError(str(exc)) from exc
    if run.record().get("baseline"):
        print(f"{args.label}: a baseline (tracing off, or a program that does not import dftracer): its wall "
              "time, outputs and resource use are the reference `compare` measures the annotated runs against",
              file=sys.stderr)
    print(f"run recorded in {run.run_file}", file=sys.stderr)
    return exit_code if failed else 0


def add_parser(sub) -> None:
    p = sub.add_parser("trace", help="run a command with dftracer on, into <workspace>/<label>/traces")
    p.add_argument("--label", required=True, help="the run's name: baseline, annotated, opt1, ...")
    p.add_argument("--baseline", action="store_true",
                   help="the reference run: the program with tracing off (the original, or the annotated copy "
                        "switched off); a program that does not import dftracer is recorded as one anyway")
    p.add_argument("--workspace", type=Path, default=Path("workspace"), help="default: ./workspace")
    p.add_argument("--cwd", type=Path, help="working directory of the command (default: the current one)")
    p.add_argument("--data-dir", help="DFTRACER_DATA_DIR: ':'-separated prefixes whose file I/O is traced, or 'all'")
    p.add_argument("--repeat", type=int, default=1, help="run N times (separate repeats of one label)")
    p.add_argument("--append", action="store_true", help="add repeats to an existing label instead of replacing it")
    p.add_argument("--no-compact", action="store_true", help="keep only the raw traces")
    p.add_argument("--aggregate", action="store_true", help="dftracer's selective aggregation on (hot events "
                   "folded into counts and sums); off by default, whatever the environment says")
    p.add_argument("--sample-every", type=positive_int, metavar="K", help="trace the regions of one training step in K "
                   "(over the program's own k; overhead.sample-every); 1: every step")
    p.add_argument("--applies", action="append", default=[], metavar="PROPOSAL",
                   help="the proposal id(s) this run applies (compare then measures their real impact)")
    from dftpass.commands.optimize import add_output_arguments

    add_output_arguments(p)
    add_config_options(p, rules=False, jobs=False)
    p.add_argument("cmd", nargs=argparse.REMAINDER, help="-- COMMAND ...")
    p.set_defaults(func=cmd_trace, project=None)
