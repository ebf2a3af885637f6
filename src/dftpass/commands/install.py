"""``dftpass install``: install dftracer with the build flags the project needs.

A project that runs HIP, MPI (mpi4py, Horovod) or HDF5 (h5py) code needs a source build of
dftracer with ``DFTRACER_ENABLE_HIP_TRACING``/``_MPI``/``_HDF5=ON`` (CMake >= 3.24 and a
compiler); any other project gets the binary wheel. With ``--dry-run`` the command is only
printed. A ROCm installation found on the machine is passed as ``ROCM_PATH`` when the
variable is not set (a source build with HIP tracing needs it).
"""

from __future__ import annotations

import argparse
import os
import shlex
import subprocess
import sys
from pathlib import Path

from dftpass.commands.common import add_config_options, load
from dftpass.core import emitter


def install_command(flags: dict[str, str], python: str = sys.executable) -> list[str]:
    if flags:
        return [python, "-m", "pip", "install", "--no-binary", emitter.PIP_PACKAGE, emitter.PIP_PACKAGE]
    return [python, "-m", "pip", "install", emitter.PIP_PACKAGE]


def cmd_install(args: argparse.Namespace) -> int:
    from dftpass.core.context import RunContext
    from dftpass.core.project import Project

    config, manager = load(args)
    project = Project.discover(args.project.resolve(), config.get("files.include"), config.exclude_globs())
    project.load(config.get("files.max-bytes"), jobs=config.get("run.jobs"))
    det = RunContext(config, project, manager, "plan").analysis("frameworks")
    env = dict(det.install_flags())
    if det.hip_in_code and det.rocm_path and not os.environ.get("ROCM_PATH"):
        env["ROCM_PATH"] = det.rocm_path
    command = install_command(det.install_flags())
    shown = " ".join([*(f"{k}={v}" for k, v in sorted(env.items())), *map(shlex.quote, command)])
    why = ", ".join(f"{k} ({'HIP code' if 'HIP' in k else 'MPI' if 'MPI' in k else 'HDF5'})"
                    for k in det.install_flags()) or "no HIP, MPI or HDF5 use: the binary wheel"
    print(f"dftracer for {args.project}: {why}", file=sys.stderr)
    print(shown)
    if args.dry_run:
        return 0
    return 1 if subprocess.run(command, env={**os.environ, **env}).returncode else 0


def add_parser(sub) -> None:
    p = sub.add_parser("install", help="install dftracer with the build flags `detect` chose")
    p.add_argument("project", type=Path, nargs="?", default=Path("."),
                   help="the project's root folder (default: the current one)")
    p.add_argument("--dry-run", action="store_true", help="print the command, do not run it")
    add_config_options(p, rules=False)
    p.set_defaults(func=cmd_install)
