"""What every subcommand shares: the configuration options, :func:`load`, :class:`UsageError`.

The command line (:mod:`dftpass.cli`) sits on top of this module; nothing here imports it.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from dftpass.core.config import cli_overrides, load_config
from dftpass.core.errors import UserError
from dftpass.core.manager import PassManager


class UsageError(UserError):
    """A command-line mistake; exit code 2."""


def add_config_options(p: argparse.ArgumentParser, *, rules: bool = True, jobs: bool = True) -> None:
    """The configuration options, and ``-v``/``-q``. ``rules=False`` and ``jobs=False`` leave
    out ``--select``/``--ignore`` and ``--jobs`` where they would change nothing."""
    g = p.add_argument_group("configuration")
    g.add_argument("--config", type=Path, help="project configuration file (default: dftpass.yaml or "
                   "[tool.dftpass] in the project's pyproject.toml)")
    if rules:
        g.add_argument("--select", action="append", metavar="RULES",
                       help="rules to run (ids, globs like ML-R2*, tag:NAME); repeatable")
        g.add_argument("--ignore", action="append", metavar="RULES", help="rules to switch off; repeatable")
    g.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                   help="any configuration key, e.g. --set files.max-bytes=500000; repeatable")
    if jobs:
        g.add_argument("--jobs", "-j", type=int, help="worker processes for per-file work (default: the cores, at "
                       "most 8, for a project of 64 files or more; 1 below)")
    g.add_argument("--trust-project-plugins", action="store_true",
                   help="let the project's configuration load plugin modules (plugins.load) from its tree")
    g.add_argument("--strict-plugins", action="store_true",
                   help="a pass that raises stops the command (exit 3) instead of being skipped (exit 4): "
                        "plugins.strict, for CI")
    add_output_options(g)


def add_output_options(p) -> None:
    """``-v``/``-q`` after the command name too (``dftpass run -v``), as the hints suggest.

    ``SUPPRESS`` keeps a subcommand's default from overwriting what was given before the
    command name."""
    p.add_argument("-v", "--verbose", action="count", default=argparse.SUPPRESS,
                   help="more detail on stderr (repeat for debug)")
    p.add_argument("-q", "--quiet", action="store_true", default=argparse.SUPPRESS, help="warnings and errors only")


def positive_int(text: str) -> int:
    """An option's integer >= 1 (``--sample-every K``)."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer >= 1")
    return value


def step_time_of(given: float | Path, measured: dict | None = None) -> float:
    """``--step-time``: seconds as given, or the median train step of a traced run (said on
    stderr: the plan's budget rests on it). A sampled run says more: its untraced steps'
    mean is the step without tracing, and a traced step's excess over it is what tracing a
    step costs in situ, put in ``measured`` (``overhead.traced-step-us``)."""
    if not isinstance(given, Path):
        return given
    from dftpass.analysis.steps import median_step
    from dftpass.runs.layout import LayoutError, open_run
    from dftpass.traces import summarize

    try:
        dirs = open_run(given).trace_dirs()
        sampling = summarize(dirs).sampling
        if sampling is not None and sampling.sampled:
            untraced = sampling.steps - sampling.traced
            plain = ((sampling.wait_ns + sampling.body_ns) - (sampling.wait_traced_ns + sampling.body_traced_ns)) / untraced
            traced = (sampling.wait_traced_ns + sampling.body_traced_ns) / sampling.traced
            seconds = float(f"{plain / 1e9:.3g}")
            cost_us = max(0.0, (traced - plain) / 1e3)
            if measured is not None:
                measured["overhead.traced-step-us"] = round(cost_us, 1)
            print(f"step time: {seconds * 1e3:g} ms, the mean of the {untraced} untraced steps of {given}; a traced "
                  f"step cost {cost_us:.0f} µs more ({sampling.traced} traced)", file=sys.stderr)
            return seconds
        found = median_step(dirs)
    except (LayoutError, OSError, ValueError) as exc:
        raise UserError(f"--step-time {given}: {exc}") from exc
    if found is None:
        raise UserError(f"--step-time {given}: its traces show no training step (no wrapped batch loop); "
                        "give the step time in seconds")
    seconds, count, phase = found
    seconds = float(f"{seconds:.3g}")  # three digits: a plan should not hang on the noise of one run
    print(f"step time: {seconds * 1e3:g} ms, the median of {count} {phase} steps traced in {given}",
          file=sys.stderr)
    return seconds


def load(args: argparse.Namespace):
    """The resolved configuration and a pass manager for a command's arguments."""
    sets = list(getattr(args, "set", []) or [])
    flags: list[tuple[str, object, str]] = []  # errors name the option the user typed
    if getattr(args, "step_time", None) is not None:
        measured: dict = {}
        flags.append(("overhead.step-time", step_time_of(args.step_time, measured), "--step-time"))
        flags += [(key, value, "--step-time") for key, value in measured.items()]
    if getattr(args, "sample_every", None) is not None:
        flags.append(("overhead.sample-every", args.sample_every, "--sample-every"))
    if getattr(args, "trust_project_plugins", False):
        sets.append("plugins.trust-project=true")
    if getattr(args, "strict_plugins", False):
        flags.append(("plugins.strict", True, "--strict-plugins"))
    overrides = cli_overrides(getattr(args, "select", None), getattr(args, "ignore", None),
                              getattr(args, "jobs", None), sets, flags)
    project = getattr(args, "project", None)
    if project is not None and not project.is_dir():
        raise UsageError(f"{project}: not a folder")
    config = load_config(project, overrides, getattr(args, "config", None), cli_args=args)
    manager = PassManager(config)
    for failure in manager.failures:
        print(f"dftpass: warning: {failure}", file=sys.stderr)
    # every command refuses the same bad configuration the same way (unknown rules, plugins,
    # options: exit 2), not only the ones that run passes (issue 41)
    manager.check_config()
    return config, manager


def add_format_options(p: argparse.ArgumentParser, formats: tuple[str, ...], *, findings: bool = True) -> None:
    """The one output convention: ``--format`` (the ones that make sense for the command),
    ``--output FILE`` (what would be printed, written atomically), ``--exit-zero`` (exit 0
    when the command ran, whatever it found). The older ``--json``/``--markdown`` still work."""
    g = p.add_argument_group("output")
    g.add_argument("--format", choices=formats, default=formats[0], help=f"what to print (default: {formats[0]})")
    g.add_argument("--output", type=Path, metavar="FILE", help="write it to FILE instead of the terminal")
    if findings:
        g.add_argument("--exit-zero", action="store_true",
                       help="exit 0 when the command ran, even when it found errors (usage errors still exit 2)")
    for name in ("json", "markdown"):
        if name in formats:
            g.add_argument(f"--{name}", dest="format", action="store_const", const=name, help=argparse.SUPPRESS)
