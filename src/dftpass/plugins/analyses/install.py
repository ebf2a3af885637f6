"""The ``install`` analysis: how dftracer must be installed for this project, and why.

The binary wheel (``pip install dftracer``) traces Python, POSIX and STDIO. A project whose
own code runs HIP kernels (``torch.version.hip``, ``hip``/``hipify`` modules, ``hipMalloc``
through ``ctypes``, cupy on ROCm, ``*.hip`` sources), MPI (mpi4py, Horovod) or HDF5 (h5py)
needs a source build with ``DFTRACER_ENABLE_HIP_TRACING`` / ``_MPI`` / ``_HDF5=ON`` (CMake
>= 3.24 and a compiler); a ROCm installation found on the machine goes in as ``ROCM_PATH``
(when it is not set) for a HIP build. Plugins add flags through ``dftpass_install_flags``
(a site's MPI, a vendor's profiler layer).

One decision, shared: ``dftpass detect`` shows it, ``dftpass install`` runs it, ``dftpass
plan`` says when the wheel will not do, and ML-R16 reads it to tell a missing HIP layer
from a project that has none.
"""

from __future__ import annotations

import os
import shlex
import sys

import attrs

from dftpass.core import emitter, versions
from dftpass.core.manager import hook_results
from dftpass.core.passes import Pass, PassKind

#: what each of dftpass's own flags is for, in the words ``install`` prints
WHAT = {emitter.BUILD_FLAG_HIP: "HIP code", emitter.BUILD_FLAG_MPI: "MPI", emitter.BUILD_FLAG_HDF5: "HDF5"}


@attrs.define
class InstallPlan:
    #: build flag -> why (the evidence, or the plugin that asked)
    flags: dict[str, str] = attrs.field(factory=dict)
    #: a ROCm installation to build against (a HIP build, when ROCM_PATH is not set)
    rocm_path: str | None = None

    @property
    def source_build(self) -> bool:
        return bool(self.flags)

    @property
    def hip(self) -> bool:
        return emitter.BUILD_FLAG_HIP in self.flags

    def env(self) -> dict[str, str]:
        """The environment of the install command: the flags, and ``ROCM_PATH`` for HIP."""
        out = {flag: "ON" for flag in self.flags}
        if self.hip and self.rocm_path and not os.environ.get("ROCM_PATH"):
            out["ROCM_PATH"] = self.rocm_path
        return out

    def command(self, python: str = sys.executable) -> list[str]:
        # within the versions dftpass is tested with (the ``trace`` extra), where it knows them
        wanted = emitter.PIP_PACKAGE + (versions.tested_range() or "")
        if self.source_build:
            return [python, "-m", "pip", "install", "--no-binary", emitter.PIP_PACKAGE, wanted]
        return [python, "-m", "pip", "install", wanted]

    def shown(self, python: str = sys.executable) -> str:
        """The command line as a shell would take it (environment first)."""
        return " ".join([*(f"{k}={v}" for k, v in sorted(self.env().items())), *map(shlex.quote, self.command(python))])

    def why(self) -> str:
        if not self.flags:
            return "no HIP, MPI or HDF5 use: the binary wheel"
        return ", ".join(f"{flag} ({reason})" for flag, reason in sorted(self.flags.items()))

    def to_dict(self) -> dict:
        return {"source_build": self.source_build, "flags": {k: "ON" for k in sorted(self.flags)},
                "why": dict(sorted(self.flags.items())), "env": self.env(), "command": self.command("python")}


class InstallAnalysis(Pass):
    """How dftracer must be installed: the wheel, or a source build with which flags."""

    id = "install"
    title = "dftracer install plan"
    kind = PassKind.ANALYSIS
    requires = ("frameworks",)

    def run(self, ctx) -> InstallPlan:
        det = ctx.analysis("frameworks")
        plan = InstallPlan(rocm_path=det.rocm_path)
        if det.hip_in_code:
            plan.flags[emitter.BUILD_FLAG_HIP] = _reason("HIP code", det.evidence.get("rocm"))
        mpi = sorted(set(det.evidence.get("mpi4py", [])) | set(det.evidence.get("horovod", [])))
        if mpi:
            plan.flags[emitter.BUILD_FLAG_MPI] = _reason("MPI", mpi)
        if "h5py" in det.names:
            plan.flags[emitter.BUILD_FLAG_HDF5] = _reason("HDF5", det.evidence.get("h5py"))
        for plugin, flags in hook_results(ctx.manager.pm, "dftpass_install_flags", detection=det):
            for flag, reason in flags.items():
                plan.flags.setdefault(flag, f"{reason} (plugin {plugin})")
        return plan


def _reason(what: str, files: list[str] | None) -> str:
    shown = ", ".join((files or [])[:3]) + (" ..." if files and len(files) > 3 else "")
    return f"{what}: {shown}" if shown else what
