"""dftpass.api is what rules use: every bundled rule and framework plugin imports dftpass
through it alone, and it exports nothing that no rule uses."""

from __future__ import annotations

import ast

import dftpass.api
from tests.conftest import ROOT

PLUGINS = ROOT / "src" / "dftpass" / "plugins"
FRAMEWORKS = ("jax", "lightning", "tensorflow")
EXAMPLE = ROOT / "fixtures" / "plugins" / "dftpass_example_plugin" / "src" / "dftpass_example_plugin"


def _rule_modules():
    rules = sorted(PLUGINS.glob("*/ml_r*.py"))
    return rules + [PLUGINS / area / "__init__.py" for area in FRAMEWORKS]


def _dftpass_imports(path):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "dftpass":
            yield node, [alias.name for alias in node.names]
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.split(".")[0] == "dftpass":
                    yield node, [alias.name]


def test_every_bundled_rule_uses_only_the_public_api():
    wrong = []
    for path in [*_rule_modules(), *EXAMPLE.glob("*.py")]:
        area = path.parent.name
        for node, _ in _dftpass_imports(path):
            module = getattr(node, "module", None) or ""
            if module == "dftpass.api" or (path.name == "__init__.py" and module.startswith(f"dftpass.plugins.{area}.")):
                continue  # a framework plugin registers its own rule file
            wrong.append(f"{path.relative_to(ROOT)}:{node.lineno}: imports {module or 'dftpass'} (use dftpass.api)")
    assert not wrong, "\n".join(wrong)


def test_the_api_exports_what_rules_use_and_nothing_else():
    used = set()
    for path in [*_rule_modules(), *EXAMPLE.glob("*.py")]:
        for node, names in _dftpass_imports(path):
            if getattr(node, "module", None) == "dftpass.api":
                used.update(names)
    exported = set(dftpass.api.__all__)
    assert used <= exported, f"imported but not exported: {sorted(used - exported)}"
    # what the analyses return is exported for rule authors to name, used or not (issue 41)
    results = {"ANALYSIS_RESULTS", "BatchChain", "StepSpan",
               *(cls.__name__ for cls in dftpass.api.ANALYSIS_RESULTS.values())}
    assert exported - results <= used, f"exported but used by no rule: {sorted(exported - results - used)}"
    for name in exported:
        assert getattr(dftpass.api, name) is not None, name
