"""``dftpass install``: install dftracer the way the ``install`` analysis decided.

(:mod:`dftpass.plugins.analyses.install`: the wheel, or a source build with
``DFTRACER_ENABLE_HIP_TRACING``/``_MPI``/``_HDF5=ON`` and ``ROCM_PATH``, plus what plugins
add.) With ``--dry-run`` the command is only printed.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path

from dftpass.commands.common import add_config_options, load


def cmd_install(args: argparse.Namespace) -> int:
    from dftpass.core.context import RunContext
    from dftpass.core.project import Project

    config, manager = load(args)
    project = Project.discover(args.project.resolve(), config.get("files.include"), config.exclude_globs())
    project.load(config.get("files.max-bytes"), jobs=config.get("run.jobs"))
    plan = RunContext(config, project, manager, "plan").analysis("install")
    print(f"dftracer for {args.project}: {plan.why()}", file=sys.stderr)
    print(plan.shown())
    if args.dry_run:
        return 0
    return 1 if subprocess.run(plan.command(), env={**os.environ, **plan.env()}).returncode else 0


def add_parser(sub) -> None:
    p = sub.add_parser("install", help="install dftracer with the build flags `detect` chose")
    p.add_argument("project", type=Path, nargs="?", default=Path("."),
                   help="the project's root folder (default: the current one)")
    p.add_argument("--dry-run", action="store_true", help="print the command, do not run it")
    add_config_options(p, rules=False)
    p.set_defaults(func=cmd_install)
