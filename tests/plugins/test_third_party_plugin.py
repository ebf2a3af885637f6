"""A real third-party plugin package, installed with pip, discovered through the entry point."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import FIXTURES

PLUGIN = FIXTURES / "plugins" / "dftpass_example_plugin"


@pytest.fixture(scope="module")
def plugin_site(tmp_path_factory) -> Path:
    """The example plugin installed (by pip, from its source) into a folder of its own."""
    target = tmp_path_factory.mktemp("site")
    build = tmp_path_factory.mktemp("build")
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
         "--target", str(target), str(PLUGIN)],
        check=True, cwd=build, env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"},
    )
    assert list(target.glob("dftpass_example_plugin-*.dist-info"))
    return target


def dftpass(site: Path, *args, env=None, cwd=None) -> subprocess.CompletedProcess:
    environ = {**os.environ, "PYTHONPATH": str(site), **(env or {})}
    return subprocess.run([sys.executable, "-m", "dftpass", *map(str, args)], capture_output=True, text=True,
                          env=environ, cwd=cwd)


def test_the_plugin_is_discovered_and_listed(plugin_site):
    r = dftpass(plugin_site, "plugins")
    assert r.returncode == 0, r.stderr
    assert "example (plugin, dftpass_example_plugin): EX-1" in r.stdout
    assert "EX-1" in dftpass(plugin_site, "rules").stdout


def test_the_plugin_pass_runs_in_its_declared_place(plugin_site, torch_basic):
    r = dftpass(plugin_site, "-v", "plan", torch_basic, "--no-diff", "--time-passes")
    assert r.returncode == 0, r.stderr
    # it ran after ML-R6 and saw ML-R6's two queued batch-loop wraps
    assert "EX-1 ran after ML-R6, which queued 2 batch-loop wraps" in r.stdout
    timed = [line.split()[0] for line in r.stderr.splitlines() if line.startswith("  ")]
    assert timed.index("ML-R6") < timed.index("EX-1")


def test_the_plugin_adds_a_command_line_option(plugin_site, torch_basic):
    r = dftpass(plugin_site, "plan", torch_basic, "--no-diff", "--example-level", "warning")
    assert "warning: EX-1" in r.stdout


def test_the_plugin_teaches_framework_detection(plugin_site, project):
    root = project({"a.py": "import examplefw\n"})
    import json
    det = json.loads(dftpass(plugin_site, "detect", root, "--json").stdout)
    assert "examplefw" in det["frameworks"]


def test_config_switches_the_plugin_off(plugin_site, torch_basic):
    (torch_basic / "dftpass.yaml").write_text("plugins:\n  disable: [example]\n")
    r = dftpass(plugin_site, "plan", torch_basic, "--no-diff")
    assert r.returncode == 0, r.stderr
    assert "EX-1" not in r.stdout + r.stderr
    listed = dftpass(plugin_site, "plugins", "--config", torch_basic / "dftpass.yaml")
    assert "example (blocked by configuration)" in listed.stdout


def test_the_autoload_switch_keeps_entry_point_plugins_out(plugin_site, torch_basic):
    r = dftpass(plugin_site, "plugins", env={"DFTPASS_DISABLE_PLUGIN_AUTOLOAD": "1"})
    assert "example" not in r.stdout and "builtin" in r.stdout


def test_rule_options_of_the_plugin_come_from_config(plugin_site, torch_basic):
    (torch_basic / "dftpass.yaml").write_text("rules:\n  options:\n    EX-1:\n      severity: warning\n")
    r = dftpass(plugin_site, "plan", torch_basic, "--no-diff")
    assert "warning: EX-1" in r.stdout


def test_the_plugin_adds_a_build_flag_to_the_install_plan(plugin_site, project):
    """A third party can make dftracer's install a source build (a site's MPI, say)."""
    plain = project({"a.py": "import torch\n"}, name="plain")
    r = dftpass(plugin_site, "install", plain, "--dry-run")
    assert r.returncode == 0 and re.search(r"-m pip install '?dftracer[^ ]*$", r.stdout.strip()), r.stdout
    root = project({"a.py": "import examplefw\n"}, name="withfw")
    r = dftpass(plugin_site, "install", root, "--dry-run")
    assert r.returncode == 0, r.stderr
    assert r.stdout.startswith("DFTRACER_ENABLE_MPI=ON ") and re.search(r"--no-binary dftracer '?dftracer", r.stdout)
    assert "DFTRACER_ENABLE_MPI (examplefw's collectives run on MPI (plugin example))" in r.stderr


def test_the_plugin_rule_written_on_the_public_api_times_a_sites_collectives(plugin_site, project):
    """EX-2 (dftpass.api only) wraps examplefw's collectives, through the real CLI; its
    examples are its tests, and explain prints its documentation."""
    root = project({"train.py": (
        "import examplefw as ex\n\n\ndef train(loader, model):\n    for x in loader:\n"
        "        grads = model(x)\n        grads = ex.allreduce(grads)\n    ex.barrier()\n\n\n"
        "if __name__ == '__main__':\n    train([1, 2], lambda x: x)\n")})
    r = dftpass(plugin_site, "plan", root)
    assert r.returncode == 0, r.stderr
    # the plugin's statement region, written as start()/stop() around the statement
    assert "+        ai.comm.all_reduce.start()\n         grads = ex.allreduce(grads)\n+        ai.comm.all_reduce.stop()" \
        in r.stdout
    assert "+    ai.comm.barrier.start()\n     ex.barrier()\n+    ai.comm.barrier.stop()" in r.stdout
    explained = dftpass(plugin_site, "explain", "EX-2")
    assert explained.returncode == 0 and "examplefw collectives" in explained.stdout
    check = ("import sys\nfrom dftpass.testing import check_case\n"
             "from dftpass_example_plugin.collectives import ExampleCollectives as R\n"
             "for case in R.INVALID:\n    check_case(R, case)\nprint('ok')\n")
    ran = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(plugin_site)})
    assert ran.returncode == 0 and ran.stdout.strip().endswith("ok"), ran.stderr


def test_the_plugin_rule_coordinates_with_a_built_in_rule_through_the_public_api(plugin_site, project):
    """EX-3 (dftpass.api only) gives saves in training loops a checkpoint region where ML-R18
    left none: with ML-R18 on it places nothing (no nesting, no warning), with ML-R18 off it
    places its own; its examples pass as tests in the installed distribution."""
    root = project({"train.py": (
        "import torch\n\n\ndef train(model, opt, loader):\n    for i, x in enumerate(loader):\n"
        "        model(x).sum().backward()\n        opt.step()\n        torch.save(model.state_dict(), f'{i}.pt')\n\n\n"
        "if __name__ == '__main__':\n    train(None, None, [])\n")})
    both = dftpass(plugin_site, "plan", root, "-v")
    assert both.returncode == 0, both.stderr
    assert "ai.checkpoint.capture.start()" in both.stdout and "with ai.checkpoint.capture" not in both.stdout
    assert "info: EX-3 torch.save() is in ML-R18's checkpoint.capture region already" in both.stdout
    assert "not placed" not in both.stdout
    alone = dftpass(plugin_site, "plan", root, "--ignore", "ML-R18")
    assert alone.returncode == 0, alone.stderr
    assert "EX-3 a save in a training loop (torch.save())" in alone.stdout
    check = ("from dftpass.testing import check_case\n"
             "from dftpass_example_plugin.loop_saves import LoopSaves as R\n"
             "for case in R.valid_cases() + R.INVALID:\n    check_case(R, case)\nprint('ok')\n")
    ran = subprocess.run([sys.executable, "-c", check], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(plugin_site)})
    assert ran.returncode == 0 and ran.stdout.strip().endswith("ok"), ran.stderr


def test_a_plugin_region_that_would_nest_in_a_built_in_one_is_refused_with_a_finding(plugin_site, project, tmp_path):
    """The issue-41 case: a plugin's ``with ai.checkpoint.capture:`` on the torch.save that
    ML-R18 holds in its start()/stop() pair: refused, and the finding names both rules."""
    (tmp_path / "naive").mkdir()
    (tmp_path / "naive" / "naive_saves.py").write_text(
        "from dftpass.api import Pass, PassKind, WrapStmt, hookimpl\n\n\n"
        "class Naive(Pass):\n    \"\"\"Wraps every torch.save, asking nobody.\n\n    What it does:\n"
        "        A test. Why: A test. Example: None. Fix safety: n/a. Options: None.\n    \"\"\"\n\n"
        "    id = 'NAIVE-1'\n    title = 'naive'\n    kind = PassKind.TRANSFORM\n    requires = ('callgraph',)\n"
        "    after = ('ML-R18',)\n\n    def run(self, ctx):\n        graph = ctx.analysis('callgraph')\n"
        "        for fid, (fs, fn) in graph.functions.items():\n            for call in fn.calls:\n"
        "                if graph.qualify(fs, call.callee) == 'torch.save':\n"
        "                    ctx.add_edit(fs.relpath, WrapStmt(self.id, call.line, 'a save', call.stmt,\n"
        "                                                      ctx.names(fs.relpath).node('checkpoint.capture')))\n\n\n"
        "@hookimpl\ndef dftpass_passes():\n    return [Naive]\n")
    root = project({"train.py": (
        "import torch\n\n\ndef train(model, opt, loader):\n    for i, x in enumerate(loader):\n"
        "        model(x).sum().backward()\n        opt.step()\n        torch.save(model.state_dict(), f'{i}.pt')\n\n\n"
        "if __name__ == '__main__':\n    train(None, None, [])\n")})
    r = dftpass(plugin_site, "plan", root, "--set", "plugins.load=[naive_saves]",
                env={"PYTHONPATH": f"{plugin_site}:{tmp_path / 'naive'}"})
    assert "with ai.checkpoint.capture" not in r.stdout and "ai.checkpoint.capture.start()" in r.stdout
    assert "warning: NAIVE-1 not placed: a save: it would open checkpoint.capture inside (or around) the " \
           "start()/stop() region ML-R18 places at line 8" in r.stdout
