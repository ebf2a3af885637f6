"""The install decision (the ``install`` analysis): HIP, MPI and HDF5 projects get a source
build of dftracer with the right flags and environment; ``detect``, ``install``, ``plan``
and ML-R16 read the one decision. A real source build is not run (it needs CMake, a
compiler and ROCm); the exact command and environment are what is checked."""

from __future__ import annotations

import json
import shlex
import sys

import pytest

from dftpass.plugins.analyses import frameworks
from dftpass.core import versions

#: what install asks pip for: dftracer within the versions dftpass is tested with
WHEEL = shlex.quote("dftracer" + (versions.tested_range() or ""))
PIP_SOURCE = f"{sys.executable} -m pip install --no-binary dftracer {WHEEL}"

HIP_PROJECTS = {
    # PyTorch on a ROCm build: the program asks torch which runtime it has
    "torch-rocm": {"train.py": "import torch\n\nif torch.version.hip:\n    torch.backends.cudnn.benchmark = True\n"},
    # the HIP runtime called through ctypes
    "ctypes": {"kernels.py": "import ctypes\n\nhip = ctypes.CDLL('libamdhip64.so')\n\n\ndef alloc(n):\n"
                             "    ptr = ctypes.c_void_p()\n    hip.hipMalloc(ctypes.byref(ptr), n)\n    return ptr\n"},
    # cupy built for ROCm
    "cupy-rocm": {"ops.py": "import cupy\n\nON_AMD = cupy.cuda.runtime.is_hip\n"},
    # HIP kernels next to the Python code
    "hip-sources": {"train.py": "import torch\n", "kernels/add.hip": "__global__ void add() {}\n"},
}


@pytest.mark.parametrize("name", sorted(HIP_PROJECTS))
def test_a_project_that_runs_hip_gets_a_hip_tracing_build(cli, project, monkeypatch, tmp_path, name):
    rocm = tmp_path / "rocm"
    rocm.mkdir()
    monkeypatch.delenv("ROCM_PATH", raising=False)
    monkeypatch.setattr(frameworks, "_rocm_path", lambda: str(rocm))  # a ROCm installation on this machine
    root = project(HIP_PROJECTS[name], name=name)
    r = cli("install", root, "--dry-run")
    assert r.code == 0, r.err
    assert r.out.strip() == f"DFTRACER_ENABLE_HIP_TRACING=ON ROCM_PATH={rocm} {PIP_SOURCE}"
    assert "DFTRACER_ENABLE_HIP_TRACING (HIP code" in r.err
    det = json.loads(cli("detect", root, "--json").out)
    assert det["install"]["flags"] == {"DFTRACER_ENABLE_HIP_TRACING": "ON"}
    assert det["install"]["env"] == {"DFTRACER_ENABLE_HIP_TRACING": "ON", "ROCM_PATH": str(rocm)}
    assert det["hip_tracing_needed"] is True


def test_rocm_path_set_by_the_user_is_left_to_the_environment(cli, project, monkeypatch, tmp_path):
    monkeypatch.setenv("ROCM_PATH", str(tmp_path))
    root = project(HIP_PROJECTS["torch-rocm"])
    assert cli("install", root, "--dry-run").out.strip() == f"DFTRACER_ENABLE_HIP_TRACING=ON {PIP_SOURCE}"


@pytest.mark.parametrize("files, flags", [
    ({"train.py": "from mpi4py import MPI\n\nrank = MPI.COMM_WORLD.Get_rank()\n"}, ["DFTRACER_ENABLE_MPI"]),
    ({"train.py": "import horovod.torch as hvd\n\nhvd.init()\n"}, ["DFTRACER_ENABLE_MPI"]),
    ({"data.py": "import h5py\n\n\ndef read(p):\n    with h5py.File(p) as f:\n        return f['x'][:]\n"},
     ["DFTRACER_ENABLE_HDF5"]),
    ({"a.py": "import h5py\nfrom mpi4py import MPI\n"}, ["DFTRACER_ENABLE_HDF5", "DFTRACER_ENABLE_MPI"]),
], ids=["mpi4py", "horovod", "h5py", "both"])
def test_mpi_and_hdf5_projects_get_their_flags(cli, project, files, flags):
    root = project(files)
    r = cli("install", root, "--dry-run")
    assert r.out.strip() == " ".join([*(f"{f}=ON" for f in flags), PIP_SOURCE])
    for flag in flags:
        assert flag in r.err


def test_plan_says_when_the_wheel_will_not_do(cli, project):
    root = project({"train.py": "import h5py\nimport torch\n\n\ndef main():\n    pass\n\n\n"
                                "if __name__ == '__main__':\n    main()\n"})
    r = cli("plan", root, "--no-diff", "-v")
    assert "dftracer must be built from source for this project: DFTRACER_ENABLE_HDF5 (HDF5: train.py)" in r.out


def test_a_plain_project_gets_the_wheel_and_no_note(cli, torch_basic):
    assert cli("install", torch_basic, "--dry-run").out.strip() == f"{sys.executable} -m pip install {WHEEL}"
    assert "built from source" not in cli("plan", torch_basic, "--no-diff", "-v").out
