"""Every rule's VALID and INVALID examples are its tests (the Fixit way).

For each rule dftpass ships (built-in, and its framework plugins): a VALID case must come out
unchanged; an INVALID case must come out exactly as its ``after`` (imports included) and a
second run must change nothing.
"""

from __future__ import annotations

import importlib

import pytest

from dftpass.core.manager import own_plugins
from dftpass.core.passes import PassKind
from dftpass.plugins.builtin import PASSES as BUILTIN
from dftpass.testing import check_case

PASSES = [*BUILTIN, *(p for m in own_plugins().values() for p in importlib.import_module(m).dftpass_passes())]
RULES = [p for p in PASSES if p.is_rule()]
#: rules on source code; runtime rules (on traces) are tested on real traces in tests/analysis
SOURCE_RULES = [p for p in RULES if p.kind in (PassKind.TRANSFORM, PassKind.CHECK)]
CASES = [
    pytest.param(rule, case, id=f"{rule.id}-{kind}{i}")
    for rule in SOURCE_RULES
    for kind, cases in (("valid", rule.valid_cases()), ("invalid", rule.INVALID))
    for i, case in enumerate(cases)
]


@pytest.mark.parametrize("rule, case", CASES)
def test_case(rule, case):
    check_case(rule, case)


@pytest.mark.parametrize("rule", SOURCE_RULES, ids=lambda r: r.id)
def test_source_rules_have_both_kinds_of_example(rule):
    assert rule.valid_cases(), f"{rule.id} has no VALID example"
    if rule.kind == PassKind.TRANSFORM:
        assert rule.INVALID, f"{rule.id} has no INVALID example"
        assert all(c.after is not None and c.after != c.before for c in rule.INVALID)


@pytest.mark.parametrize("rule", RULES, ids=lambda r: r.id)
def test_docstring_has_the_fixed_sections(rule):
    sections = rule.doc_sections()
    for name in ("What it does", "Why", "Example", "Fix safety", "Options"):
        assert sections.get(name, "").strip(), f"{rule.id}: section {name!r} missing or empty"
    assert rule.title and rule.summary()


def test_rule_ids_follow_the_catalogue():
    ids = [r.id for r in RULES]
    assert len(ids) == len(set(ids))
    assert all(i.startswith("ML-R") for i in ids)


def test_every_rule_file_is_registered_by_the_builtin_plugin():
    """A rule file missing from plugins/builtin.py (or its framework plugin's ``dftpass_passes``)
    would be silently absent, its examples untested."""
    import importlib
    import inspect
    from pathlib import Path

    import dftpass.plugins as plugins_pkg
    from dftpass.core.passes import Pass

    root = Path(plugins_pkg.__file__).parent
    files = sorted(root.rglob("ml_r*.py"))
    assert files, "no rule files found"
    for path in files:
        module = importlib.import_module("dftpass.plugins." + ".".join(path.relative_to(root).with_suffix("").parts))
        defined = [c for _, c in inspect.getmembers(module, inspect.isclass)
                   if issubclass(c, Pass) and c.__module__ == module.__name__ and c.id]
        assert len(defined) == 1, f"{path.name}: one rule per file, found {[c.__name__ for c in defined]}"
        rule = defined[0]
        number = path.stem.split("_")[1]  # ml_r4_optimizer_step -> r4
        assert rule.id == f"ML-{number.upper()}", f"{path.name} defines {rule.id}"
        assert rule in PASSES, f"{path.name}: {rule.id} is not registered (dftpass/plugins/builtin.py, or its plugin)"
