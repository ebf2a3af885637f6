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
    "core": set(),  # the lowest layer: it imports no other package of dftpass
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


def _module_name(path) -> str:
    parts = path.relative_to(SRC.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_no_two_modules_import_each_other_even_lazily():
    """No circle of imports between dftpass's files, counting the imports inside functions
    and under ``TYPE_CHECKING``: a module that needs what imports it declares a Protocol of
    what it reads (core/values.py's Graph, core/context.py's Manager), and what two modules
    both need goes below them (core/apply.py above pieces and rewrite)."""
    import networkx as nx

    modules = {_module_name(p): p for p in SRC.rglob("*.py")}
    graph = nx.DiGraph()
    for name, path in modules.items():
        package = name if path.name == "__init__.py" else name.rsplit(".", 1)[0]
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - (node.level - 1)]
                    base = ".".join(up + ([node.module] if node.module else []))
                targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
            else:
                continue
            for target in targets:
                while target and target not in modules:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    graph.add_edge(name, target)
    circles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert not circles, circles
