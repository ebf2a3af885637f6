"""Pass discovery, ordering from declarations, errors that name the passes, gating, caching."""

from __future__ import annotations

import pytest

from dftpass.core.config import Config, Source, Value
from dftpass.core.findings import Severity
from dftpass.core.manager import PassManager, PipelineError
from dftpass.core.passes import Pass, PassKind
from dftpass.core.pipeline import annotate

SRC = Source("test")


def config(**values) -> Config:
    return Config(values={k.replace("__", ".").replace("_", "-"): Value(v, SRC) for k, v in values.items()})


def make_pass(pid, kind=PassKind.CHECK, requires=(), after=(), frameworks=(), log=None):
    def run(self, ctx):
        if log is not None:
            log.append(pid)
        return pid

    return type(f"P_{pid.replace('-', '_')}", (Pass,), {
        "id": pid, "title": pid, "kind": kind, "requires": requires, "after": after,
        "frameworks": frameworks, "run": run,
    })


def test_builtin_passes_are_discovered_through_the_hook():
    manager = PassManager(config())
    assert {"callgraph", "loops", "frameworks", "ML-R1", "ML-R6", "ML-R9"} <= set(manager.registry)
    assert manager.provider["ML-R6"] == "builtin"


def test_order_follows_declarations_not_registration():
    manager = PassManager(config())
    # registered in reverse of the order they must run in
    manager.add_passes(make_pass("Z-3", after=("Z-2",)), make_pass("Z-2", after=("Z-1",)), make_pass("Z-1"))
    assert manager.order(["Z-3", "Z-2", "Z-1"]) == ["Z-1", "Z-2", "Z-3"]


def test_ties_break_by_natural_id_order():
    manager = PassManager(config())
    manager.add_passes(make_pass("Q-10"), make_pass("Q-2"), make_pass("Q-1"))
    assert manager.order(["Q-10", "Q-1", "Q-2"]) == ["Q-1", "Q-2", "Q-10"]


def test_requirements_join_the_pipeline_before_their_users():
    manager = PassManager(config())
    order = manager.order(["ML-R8"])
    assert order.index("callgraph") < order.index("loops") < order.index("ML-R8")


def test_a_cycle_is_an_error_naming_its_passes():
    manager = PassManager(config())
    manager.add_passes(make_pass("C-1", after=("C-2",)), make_pass("C-2", after=("C-1",)))
    with pytest.raises(PipelineError, match=r"cycle: C-\d -> C-\d -> C-\d"):
        manager.order(["C-1", "C-2"])


def test_a_missing_requirement_is_an_error_naming_both():
    manager = PassManager(config())
    manager.add_passes(make_pass("M-1", requires=("not-installed",)))
    with pytest.raises(PipelineError, match="M-1 requires 'not-installed'"):
        manager.order(["M-1"])


def test_requiring_a_switched_off_rule_is_an_error():
    manager = PassManager(config())
    manager.add_passes(make_pass("M-2", requires=("ML-R6",)))
    with pytest.raises(PipelineError, match="M-2 requires rule ML-R6, which is switched off"):
        manager.order(["M-2"])


def test_duplicate_ids_are_an_error_naming_both_plugins():
    manager = PassManager(config())
    with pytest.raises(PipelineError, match="'ML-R6' is defined twice: by plugin 'builtin' and by plugin 'test'"):
        manager.add_passes(make_pass("ML-R6"), plugin="test")


def test_analyses_are_computed_once_and_shared(project):
    root = project({"a.py": "def f(loader):\n    for b in loader:\n        pass\n"})
    log = []
    manager = PassManager(config(rules__select=["U-1", "U-2"]))
    manager.add_passes(
        make_pass("shared", kind=PassKind.ANALYSIS, log=log),
        make_pass("U-1", requires=("shared",)), make_pass("U-2", requires=("shared",)),
    )
    for pid in ("U-1", "U-2"):  # each asks for the analysis explicitly, too
        cls = manager.registry[pid]
        cls.run = lambda self, ctx: ctx.analysis("shared")
    annotate(root, manager.config, "plan", manager=manager, jobs=1)
    assert log == ["shared"]


def test_framework_gate_skips_a_pass_and_says_why(project):
    root = project({"a.py": "import numpy\n"})
    log = []
    manager = PassManager(config(rules__select=["G-1"]))
    manager.add_passes(make_pass("G-1", frameworks=("pytorch",), log=log))
    result = annotate(root, manager.config, "plan", manager=manager, jobs=1)
    assert log == []
    assert [t.status for t in result.timings if t.pass_id == "G-1"] == ["skipped: needs pytorch"]


def test_passes_filter_restricts_the_pipeline(project):
    root = project({"a.py": "def f(loader):\n    for b in loader:\n        pass\n"})
    manager = PassManager(config(project__kind="program"))
    result = annotate(root, manager.config, "plan", passes=["ML-R6"], manager=manager, jobs=1)
    assert [p for p in result.pipeline if p.startswith("ML-")] == ["ML-R6"]
    assert {e.rule for _, e in result.edits()} == {"ML-R6"}
    with pytest.raises(PipelineError, match="unknown pass"):
        annotate(root, manager.config, "plan", passes=["ML-R99"], manager=manager, jobs=1)


