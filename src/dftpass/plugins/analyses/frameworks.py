"""The ``frameworks`` analysis: which ML frameworks, distribution and hardware the project uses.

Detection reads imports (from the file summaries, so it costs nothing extra) and a few call
names; the machine is consulted only for ROCm (``ROCM_PATH``, ``/opt/rocm``). The result gates
rules (``frameworks = ("pytorch",)``) and chooses dftracer's build flags
(``dftpass detect`` / ``dftpass install``).
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import attrs

from dftpass.core.passes import Pass, PassKind

#: framework -> import prefixes that show it is used
MARKERS: dict[str, tuple[str, ...]] = {
    "pytorch": ("torch",),
    "lightning": ("lightning", "pytorch_lightning"),
    "tensorflow": ("tensorflow", "keras", "tf_keras"),
    "jax": ("jax", "flax", "optax", "orbax"),
    "horovod": ("horovod",),
    "deepspeed": ("deepspeed",),
    "fsdp": ("torch.distributed.fsdp",),
    "mpi4py": ("mpi4py",),
    "h5py": ("h5py",),
    "dali": ("nvidia.dali",),
    "numba": ("numba",),
}
_DISTRIBUTED = ("torch.distributed", "horovod", "mpi4py", "deepspeed")
#: names whose use in the project's own code means it runs HIP (so dftracer needs HIP tracing)
_HIP_NAMES = ("torch.version.hip", "hip.", "hipify", "pyhip", "cupy.cuda.runtime.is_hip")
#: a HIP runtime call made through ctypes or a binding (``lib.hipMalloc(...)``)
_HIP_CALL = re.compile(r"^hip[A-Z]\w*$")


@attrs.define
class Detection:
    names: set[str] = attrs.field(factory=set)
    #: framework -> files that show it is used
    evidence: dict[str, list[str]] = attrs.field(factory=dict)
    distributed: bool = False
    has_dataloader: bool = False
    cuda: bool = False
    #: HIP/ROCm use in the project's own code (needs DFTRACER_ENABLE_HIP_TRACING)
    hip_in_code: bool = False
    #: a ROCm installation on this machine
    rocm_path: str | None = None

    def to_dict(self) -> dict:
        return {
            "frameworks": sorted(self.names - {"ml", "distributed", "rocm"}),
            "distributed": self.distributed,
            "has_dataloader": self.has_dataloader,
            "cuda": self.cuda,
            "hip_tracing_needed": self.hip_in_code,
            "rocm": {"found": self.rocm_path is not None, "path": self.rocm_path},
            "evidence": {k: v[:5] for k, v in sorted(self.evidence.items())},
        }


def _qualify(fs, text: str) -> str:
    head, _, rest = text.partition(".")
    base = fs.imports.get(head)
    return f"{base}.{rest}" if base and rest else (base or text)


def _rocm_path() -> str | None:
    path = os.environ.get("ROCM_PATH")
    if path and Path(path).is_dir():
        return path
    return "/opt/rocm" if Path("/opt/rocm").is_dir() else None


class FrameworksAnalysis(Pass):
    """Frameworks, distribution, data pipeline and GPU runtime the project uses."""

    id = "frameworks"
    title = "Framework detection"
    kind = PassKind.ANALYSIS

    def run(self, ctx) -> Detection:
        markers = {k: list(v) for k, v in MARKERS.items()}
        for fw, prefixes in ctx.manager.framework_markers().items():
            markers.setdefault(fw, []).extend(prefixes)
        # a library whose collectives a plugin teaches (``collective_functions``) is distributed
        # and so is one whose objects run them (``collective_objects``: Accelerate)
        objects = [prefix.split("(")[0].rsplit(".", 1)[0] for prefix in ctx.manager.knowledge["collective_objects"]]
        distributed = tuple(dict.fromkeys([*_DISTRIBUTED, *ctx.manager.knowledge["collective_functions"], *objects]))
        det = Detection()

        def seen(name: str, where: str) -> None:
            det.names.add(name)
            det.evidence.setdefault(name, []).append(where)

        for fs in ctx.project.summaries():
            for module in fs.imported_modules:
                if module.split(".")[0] in ("hip", "pyhip", "hipify"):
                    det.hip_in_code = True
                    seen("rocm", fs.relpath)
                for fw, prefixes in markers.items():
                    if any(module == p or module.startswith(p + ".") for p in prefixes):
                        seen(fw, fs.relpath)
                if any(module == p or module.startswith(p + ".") for p in distributed):
                    seen("distributed", fs.relpath)
            for text in fs.mentions:
                # a file that only does ``import torch`` and calls ``torch.distributed.all_reduce``
                # uses torch.distributed: the dotted text says so, qualified through the imports
                qualified = _qualify(fs, text)
                for fw, prefixes in markers.items():
                    if any(qualified.startswith(p + ".") for p in prefixes if "." in p):
                        seen(fw, fs.relpath)
                if any(qualified.startswith(p + ".") for p in distributed):
                    seen("distributed", fs.relpath)
                last = text.rsplit(".", 1)[-1]
                if last == "DataLoader":
                    det.has_dataloader = True
                elif last in ("DistributedDataParallel", "init_process_group"):
                    seen("distributed", fs.relpath)
                elif last == "cuda" or text.startswith(("torch.cuda.", "cuda.")):
                    det.cuda = True
                if text.startswith(_HIP_NAMES) or qualified.startswith(_HIP_NAMES) or _HIP_CALL.match(last):
                    det.hip_in_code = True
                    seen("rocm", fs.relpath)
        for rel in ctx.project.hip_sources[:1]:
            det.hip_in_code = True
            seen("rocm", rel)
        det.rocm_path = _rocm_path()
        det.distributed = "distributed" in det.names
        if det.names & {"pytorch", "lightning", "tensorflow", "jax"}:
            det.names.add("ml")  # the gate of rules that apply to any ML framework
        det.evidence = {k: sorted(set(v)) for k, v in det.evidence.items()}
        return det
