"""Helpers to test rules through their examples, for dftpass and for plugin authors.

A rule's ``VALID`` and ``INVALID`` cases (:class:`dftpass.core.passes.Case`) are its tests:

    from dftpass.testing import check_case
    for case in MyRule.valid_cases() + MyRule.INVALID:
        check_case(MyRule, case)

:func:`check_case` writes the case to a throwaway project, runs the rule alone (with the
analyses it needs) through the same pipeline as ``dftpass run``, compares the result with
``case.after`` (or with ``case.before`` for a VALID case), checks the findings the case
expects (``case.findings``), and runs the rule again on the result to check that a second
run changes nothing and that ``dftpass strip`` gives the original back.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from dftpass.core.config import Config, Source, Value
from dftpass.core.manager import PassManager
from dftpass.core.findings import Finding, Severity
from dftpass.core.passes import Case, Expect, Pass
from dftpass.core.pipeline import AnnotateResult, annotate


def rule_config(rule_id: str, options: dict | None = None) -> Config:
    src = Source("test")
    # a rule's examples are snippets: they test the rule, not whether the snippet is a
    # program or a library (tests/core/test_programs.py does that)
    values = {"rules.select": Value([rule_id], src),
              "plugins.disable": Value([], src),
              "project.kind": Value("program", src),
              # the examples show a rule's regions as `with` blocks; the import prelude and
              # the start()/stop() form of statement regions have their own tests
              "emit.skip-dynamo-import": Value(False, src),
              "emit.lean-regions": Value(False, src)}
    for key, value in (options or {}).items():
        # a dotted key is a configuration key the rule reads (``overhead.sample-every``), a
        # plain one the rule's own option
        values[key if "." in key else f"rules.options.{rule_id}.{key}"] = Value(value, src)
    return Config(values=values)


def run_rule(rule: type[Pass], files: dict[str, str], options: dict | None = None) -> tuple[dict[str, str], AnnotateResult]:
    """Run ``rule`` alone over a project made of ``files``; return every file's new text."""
    with tempfile.TemporaryDirectory(prefix="dftpass-case-") as tmp:
        root = Path(tmp)
        for rel, text in files.items():
            (root / rel).parent.mkdir(parents=True, exist_ok=True)
            (root / rel).write_text(text, encoding="utf-8")
        config = rule_config(rule.id, options)
        manager = PassManager(config)
        if manager.registry.get(rule.id) is not rule:
            manager.add_passes(rule, plugin="test")
        result = annotate(root, config, "run", manager=manager, jobs=1)
        out = {}
        for rel, text in files.items():
            fr = result.files.get(rel)
            out[rel] = fr.new.decode(fr.encoding) if fr is not None and fr.new is not None else text
        return out, result


def check_case(rule: type[Pass], case: Case) -> None:
    """Assert that ``rule`` turns ``case.before`` into ``case.after``, reports exactly the
    findings the case expects, and is idempotent."""
    files = {**case.files, case.path: case.before}
    out, result = run_rule(rule, files, case.options)
    check_findings(rule, case, result.findings)
    expected = case.after if case.after is not None else case.before
    got = out[case.path]
    assert got == expected, f"{rule.id}: unexpected result\n--- got ---\n{got}\n--- expected ---\n{expected}"
    again, _ = run_rule(rule, {**case.files, **out}, case.options)
    assert again[case.path] == got, f"{rule.id}: a second run changed the file again:\n{again[case.path]}"
    check_strip(rule, case, result)


def check_findings(rule: type[Pass], case: Case, findings: list[Finding]) -> None:
    """Every expected finding is reported; no warning or error is reported unexpected."""
    def matches(expect: Expect, f: Finding) -> bool:
        return (f.rule == (expect.rule or rule.id) and f.severity.value == expect.severity
                and expect.message in f.message and (expect.line is None or f.line == expect.line))

    shown = "\n".join(f"  {f.location()}: {f.severity.value}: {f.rule} {f.message}" for f in findings) or "  none"
    for expect in case.findings:
        assert any(matches(expect, f) for f in findings), (
            f"{rule.id}: expected {expect.severity} {expect.rule or rule.id} {expect.message!r}"
            f"{'' if expect.line is None else f' on line {expect.line}'}; reported:\n{shown}")
    for f in findings:
        if f.severity != Severity.INFO and not any(matches(e, f) for e in case.findings):
            raise AssertionError(f"{rule.id}: unexpected {f.severity.value}: {f.rule} {f.message}; "
                                 f"a Case lists the findings it expects (findings=(Expect(...),))")


def check_strip(rule: type[Pass], case: Case, result: AnnotateResult) -> None:
    """``dftpass strip`` gives back every file's original bytes, from the record the run kept."""
    from dftpass.core.strip import strip_source

    for rel, fr in result.files.items():
        if fr.new is None or fr.provenance is None:
            continue
        stripped = strip_source(fr.new, [fr.provenance])
        assert stripped.error is None, f"{rule.id}: {rel}: {stripped.error}"
        assert stripped.new == fr.original, (
            f"{rule.id}: strip did not give {rel} back\n--- got ---\n{stripped.new.decode()}\n--- original ---\n"
            f"{fr.original.decode()}")
