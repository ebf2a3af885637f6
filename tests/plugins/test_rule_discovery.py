"""Rule discovery: a rule file dropped into an area of ``dftpass/plugins/`` is found, listed
and explained with no other file touched; the framework plugins come through entry points."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

from tests.conftest import ROOT
from dftpass.core.config import Config, Source, Value
from dftpass.core.manager import PassManager, own_plugins


def _dftpass(tree, *args) -> subprocess.CompletedProcess:
    env = {**os.environ, "PYTHONPATH": str(tree), "DFTPASS_DISABLE_PLUGIN_AUTOLOAD": "1"}
    return subprocess.run([sys.executable, "-m", "dftpass", *args], capture_output=True, text=True, env=env,
                          cwd=tree, timeout=120)


def test_a_rule_file_dropped_into_an_area_is_found_listed_and_explained(tmp_path):
    tree = tmp_path / "src"
    shutil.copytree(ROOT / "src" / "dftpass", tree / "dftpass", ignore=shutil.ignore_patterns("__pycache__"))
    rule = (tree / "dftpass/plugins/compute/ml_r4_optimizer_step.py").read_text()
    assert 'id = "ML-R4"' in rule
    rule = rule.replace('id = "ML-R4"', 'id = "ML-R99"').replace('title = "Optimizer step"',
                                                               'title = "Optimizer step, again"')
    (tree / "dftpass/plugins/compute/ml_r99_optimizer_step_again.py").write_text(rule)

    where = _dftpass(tree, "-q", "plugins")
    assert where.returncode == 0, where.stderr
    listed = _dftpass(tree, "rules")
    assert listed.returncode == 0, listed.stderr
    assert "ML-R99" in listed.stdout and "Optimizer step, again" in listed.stdout
    explained = _dftpass(tree, "explain", "ML-R99")
    assert explained.returncode == 0, explained.stderr
    assert "Optimizer step, again" in explained.stdout and "What it does" in explained.stdout
    # the copy ran, not the installed tree
    origin = subprocess.run([sys.executable, "-c", "import dftpass; print(dftpass.__file__)"], capture_output=True,
                            text=True, env={**os.environ, "PYTHONPATH": str(tree)}, cwd=tree).stdout
    assert origin.strip().startswith(str(tree))


def test_the_framework_plugins_are_entry_points_of_dftpass_itself(monkeypatch):
    """They are not listed in the manager: pyproject.toml declares them as entry points, and
    they load even with third-party auto-loading off; ``plugins.disable`` blocks one."""
    assert set(own_plugins()) == {"jax", "lightning", "tensorflow"}
    monkeypatch.setenv("DFTPASS_DISABLE_PLUGIN_AUTOLOAD", "1")
    manager = PassManager(Config(values={}))
    assert {"ML-R12", "ML-R13", "ML-R14"} <= set(manager.registry)
    assert manager.provider["ML-R12"] == "lightning"
    blocked = PassManager(Config(values={"plugins.disable": Value(["lightning"], Source("test"))}))
    assert "ML-R12" not in blocked.registry and "ML-R13" in blocked.registry
