"""``dftpass optimize``: apply each mechanical proposal on a copy, measure it side by side, keep
what is faster and computes the same (:mod:`dftpass.optimize.loop`)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from dftpass.commands.common import UsageError, add_config_options, load


def output_options(args: argparse.Namespace, config, echo: bool):
    """What each repeat records of the program's outputs (``--mask``, ``--outputs``, ``--check``)."""
    from dftpass.runs.tracer import OutputOptions

    masks = tuple(config.get("outputs.mask")) + tuple(args.mask or ())
    return OutputOptions(masks=masks, places=tuple(args.outputs or ()), check=args.check, echo=echo)


def add_output_arguments(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("what is compared between runs")
    g.add_argument("--check", metavar="CMD", help="a shell command run after each repeat in the program's folder; "
                   "its exit code must be 0 and its output (masked) the same on both sides")
    g.add_argument("--outputs", action="append", metavar="PATH", help="a file or folder the program writes "
                   "results to, besides its working folder and the folders its arguments name; repeatable")
    g.add_argument("--mask", action="append", metavar="REGEX", help="more text of the standard output to "
                   "ignore (added to outputs.mask: timings, dates, addresses); repeatable")


def _command(args) -> list[str]:
    command = list(args.cmd)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError("dftpass optimize needs the program's command after --, e.g. "
                         "dftpass optimize SRC --workspace W -- python train.py")
    return command


def cmd_optimize(args: argparse.Namespace) -> int:
    from dftpass.optimize.loop import Optimizer, Options

    command = _command(args)
    if not args.project.is_dir():
        raise UsageError(f"{args.project}: not a folder")
    if args.repeat < 1:
        raise UsageError("--repeat must be at least 1")
    if args.traced < 1:
        raise UsageError("--traced must be at least 1")
    if not 2 <= args.min_repeat <= args.max_repeat:
        raise UsageError("--min-repeat must be at least 2 and at most --max-repeat (an interval needs 2 pairs)")
    config, manager = load(args)
    options = Options(source=args.project, workspace=args.workspace, command=command, repeats=args.repeat,
                      traced=args.traced, min_pairs=args.min_repeat, max_pairs=args.max_repeat,
                      warmups=args.warmup, max_attempts=args.max_attempts,
                      budget_s=args.budget * 60 if args.budget else None,
                      min_gain_pct=config.get("optimize.min-gain-pct"),
                      session_noise_pct=config.get("optimize.session-noise-pct"),
                      data_dir=args.data_dir or config.get("trace.data-dir"), aggregate=args.aggregate,
                      outputs=output_options(args, config, echo=False),
                      analysis={"cache": not args.no_cache, "jobs": args.jobs})
    doc = Optimizer(options, config, manager).run()
    if args.format == "json":
        print(json.dumps(doc, indent=2, default=str))
    else:
        print(summary(doc))
    # 1: nothing could be measured (the baseline failed or does not reproduce its own output)
    return 1 if doc["stopped"] and not doc["attempts"] and not doc["baseline"].get("output") else 0


def summary(doc: dict) -> str:
    """What optimize did, a line per attempt, and the headline: the kept changes together,
    untraced, against the original."""
    base = doc["baseline"]
    lines = []
    if base.get("wall_s") is not None:
        lines.append(f"baseline: {base['wall_s']:.2f} s (median of {base['repeats']} traced); "
                     f"{base.get('bottleneck') or 'no bottleneck named'}")
    for i, a in enumerate(doc["attempts"], 1):
        estimate = "" if a["estimate_pct"] is None else f"estimate {a['estimate_pct']:+.1f}%"
        lines.append(f"{i}. {a['proposal']}: {'KEPT' if a['kept'] else 'not kept'} ({estimate})")
        if a["change"]:
            lines.append(f"   change: {a['change']}")
        lines.append(f"   {a['why']}")
        if a.get("repeats"):
            lines.append(f"   runs: {a.get('traced_runs', 0)} traced (work, output), {2 * a['repeats']} untraced "
                         f"({a['repeats']} pairs; a fixed 5+5 would have made 10)")
    if not doc["attempts"] and not doc["stopped"]:
        lines.append("nothing to attempt: the analysis proposed no change")
    if doc["stopped"]:
        lines.append(f"stopped: {doc['stopped']}")
    confirmation = doc.get("confirmation")
    if confirmation:
        lines.append(confirmation.get("headline") or confirmation["text"])
    if doc["optimized"]:
        kept = ", ".join(doc["kept"]) or "none"
        lines.append(f"optimized copy: {doc['optimized']} (kept: {kept}); patch: {doc['patch']}")
    if doc["environment"]:
        lines.append("run it with: " + " ".join(f"{k}={v}" for k, v in doc["environment"].items()))
    over = doc["overhead"]
    lines.append(f"{doc['seconds']:.1f} s in all: {over['runs']} runs took {over['runs_s']:.1f} s, the rest "
                 f"(annotation, analysis, judging) {over['beyond_runs_s']:.1f} s")
    return "\n".join(lines)


def add_parser(sub) -> None:
    p = sub.add_parser("optimize", help="apply each proposal on a copy, run it, prove the output unchanged, "
                       "measure it, keep it or put it back")
    p.add_argument("project", type=Path, help="the program's source folder (never modified)")
    p.add_argument("--workspace", type=Path, default=Path("workspace"), help="where copies, runs and "
                   "optimize.json go (default: ./workspace; outside the project)")
    p.add_argument("--repeat", type=int, default=3, help="traced runs of the baseline: the diagnosis, and "
                   "whether the program gives the same output every time (default 3)")
    p.add_argument("--traced", type=int, default=1, help="traced runs a side of each attempt, which establish "
                   "the work and the output (default 1)")
    p.add_argument("--min-repeat", type=int, default=3, help="untraced pairs timed before a decision is read "
                   "(default 3)")
    p.add_argument("--max-repeat", type=int, default=16, help="the most untraced pairs an attempt adds while "
                   "the interval is undecided (default 16)")
    p.add_argument("--max-attempts", type=int, metavar="N", help="attempt at most N proposals")
    p.add_argument("--warmup", type=int, default=1, help="untimed runs before the baseline (default 1)")
    p.add_argument("--budget", type=float, metavar="MIN", help="minutes to spend; fewer pairs (at least "
                   "--min-repeat) or fewer attempts when they would not fit, said so")
    p.add_argument("--data-dir", help="DFTRACER_DATA_DIR of the traced runs")
    p.add_argument("--aggregate", action="store_true", help="dftracer's selective aggregation on in the traced "
                   "runs (off by default)")
    p.add_argument("--format", choices=("text", "json"), default="text", help="the summary's format")
    p.add_argument("--no-cache", action="store_true", help="read the traces without the trace cache")
    add_output_arguments(p)
    add_config_options(p)
    # "*" and not REMAINDER: the options may come after the project, and everything after "--" is the command
    p.add_argument("cmd", nargs="*", help="-- COMMAND ... (run in the copy's root folder)")
    p.set_defaults(func=cmd_optimize)
