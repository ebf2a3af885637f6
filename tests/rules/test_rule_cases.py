"""Every rule's VALID and INVALID examples are its tests (the Fixit way).

For each built-in rule: a VALID case must come out unchanged; an INVALID case must come out
exactly as its ``after`` (imports included) and a second run must change nothing.
"""

from __future__ import annotations

import pytest

from dftpass.core.passes import PassKind
from dftpass.plugins.builtin import PASSES
from dftpass.testing import check_case

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
