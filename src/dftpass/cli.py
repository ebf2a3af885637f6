"""The ``dftpass`` command line: the parser, and the one place that turns errors into exit codes.

The subcommands live in :mod:`dftpass.commands`; this module only assembles them.
"""

from __future__ import annotations

import argparse
import json
import sys
import traceback
from pathlib import Path

from dftpass import __version__
from dftpass.core import log
from dftpass.commands.common import add_config_options, add_format_options, positive_int
from dftpass.core.errors import EXIT_FINDINGS, EXIT_INTERNAL, EXIT_INTERRUPTED, EXIT_OK, EXIT_USAGE, UserError
from dftpass.core.manager import PluginError, call_hook, make_plugin_manager


#: shown at the end of ``dftpass --help`` (plain text: argparse prints it as it is)
EXIT_CODES = """\
exit codes (the same for every command):
  0    success
  1    the command ran and found problems: findings of severity error (a file left
       untouched, a double initialization), or for validate anything still to annotate
  2    usage or configuration error (unknown option or key, bad value, pipeline cycle,
       missing requirement, output folder that is not ours, no trace events)
  3    internal error (a bug in dftpass or a plugin: please report it with the traceback);
       a pass that raised, with --strict-plugins (plugins.strict)
  4    plan, run, validate: a rule (or an analysis it needs) raised and was skipped; every
       other rule's edits were applied (one warning line says which, -v the traceback)
  130  interrupted
  trace passes the traced program's own exit code through when a repeat failed (1 when it
  could not be started or was killed by a signal)
"""


def _seconds(text: str) -> float | Path:
    """A step time in seconds, or a traced run (its folder) whose median step is read."""
    try:
        value = float(text)
    except ValueError:
        if Path(text).exists():
            return Path(text)
        value = -1.0
    if not value > 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds > 0 (0.001 is a 1 ms step) "
                                         "nor a traced run's folder")
    return value


def _add_pipeline_options(p: argparse.ArgumentParser, plugin_pm=None) -> None:
    p.add_argument("project", type=Path, help="the project's root folder")
    add_config_options(p)
    p.add_argument("--passes", help="run only these passes (comma-separated ids) and what they require")
    p.add_argument("--time-passes", action="store_true", help="print the time of each pass")
    p.add_argument("--step-time", type=_seconds, metavar="SECONDS|RUN",
                   help="the training step's time (e.g. 0.001), or a traced run (its folder) whose median "
                        "train step is read: coarsen the regions a step writes so that tracing costs at most "
                        "overhead.budget (3%%) of it")
    p.add_argument("--sample-every", type=positive_int, metavar="K",
                   help="write the regions of one training step in K (overhead.sample-every; the first steps and "
                        "each pass's first and last always): for steps too short for the budget")
    add_format_options(p, ("text", "json", "sarif"))
    if plugin_pm is not None:
        group = p.add_argument_group("plugin options")
        try:
            call_hook(plugin_pm, "dftpass_add_options", parser=group)
        except PluginError as exc:  # a plugin's options: not worth losing the command line for
            print(f"dftpass: warning: {exc}", file=sys.stderr)


