"""`dftpass rules`, `explain`, `config --show`, `plugins` and `detect`."""

from __future__ import annotations

import shlex

from dftpass.core import versions

#: what install asks pip for: dftracer within the versions dftpass is tested with
WHEEL = shlex.quote("dftracer" + (versions.tested_range() or ""))

import json
import pytest

from tests.conftest import line_of


def test_rules_lists_every_rule_with_its_state(cli, tmp_path):
    r = cli("rules")
    assert r.code == 0
    lines = {line.split()[0]: line for line in r.out.splitlines()}
    assert {"ML-R1", "ML-R2", "ML-R3", "ML-R4", "ML-R6", "ML-R7", "ML-R8", "ML-R9"} <= set(lines)
    assert " on " in lines["ML-R4"] and "[pytorch]" in lines["ML-R4"]
    off = cli("rules", "--ignore", "ML-R4", "--json")
    assert {r["id"]: r["enabled"] for r in json.loads(off.out)}["ML-R4"] is False


def test_explain_prints_the_documentation_and_first_example(cli):
    r = cli("explain", "ML-R4")
    assert r.code == 0
    for section in ("What it does:", "Why:", "Example:", "Fix safety:", "Options:", "Before:", "After:"):
        assert section in r.out
    assert "ai.compute.step.start()" in r.out
    assert cli("explain", "ML-R99").code == 2


def test_config_show_prints_values_and_their_layers(cli, project):
    root = project({"dftpass.yaml": "rules:\n  ignore: [ML-R9]\n", "a.py": ""})
    r = cli("config", root, "--show", "--jobs", "2")
    assert r.code == 0
    assert "rules.ignore" in r.out and "['ML-R9']" in r.out and "dftpass.yaml:2" in r.out
    assert "run.jobs" in r.out and "# cli" in r.out
    assert "files.max-bytes" in r.out and "# default" in r.out


def test_plugins_lists_the_builtin_plugin_and_its_passes(cli):
    r = cli("plugins")
    assert r.code == 0
    assert r.out.startswith("builtin (built-in, dftpass.plugins.builtin): ")
    assert "ML-R1" in r.out and "callgraph" in r.out


def test_detect_reports_frameworks_entries_and_install_flags(cli, torch_basic, project):
    r = cli("detect", torch_basic, "--json")
    det = json.loads(r.out)
    assert det["frameworks"] == ["pytorch"] and det["has_dataloader"] is True
    guard = line_of(torch_basic / "train.py", '__name__ == "__main__"')
    assert det["entries"] == [f"train.py:{guard} (main-guard, runs main): train"]
    assert det["project"]["kind"] == "program"
    assert [(e["kind"], e["role"], e["instrumented"]) for e in det["project"]["entries"]] == [
        ("main-guard", "train", True)]
    assert det["install_flags"] == {}
    hpc = project({"a.py": "import mpi4py\nimport h5py\nimport torch\nprint(torch.version.hip)\n"}, name="hpc")
    det = json.loads(cli("detect", hpc, "--json").out)
    assert det["install_flags"] == {"DFTRACER_ENABLE_HIP_TRACING": "ON", "DFTRACER_ENABLE_MPI": "ON",
                                    "DFTRACER_ENABLE_HDF5": "ON"}
    assert det["hip_tracing_needed"] is True and "mpi4py" in det["frameworks"]


def test_install_chooses_the_wheel_or_a_source_build_with_flags(cli, torch_basic, project):
    r = cli("install", torch_basic, "--dry-run")
    assert r.code == 0 and r.out.strip().endswith(f"-m pip install {WHEEL}")
    hpc = project({"a.py": "import mpi4py\nimport h5py\n"}, name="hpc")
    r = cli("install", hpc, "--dry-run")
    assert r.out.startswith("DFTRACER_ENABLE_HDF5=ON DFTRACER_ENABLE_MPI=ON ")
    assert r.out.strip().endswith(f"-m pip install --no-binary dftracer {WHEEL}")
    assert "DFTRACER_ENABLE_MPI (MPI: a.py)" in r.err

BAD_CONFIGURATIONS = {
    "an unknown plugin to disable": ("plugins.disable=[nosuch]", "plugins.disable names 'nosuch'"),
    "an unknown rule": ("rules.select=[ML-R99]", "unknown rule 'ML-R99'"),
    "an unknown option": ("rules.options.ML-R6.nosuch=1", "ML-R6 has no option 'nosuch'"),
    "a bad value": ("overhead.budget=2", "'overhead.budget' must be a number in (0, 1)"),
}


@pytest.mark.parametrize("command", ["rules", "config", "plugins", "explain", "plan", "run", "validate", "detect"])
@pytest.mark.parametrize("bad", sorted(BAD_CONFIGURATIONS))
def test_every_command_refuses_a_bad_configuration_the_same_way(cli, project, tmp_path, command, bad):
    """Issue 41: `rules` exited 0 on what `plan` refused with exit 2."""
    setting, message = BAD_CONFIGURATIONS[bad]
    root = project({"train.py": "print(1)\n"})
    args = {"explain": ["explain", "ML-R6"], "run": ["run", root, "--out", tmp_path / "out"]}.get(
        command, [command] if command in ("rules", "config", "plugins") else [command, root])
    r = cli(*args, "--set", setting)
    assert r.code == 2, (r.out, r.err)
    assert message in r.err
