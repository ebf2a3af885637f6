"""One broken plugin does not take the tool down, and configuration cannot run code."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

BROKEN = {
    "pyproject.toml": '[build-system]\nrequires = ["setuptools>=61"]\nbuild-backend = "setuptools.build_meta"\n\n'
                      '[project]\nname = "dftpass-broken-plugin"\nversion = "0.1"\n\n'
                      '[project.entry-points.dftpass]\nbroken = "dftpass_broken"\n',
    "dftpass_broken.py": 'raise RuntimeError("this plugin is broken on import")\n',
}

RAISING = '''"""A plugin whose pass raises."""
from dftpass.core.hookspecs import hookimpl
from dftpass.core.passes import Pass, PassKind


class Boom(Pass):
    """A pass that fails.

    What it does:
        Raises. Why: A test. Example: None. Fix safety: n/a. Options: None.
    """

    id = "BOOM-1"
    title = "Boom"
    kind = PassKind.CHECK

    def run(self, ctx):
        raise ValueError("kaboom")


@hookimpl
def dftpass_passes():
    return [Boom]
'''


@pytest.fixture(scope="module")
def broken_site(tmp_path_factory) -> Path:
    src = tmp_path_factory.mktemp("broken-src")
    for rel, text in BROKEN.items():
        (src / rel).write_text(text)
    target = tmp_path_factory.mktemp("broken-site")
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--target", str(target), str(src)], check=True, capture_output=True,
                   env={**os.environ, "PIP_DISABLE_PIP_VERSION_CHECK": "1"})
    return target


def dftpass(*args, site: Path | None = None, env=None, cwd=None, timeout=60) -> subprocess.CompletedProcess:
    environ = {**os.environ, **(env or {})}
    if site is not None:
        environ["PYTHONPATH"] = str(site)
    return subprocess.run([sys.executable, "-m", "dftpass", *map(str, args)], capture_output=True, text=True,
                          env=environ, cwd=cwd, timeout=timeout)


def test_a_plugin_broken_on_import_is_named_and_skipped(broken_site, project):
    assert dftpass("--version", site=broken_site).returncode == 0
    r = dftpass("rules", site=broken_site)
    assert r.returncode == 0 and "ML-R1" in r.stdout
    assert "plugin 'broken' (distribution dftpass-broken-plugin) cannot be loaded and is skipped: " \
           "RuntimeError: this plugin is broken on import" in r.stderr
    root = project({"train.py": "import torch\n"})
    assert dftpass("plan", root, site=broken_site).returncode == 0
    # a rule that only the broken plugin could have had: exit 3, and why
    r = dftpass("plan", root, "--select", "BROKEN-1", site=broken_site)
    assert r.returncode == 3 and "names rule 'BROKEN-1', which no loaded plugin has" in r.stderr


def test_a_disabled_broken_plugin_is_not_even_loaded(broken_site, project, tmp_path):
    site_config = tmp_path / "site.yaml"
    site_config.write_text("plugins:\n  disable: [broken]\n")
    r = dftpass("rules", site=broken_site, env={"DFTPASS_SITE_CONFIG": str(site_config)})
    assert r.returncode == 0 and "broken" not in r.stderr


def test_a_pass_that_raises_names_itself_and_its_plugin_and_json_stays_a_document(project, tmp_path):
    (tmp_path / "plugins").mkdir()
    (tmp_path / "plugins" / "boomplugin.py").write_text(RAISING)
    user = tmp_path / "config" / "dftpass"
    user.mkdir(parents=True)
    (user / "config.yaml").write_text("plugins:\n  load: [boomplugin]\n")
    root = project({"train.py": "import torch\n"})
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config"), "PYTHONPATH": str(tmp_path / "plugins")}
    r = dftpass("validate", root, "--select", "BOOM-1", "--format", "json", env=env)
    assert r.returncode == 3
    assert "pass BOOM-1 (plugin 'boomplugin') failed: ValueError: kaboom" in r.stderr
    assert json.loads(r.stdout)["error"]["message"].startswith("pass BOOM-1 (plugin 'boomplugin') failed")


def test_plugins_load_in_a_projects_own_config_needs_trust(project, tmp_path):
    root = project({"train.py": "import torch\n", "evil.py": "open('PWNED', 'w').write('x')\n",
                    "dftpass.yaml": "rules:\n  ignore: [ML-R9]\nplugins:\n  load: [evil]\n"})
    r = dftpass("plan", root, cwd=root)
    assert r.returncode == 2 and "dftpass.yaml:4: plugins.load in a project's configuration" in r.stderr
    assert not (root / "PWNED").exists()
    trusted = dftpass("plan", root, "--trust-project-plugins", cwd=root, env={"PYTHONPATH": str(root)})
    assert trusted.returncode == 0, trusted.stderr
    assert (root / "PWNED").exists()  # trusted: the module was imported, as asked
    root2 = project({"dftpass.yaml": "plugins:\n  trust-project: true\n"}, name="self-trust")
    r = dftpass("plan", root2)
    assert r.returncode == 2 and "plugins.trust-project can only be set by the site or user" in r.stderr


def test_a_projects_disable_list_cannot_unblock_a_site_block(project, tmp_path):
    from tests.plugins.test_third_party_plugin import PLUGIN  # the example plugin, as "example"

    target = tmp_path / "site-packages"
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--target", str(target), str(PLUGIN)], check=True, capture_output=True)
    site_config = tmp_path / "site.yaml"
    site_config.write_text("plugins:\n  disable: [example]\n")
    root = project({"train.py": "import torch\n", "dftpass.yaml": "plugins:\n  disable: [nothing-here]\n"})
    env = {"DFTPASS_SITE_CONFIG": str(site_config)}
    r = dftpass("plan", root, site=target, env=env)
    assert r.returncode == 2 and "plugins.disable names 'nothing-here', which is not an installed plugin" in r.stderr
    # a project's own (empty) list does not re-enable what the site blocked
    (root / "dftpass.yaml").write_text("plugins:\n  disable: []\n")
    r = dftpass("config", root, site=target, env=env)
    line = next(line for line in r.stdout.splitlines() if line.startswith("plugins.disable"))
    assert r.returncode == 0 and "['example']" in line and "# site+project" in line, line
    r = dftpass("plan", root, "--select", "EX-1", site=target, env=env)
    assert r.returncode == 2 and "blocked by plugins.disable: example" in r.stderr


@pytest.mark.parametrize("text, message", [
    ("rules:\n  ignore: !!python/tuple [ML-R9]\n", "dftpass.yaml:2: the YAML tag tag:yaml.org,2002:python/tuple"),
    ("!!python/object:os.system\nrules: {}\n", "dftpass.yaml:1: the YAML tag tag:yaml.org,2002:python/object"),
    ("rules:\n  ignore: !custom [ML-R9]\n", "dftpass.yaml:2: the YAML tag !custom is not allowed"),
])
def test_yaml_tags_are_refused_with_file_and_line(project, text, message):
    root = project({"dftpass.yaml": text})
    r = dftpass("config", root)
    assert r.returncode == 2 and message in r.stderr, r.stderr


def test_an_alias_bomb_is_refused_quickly_with_a_short_message(project):
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for k in range(1, 10):
        prev = f"*a{k - 1}"
        lines.append(f"a{k}: &a{k} [{', '.join([prev] * 9)}]")
    bomb = "x-anchors:\n" + "\n".join("  " + line for line in lines) + "\nrules:\n  ignore: *a9\n"
    root = project({"dftpass.yaml": bomb})
    start = time.perf_counter()
    r = dftpass("config", root)
    assert time.perf_counter() - start < 20
    assert r.returncode == 2 and len(r.stderr) < 2000, r.stderr[:500]