def build_parser() -> argparse.ArgumentParser:
    from dftpass.commands import analysis, annotate, info, install, optimize, runs, strip

    # Plugins may add options to the annotation commands; they are found before parsing
    # (entry points only: `plugins.disable` of the configuration cannot be known yet).
    plugin_pm = make_plugin_manager()

    parser = argparse.ArgumentParser(
        prog="dftpass",
        description="Instrument ML/DL Python projects with dftracer, run them traced, and tell where the time goes.",
        epilog=EXIT_CODES, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"dftpass {__version__}")
    parser.add_argument("--log-format", choices=("console", "json"), default="console",
                        help="how log lines on stderr look (default: console)")
    parser.add_argument("-v", "--verbose", action="count", default=0, help="more detail on stderr (repeat for debug)")
    parser.add_argument("-q", "--quiet", action="store_true", help="warnings and errors only")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("run", help="annotate a project (writes a copy by default)")
    _add_pipeline_options(p, plugin_pm)
    where = p.add_mutually_exclusive_group()
    where.add_argument("--out", type=Path, help="where the annotated copy goes (default: PROJECT-dftpass)")
    where.add_argument("--in-place", action="store_true", help="edit the project's files (backups in .dftpass/backup)")
    p.add_argument("--diff", action="store_true", help="print the unified diff")
    p.set_defaults(func=annotate.cmd_run)

    p = sub.add_parser("plan", help="what would change and why, and the diff; writes nothing")
    _add_pipeline_options(p, plugin_pm)
    p.add_argument("--no-diff", action="store_true", help="list the changes without the diff")
    p.set_defaults(func=annotate.cmd_plan)

    p = sub.add_parser("validate", help="check an annotated project; exit code 1 if anything is missing")
    _add_pipeline_options(p, plugin_pm)
    p.set_defaults(func=annotate.cmd_validate)

    p = sub.add_parser("detect", help="frameworks, distribution, ROCm/HIP and dftracer's install flags")
    p.add_argument("project", type=Path, help="the project's root folder")
    add_config_options(p, rules=False)
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.set_defaults(func=info.cmd_detect)

    p = sub.add_parser("rules", help="list the rules")
    add_config_options(p, jobs=False)
    p.add_argument("--json", action="store_true", help="print one JSON document")
    p.add_argument("--markdown", action="store_true", help="the full catalogue, as in rules/catalogue.md")
    p.set_defaults(func=info.cmd_rules, project=None)

    p = sub.add_parser("explain", help="print a rule's documentation and examples")
    p.add_argument("rule", help="a rule id, e.g. ML-R4")
    add_config_options(p, rules=False, jobs=False)
    p.set_defaults(func=info.cmd_explain, project=None)

    p = sub.add_parser("config", help="every configuration value and the layer (file:line) it came from")
    p.add_argument("project", type=Path, nargs="?", default=Path("."),
                   help="the project whose configuration is resolved (default: the current folder)")
    add_config_options(p)
    # what the command always does; still accepted (hidden) for the scripts that spell it
    p.add_argument("--show", action="store_true", help=argparse.SUPPRESS)
    p.set_defaults(func=info.cmd_config)

    strip.add_parser(sub)
    runs.add_parser(sub)
    install.add_parser(sub)
    analysis.add_parsers(sub)
    optimize.add_parser(sub)

    p = sub.add_parser("plugins", help="the plugins and the passes each contributes")
    add_config_options(p, rules=False, jobs=False)
    p.set_defaults(func=info.cmd_plugins, project=None)

    return parser


def _bytes_through(stream) -> None:
    """A path whose name is not valid UTF-8 is printed as its own bytes, never a crash."""
    if hasattr(stream, "reconfigure"):
        stream.reconfigure(errors="surrogateescape")


def _run(args: argparse.Namespace) -> int:
    """The command, with the output convention applied: ``--output FILE`` gets what it prints
    (written atomically, once the command is done), ``--exit-zero`` turns "found problems"
    into 0."""
    import contextlib
    import io

    output = getattr(args, "output", None)
    if output is None:
        code = args.func(args)
    else:
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            code = args.func(args)
        from dftpass.core.writer import atomic_write

        target = Path(output).resolve()
        if not target.parent.is_dir():
            raise UserError(f"--output {output}: the folder {target.parent} does not exist")
        atomic_write(target, printed.getvalue().encode("utf-8"), target.parent)
        print(f"wrote {output}", file=sys.stderr)
    if getattr(args, "exit_zero", False) and code == EXIT_FINDINGS:
        return EXIT_OK
    return code


def main(argv: list[str] | None = None) -> int:
    _bytes_through(sys.stdout)
    _bytes_through(sys.stderr)
    parser = build_parser()
    argv = list(sys.argv[1:] if argv is None else argv)
    # A program's command follows "--" (trace, optimize). argparse's subcommands mishandle
    # options after a positional with "--" later on, so the command is split off first.
    command = argv[argv.index("--"):] if "--" in argv else None
    args = parser.parse_args(argv[: len(argv) - len(command)] if command else argv)
    if command is not None and hasattr(args, "cmd"):
        args.cmd = command
    log.configure(args.log_format, -1 if args.quiet else args.verbose)
    if not getattr(args, "func", None):
        parser.print_help()
        return EXIT_USAGE
    try:
        return _run(args)
    except UserError as exc:
        print(f"dftpass: error: {exc}", file=sys.stderr)
        return EXIT_USAGE
    except PluginError as exc:
        traceback.print_exc()
        print(f"dftpass: error (exit 3): {exc}", file=sys.stderr)
        if getattr(args, "format", "text") == "json":  # a machine reading stdout still gets a document
            print(json.dumps({"error": {"kind": "plugin", "message": str(exc)}, "findings": []}, indent=2))
        return EXIT_INTERNAL
    except KeyboardInterrupt:
        print("dftpass: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return EXIT_OK
    except Exception:  # noqa: BLE001 - last resort: say it is our bug, with the traceback
        traceback.print_exc()
        print("dftpass: internal error (exit 3): this is a bug in dftpass or a plugin; "
              "please report it with the traceback above", file=sys.stderr)
        return EXIT_INTERNAL


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
