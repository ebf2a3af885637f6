"""No region nests in itself, whatever the forms that open it (issue 41, core/nesting.py).

Every pair of emitted forms (decorator, ``with`` around a body, ``with`` around a statement,
``start()``/``stop()``, ``.iter(...)`` around a loop, ``.iter(...)`` where an iterator is
made, a runtime callback handed to a framework), placed by two rules on regions that share a
statement, is refused the second time, with a finding naming both rules and the line; the
same forms on statements apart are both placed."""

from __future__ import annotations

import itertools

import pytest

from dftpass.core.config import Config, Value, Source
from dftpass.core.context import RunContext
from dftpass.core.edits import Decorate, InsertAfter, InsertBefore, WrapBody, WrapIter, WrapStmt, WrapValue
from dftpass.core.manager import PassManager
from dftpass.core.passes import Pass, PassKind
from dftpass.core.project import Project

SOURCE = (
    "import torch\n"                                      # body 0
    "\n\n"
    "def fit(trainer, model, data):\n"                    # body 1: F
    "    for epoch in range(2):\n"                        #   L = F + body 0
    "        trainer.callbacks.append(None)\n"            #     L + body 0: the callback is handed over
    "        it = trainer.fit(model, data)\n"             #     L + body 1: S*, every form covers it
    "\n\n"
    "def other(trainer, model, data):\n"                  # body 2: G, the same shapes apart
    "    for epoch in range(2):\n"
    "        trainer.callbacks.append(None)\n"
    "        it = trainer.fit(model, data)\n"
)
F, G = (("body", 1),), (("body", 2),)
NODE = "ai.dataloader.fetch"  # a node every form can open


def forms(func):
    loop = func + (("body", 0),)
    handed, made = loop + (("body", 0),), loop + (("body", 1),)
    return {
        "decorator": lambda rule: [Decorate(rule, 4, "d", func, NODE)],
        "with (body)": lambda rule: [WrapBody(rule, 4, "b", func, with_item=NODE)],
        "with": lambda rule: [WrapStmt(rule, 7, "w", made, NODE)],
        "start()/stop()": lambda rule: [InsertBefore(rule, 7, "s", made, f"{NODE}.start()"),
                                        InsertAfter(rule, 7, "s", made, f"{NODE}.stop()")],
        ".iter(...)": lambda rule: [WrapIter(rule, 5, "i", loop, f"{NODE}.iter")],
        ".iter(...) where the iterator is made": lambda rule: [WrapValue(rule, 7, "v", made, f"{NODE}.iter")],
        "runtime callback": lambda rule: [InsertAfter(rule, 6, "c", handed,
                                                        "trainer.callbacks.append(_dft_runtime.LightningCallback())")],
    }


class _Rule(Pass):
    """A rule that only exists to own edits.

    What it does:
        Nothing. Why: A test. Example: None. Fix safety: n/a. Options: None.
    """

    kind = PassKind.TRANSFORM

    def run(self, ctx):
        pass


@pytest.fixture
def context(tmp_path):
    (tmp_path / "train.py").write_text(SOURCE)
    config = Config(values={"rules.select": Value(["P-1", "P-2"], Source("cli"))})
    manager = PassManager(config)
    manager.add_passes(type("P1", (_Rule,), {"id": "P-1", "title": "one"}),
                       type("P2", (_Rule,), {"id": "P-2", "title": "two"}))
    project = Project.discover(tmp_path, config.get("files.include"), config.exclude_globs())
    project.load(config.get("files.max-bytes"), jobs=1)
    return lambda: RunContext(config, project, manager, "plan")


NAMES = list(forms(F))
#: the forms that keep an open region's start on the node (``with node:``, ``start()``):
#: ``.iter`` keeps its times in its generator, and nests in nothing (core/nesting.py)
STATEFUL = [name for name in NAMES if not name.startswith(".iter")]


@pytest.mark.parametrize("first, second", list(itertools.product(STATEFUL, STATEFUL)))
def test_a_second_region_of_the_node_that_meets_the_first_is_refused(context, first, second):
    ctx = context()
    placed = [ctx.add_edit("train.py", e) for e in forms(F)[first]("P-1")]
    assert all(placed)
    again = [ctx.add_edit("train.py", e) for e in forms(F)[second]("P-2")]
    assert not any(again), f"{second} of P-2 nested in {first} of P-1"
    said = [f for f in ctx.findings if f.rule == "P-2" and "not placed" in f.message]
    assert len(said) == 1, [f.message for f in ctx.findings]
    # the same form on the same statement is the same region (EditSet's own message); any other
    # form of the node that meets it opens inside or around it
    assert "P-1 places the same region there" in said[0].message or "P-1 places at line" in said[0].message
    assert said[0].severity.value == "warning"
    # nothing of the refused rule is queued (a start refused takes its stop with it)
    assert all(e.rule == "P-1" for e in ctx.edit_sets["train.py"].edits)


@pytest.mark.parametrize("first, second", list(itertools.product(NAMES, NAMES)))
def test_the_same_forms_on_statements_apart_are_both_placed(context, first, second):
    ctx = context()
    assert all(ctx.add_edit("train.py", e) for e in forms(F)[first]("P-1"))
    assert all(ctx.add_edit("train.py", e) for e in forms(G)[second]("P-2"))
    assert not [f for f in ctx.findings if "not placed" in f.message]


@pytest.mark.parametrize("first, second", [(a, b) for a, b in itertools.product(NAMES, NAMES)
                                           if a.startswith(".iter") or b.startswith(".iter")])
def test_an_iter_keeps_its_times_in_its_generator_and_nests_in_nothing(context, first, second):
    """dftracer 2.2's ``ai_common.iter`` times each iteration in the generator's own locals:
    an ``.iter`` inside or around another region of its node loses no event."""
    ctx = context()
    assert all(ctx.add_edit("train.py", e) for e in forms(F)[first]("P-1"))
    placed = [ctx.add_edit("train.py", e) for e in forms(F)[second]("P-2")]
    assert not [f for f in ctx.findings if "would open" in f.message]
    if first == second:  # the same wrap of the same iterable twice is one region: the first keeps it
        assert not any(placed) and any("P-1 places the same region there" in f.message for f in ctx.findings)
    else:
        assert all(placed)


def test_the_callback_nodes_are_the_runtime_s():
    from dftpass.core.emitter import CALLBACK_NODES
    from dftpass.runtime import regions

    assert CALLBACK_NODES == set(regions.PATHS)