def test_unknown_rule_in_config_is_an_error():
    from dftpass.core.config import ConfigError

    manager = PassManager(config(rules__ignore=["ML-R66"]))
    with pytest.raises(ConfigError, match="unknown rule 'ML-R66'"):
        manager.check_config()


def test_rule_options_are_checked_against_the_options_schema():
    from dftpass.core.config import ConfigError

    good = PassManager(Config(values={"rules.options.loops.loader_name_pattern": Value("^feed$", SRC)}))
    assert good.options_for("loops").loader_name_pattern == "^feed$"
    bad = PassManager(Config(values={"rules.options.loops.loader_name_pattern": Value(3, Source("project", "d.yaml", 7))}))
    with pytest.raises(ConfigError, match=r"d.yaml:7: loops option 'loader_name_pattern' must be str"):
        bad.options_for("loops")
    unknown = PassManager(Config(values={"rules.options.loops.nope": Value(1, Source("project", "d.yaml", 9))}))
    with pytest.raises(ConfigError, match=r"d.yaml:9: loops has no option 'nope'"):
        unknown.options_for("loops")


def test_per_path_override_switches_a_rule_off_for_some_files(project):
    files = {
        "a.py": "def f(loader):\n    for b in loader:\n        pass\n",
        "legacy/b.py": "def g(loader):\n    for b in loader:\n        pass\n",
    }
    root = project(files)
    manager = PassManager(config(rules__per_path=[{"paths": ["legacy/**"], "ignore": ["ML-R6"]}],
                                 project__kind="program"))
    result = annotate(root, manager.config, "plan", passes=["ML-R6"], manager=manager, jobs=1)
    assert {rel for rel, _ in result.edits()} == {"a.py"}


def _wrapping_pass(pid, after=()):
    """A transform that puts ``with ai.compute:`` around ``train_step(x)``."""
    from dftpass.core.edits import WrapStmt

    def run(self, ctx):
        graph = ctx.analysis("callgraph")
        for fs, fn in graph.functions.values():
            for call in fn.calls:
                if call.callee == "train_step":
                    ctx.add_edit(fs.relpath, WrapStmt(pid, call.line, "the step", call.stmt,
                                                      ctx.names(fs.relpath).node("compute")))

    return type(f"W_{pid.replace('-', '_')}", (Pass,), {
        "id": pid, "title": pid, "kind": PassKind.TRANSFORM, "requires": ("callgraph",), "after": after,
        "run": run})


@pytest.mark.parametrize("declared", [True, False], ids=["declared", "by-id"])
def test_an_edit_that_loses_to_another_rules_is_reported_naming_both(project, declared):
    """Two rules that place the same region on one statement: the second is not placed, and
    the finding names the rule that holds it and whether the order was declared (``after``)
    or only the ids' order."""
    root = project({"a.py": "def main(x):\n    train_step(x)\n\n\ndef train_step(x):\n    return x\n"})
    manager = PassManager(config(rules__select=["K-1", "K-2"], project__kind="program"))
    manager.add_passes(_wrapping_pass("K-1"), _wrapping_pass("K-2", after=("K-1",) if declared else ()))
    result = annotate(root, manager.config, "plan", manager=manager, jobs=1)
    assert {e.rule for _, e in result.edits()} == {"K-1"}  # a region: one edit, or its start and stop
    lost = [f for f in result.findings if f.rule == "K-2"]
    assert len(lost) == 1 and "K-1 places the same region there" in lost[0].message
    if declared:
        assert "K-2 runs after K-1, as it declares" in lost[0].message and lost[0].severity == Severity.INFO
    else:
        assert "only by the order of their ids" in lost[0].message and lost[0].severity == Severity.WARNING


def test_a_pass_may_ask_only_for_the_analyses_it_declares(project):
    """What a rule reads is in its declaration: asking for an analysis it does not require
    (directly or through the analyses it requires) is an error naming the pass."""
    root = project({"a.py": "def f(loader):\n    for b in loader:\n        pass\n"})
    manager = PassManager(config(rules__select=["A-1", "A-2"]))
    asks = make_pass("A-1", requires=("loops",))
    asks.run = lambda self, ctx: ctx.analysis("callgraph")  # through loops: declared
    undeclared = make_pass("A-2", requires=("callgraph",))
    undeclared.run = lambda self, ctx: ctx.analysis("programs")
    manager.add_passes(asks, undeclared)
    result = annotate(root, manager.config, "plan", manager=manager, jobs=1)
    assert [f.rule for f in result.failures] == ["A-2"]  # isolated: the other rule ran (issue 41)
    assert "A-2 (plugin" in result.failures[0].error and \
        "asked for analysis 'programs', which it does not declare" in result.failures[0].error
    strict = PassManager(config(rules__select=["A-1", "A-2"], plugins__strict=True))
    strict.add_passes(asks, undeclared)
    with pytest.raises(Exception, match="A-2 .* asked for analysis 'programs', which it does not declare"):
        annotate(root, strict.config, "plan", manager=strict, jobs=1)
