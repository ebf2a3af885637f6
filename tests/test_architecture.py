"""The house's arrows: which package of dftpass may import which (a module that imports
against them fails here, named with the line)."""

from __future__ import annotations

import ast

from tests.conftest import ROOT

SRC = ROOT / "src" / "dftpass"

#: package -> the other dftpass packages it may import. Library facts reach the analyses only
#: through the plugins' ``dftpass_knowledge`` hook (the pass manager merges them), never from
#: ``dftpass.plugins.knowledge``; the runtime an annotated program imports stands alone.
ALLOWED = {
    "core": {"runs"},  # the workspace layout (runs/layout.py) names the folders core writes
    "traces": {"core"},
    "runs": {"core", "traces"},
    "analysis": {"core", "traces", "runs"},
    "proposals": {"core"},
    "optimize": {"core", "analysis", "proposals", "runs"},
    "plugins": {"core", "analysis", "traces", "runs", "api"},
    # the rule authors' API: a re-export of what rules use (tests/plugins/test_public_api.py)
    "api": {"core", "plugins", "analysis", "traces"},
    "commands": {"core", "analysis", "optimize", "runs", "traces", "proposals", "plugins"},
    "cli": {"core", "commands"},
    "runtime": set(),
    "testing": {"core"},
    "__main__": {"cli"},
}


def _imports(path):
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            yield from ((alias.name, node.lineno) for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            yield node.module, node.lineno


def test_every_import_follows_the_arrows():
    wrong = []
    for path in sorted(SRC.rglob("*.py")):
        parts = path.relative_to(SRC).with_suffix("").parts
        package = parts[0]
        if package == "__init__":
            continue
        for module, line in _imports(path):
            if not module.startswith("dftpass."):
                continue
            target = module.split(".")[1]
            if target != package and target not in ALLOWED[package]:
                wrong.append(f"{path.relative_to(ROOT)}:{line}: {package} imports {module}")
    assert not wrong, "\n".join(wrong)
