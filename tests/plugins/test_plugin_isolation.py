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


def _user_plugin(tmp_path, name: str, source: str) -> dict:
    """A plugin module on the path, loaded by the user's configuration: the environment."""
    (tmp_path / "plugins").mkdir(exist_ok=True)
    (tmp_path / "plugins" / f"{name}.py").write_text(source)
    user = tmp_path / "config" / "dftpass"
    user.mkdir(parents=True, exist_ok=True)
    (user / "config.yaml").write_text(f"plugins:\n  load: [{name}]\n")
    return {"XDG_CONFIG_HOME": str(tmp_path / "config"), "PYTHONPATH": str(tmp_path / "plugins")}


def test_a_pass_that_raises_is_strict_only_when_asked_and_json_stays_a_document(project, tmp_path):
    env = _user_plugin(tmp_path, "boomplugin", RAISING)
    root = project({"train.py": "import torch\n"})
    r = dftpass("validate", root, "--select", "BOOM-1", "--format", "json", "--strict-plugins", env=env)
    assert r.returncode == 3
    assert "pass BOOM-1 (plugin 'boomplugin') failed: ValueError: kaboom" in r.stderr
    assert json.loads(r.stdout)["error"]["message"].startswith("pass BOOM-1 (plugin 'boomplugin') failed")
    # isolated by default, in validate (check) mode too: exit 4, the failure in the JSON findings
    r = dftpass("validate", root, "--select", "BOOM-1", "--format", "json", env=env)
    assert r.returncode == 4, r.stderr
    failure = [f for f in json.loads(r.stdout) if f["rule"] == "BOOM-1"]
    assert len(failure) == 1 and failure[0]["severity"] == "warning"
    assert "raised and was skipped, its edits dropped (plugin 'boomplugin', module boomplugin)" in failure[0]["message"]
    assert "ValueError: kaboom" in failure[0]["message"]


TRAIN = ("import torch\n\n\ndef main(model, loader, opt):\n    for x in loader:\n"
         "        model(x).sum().backward()\n        opt.step()\n\n\n"
         "if __name__ == '__main__':\n    main(None, [], None)\n")

#: a plugin rule that queues an edit and then raises, and one whose analysis raises
HALF_DONE = '''"""Two plugin rules that fail half-way."""
from dftpass.api import Decorate, Pass, PassKind, hookimpl


class Shaky(Pass):
    """Queues an edit, then raises.

    What it does:
        Nothing useful. Why: A test. Example: None. Fix safety: n/a. Options: None.
    """

    id = "SHAKY-1"
    title = "Shaky"
    kind = PassKind.TRANSFORM
    requires = ("callgraph",)

    def run(self, ctx):
        graph = ctx.analysis("callgraph")
        fs, fn = graph.functions["train.py::main"]
        ctx.add_edit(fs.relpath, Decorate(self.id, fn.line, "a half-done edit", fn.stmt, "shaky"))
        raise KeyError("half-way")


class Broken(Pass):
    """An analysis that raises.

    What it does:
        Nothing. Why: A test. Example: None. Fix safety: n/a. Options: None.
    """

    id = "broken_facts"
    title = "Broken facts"
    kind = PassKind.ANALYSIS

    def run(self, ctx):
        return {}["missing"]


class NeedsFacts(Pass):
    """Needs the broken analysis.

    What it does:
        Nothing. Why: A test. Example: None. Fix safety: n/a. Options: None.
    """

    id = "NEEDS-1"
    title = "Needs facts"
    kind = PassKind.CHECK
    requires = ("broken_facts",)

    def run(self, ctx):
        ctx.analysis("broken_facts")


@hookimpl
def dftpass_passes():
    return [Shaky, Broken, NeedsFacts]
'''


def test_a_raising_plugin_rule_leaves_every_other_rule_s_edits_applied(project, tmp_path):
    """Issue 41: a rule that raises (and an analysis a plugin provides that raises) stops no
    other rule: its edits are dropped, one warning line says which and why, exit 4; with
    plugins.strict (or --strict-plugins) it stops the command, exit 3."""
    env = _user_plugin(tmp_path, "shaky", HALF_DONE)
    root = project({"train.py": TRAIN})
    r = dftpass("plan", root, "--select", "ML-R*,SHAKY-1,NEEDS-1", env=env)
    assert r.returncode == 4, r.stderr
    assert "+@ai.pipeline.train" in r.stdout and "enumerate(ai.dataloader.fetch.iter(loader))" in r.stdout
    assert "+@shaky" not in r.stdout  # the half-done edit is dropped
    lines = [line for line in r.stdout.splitlines() if "SHAKY-1" in line and "raised" in line]
    assert len(lines) == 1 and "warning: SHAKY-1 raised and was skipped, its edits dropped (plugin 'shaky', " \
        "module shaky): KeyError: 'half-way'" in lines[0]
    assert "warning: NEEDS-1 skipped: the analysis broken_facts it needs (plugin 'shaky', module shaky) raised: " \
           "KeyError: 'missing'" in r.stdout
    assert "Traceback" not in r.stderr
    assert "Traceback" in dftpass("plan", root, "--select", "ML-R*,SHAKY-1", "-v", env=env).stderr
    strict = dftpass("plan", root, "--select", "ML-R*,SHAKY-1", "--set", "plugins.strict=true", env=env)
    assert strict.returncode == 3 and "pass SHAKY-1 (plugin 'shaky') failed: KeyError" in strict.stderr
    assert dftpass("run", root, "--select", "ML-R*,SHAKY-1", "--strict-plugins", "--out", tmp_path / "o",
                   env=env).returncode == 3


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
