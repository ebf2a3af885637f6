"""docs/plugins.md is tested (issue 41): its code examples run, every name it mentions is in
``dftpass.api`` (hooks: in the hook specifications), its table of analyses is what the
analyses return, and the messages it quotes are the messages printed."""

from __future__ import annotations

import re
import subprocess
import sys

import pytest

import dftpass.api
from dftpass.core import hookspecs
from tests.conftest import ROOT
from tests.plugins.test_plugin_isolation import BROKEN, HALF_DONE, TRAIN, _user_plugin, dftpass as run_dftpass

DOC = (ROOT / "docs" / "plugins.md").read_text(encoding="utf-8")


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"```{lang}\n(.*?)```", DOC, flags=re.S)


def test_the_python_examples_run_and_their_rule_passes_its_own_cases():
    """The rule written in section 2 is a rule: its examples pass (the test of section 3)."""
    namespace: dict = {"__name__": "docs_plugins_md"}
    blocks = _blocks("python")
    assert len(blocks) >= 2
    for block in blocks:
        exec(compile(block, "docs/plugins.md", "exec"), namespace)
    namespace["test_cases"]()  # section 3's test, on section 2's rule
    assert namespace["ExampleCollectives"].INVALID and namespace["dftpass_passes"]()


#: backticked words the docs use that are not names a rule imports: what a pass declares, the
#: objects a rule is handed (``ctx``, ``graph``, ``fs``...) and their fields, and values
NOT_IMPORTS = {
    "id", "title", "kind", "requires", "after", "frameworks", "tags", "VALID", "INVALID", "Options", "run",
    "runs_on_libraries", "ctx", "graph", "fs", "fn", "call", "names", "self", "None", "True", "False",
    "callee", "receiver", "method", "args", "keywords", "line", "stmt", "stmt_kind", "withs", "loops",
    "first", "forward", "backward", "step", "holds", "full_batch", "style", "reason", "anchored", "by_flow",
    "split", "fetch_regions", "producers", "feeders", "update_every", "loop_body", "fold_backward_step",
    "fold_forward", "ops", "functions", "spans", "covered", "chains", "sites", "breaks", "values", "targets",
    "callers", "reachable", "entries", "train_step", "optimizer", "loader", "train_loader", "before", "after_",
}


def _mentioned_names() -> set[str]:
    """Bare identifiers in backticks, and the head of a backticked call (``is_node(...)``)."""
    found = set()
    for span in re.findall(r"`([^`\n]+)`", DOC):
        span = span.strip()
        head = re.match(r"([A-Za-z_]\w*)(\(|$)", span)
        if head and "." not in span.split("(")[0]:
            found.add(head.group(1))
    for block in _blocks("python"):
        for line in block.splitlines():
            if line.startswith("from dftpass.api import"):
                found |= {n.strip() for n in line.split("import", 1)[1].split(",")}
    return found


def _public_attributes() -> set[str]:
    """What a rule reaches through the objects it is handed: the run context, the file's
    names, the analyses' results; and the ids and knowledge kinds the docs spell."""
    from dftpass.core.config import Config
    from dftpass.core.context import RunContext
    from dftpass.core.manager import PassManager
    import dftpass.testing

    owners = [RunContext, dftpass.api.FileNames, *dftpass.api.ANALYSIS_RESULTS.values()]
    names = {n for owner in owners for n in dir(owner) if not n.startswith("_")}
    names |= {n for n in dir(dftpass.testing) if not n.startswith("_")}
    names |= set(dftpass.api.ANALYSIS_RESULTS) | set(PassManager(Config(values={})).knowledge)
    return names


#: words in backticks that are values, commands, parameters or other tools' names
DOC_WORDS = {"acme", "paddle", "examplefw", "broken", "lightning", "train", "evaluate", "test", "batch", "epoch",
             "other", "iter", "next", "producer", "fed", "made", "save", "load", "dftpass", "compilers",
             "plan", "validate", "detect", "install", "call_filter", "image_size", "ID", "i", "with", "fit",
             "dft_fn", "discover"}


def test_every_name_the_docs_mention_is_public():
    missing = []
    for name in sorted(_mentioned_names() - NOT_IMPORTS - DOC_WORDS - _public_attributes()):
        if name.startswith("dftpass_"):
            if not hasattr(hookspecs, name):
                missing.append(f"hook {name}")
        elif not hasattr(dftpass.api, name):
            missing.append(name)
    assert not missing, f"docs/plugins.md names what dftpass.api does not export: {missing}"


def test_the_table_of_analyses_is_what_they_return():
    rows = re.findall(r"^\| `(\w+)` \| `(\w+)` \|", DOC, flags=re.M)
    assert rows, "the docs lost their table of analyses"
    table = dict(rows)
    assert table == {k: v.__name__ for k, v in dftpass.api.ANALYSIS_RESULTS.items()}
    from dftpass.core.config import Config
    from dftpass.core.manager import PassManager
    manager = PassManager(Config(values={}))
    for analysis_id, result in dftpass.api.ANALYSIS_RESULTS.items():
        run = manager.registry[analysis_id].run
        assert run.__annotations__.get("return") in (result.__name__, result), analysis_id


@pytest.fixture(scope="module")
def printed(tmp_path_factory) -> str:
    """What a broken plugin, a raising rule, a raising analysis and a strict run print."""
    tmp = tmp_path_factory.mktemp("docs-messages")
    src, site = tmp / "src", tmp / "site"
    src.mkdir()
    for rel, text in BROKEN.items():
        (src / rel).write_text(text)
    subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation",
                    "--target", str(site), str(src)], check=True, capture_output=True)
    root = tmp / "p"
    root.mkdir()
    (root / "train.py").write_text(TRAIN)
    env = _user_plugin(tmp, "shaky", HALF_DONE)
    env["PYTHONPATH"] = f"{env['PYTHONPATH']}:{site}"
    out = []
    for args in (["plan", root, "--select", "ML-R*,SHAKY-1,NEEDS-1"],
                 ["plan", root, "--select", "ML-R*,SHAKY-1", "--strict-plugins"]):
        r = run_dftpass(*args, env=env)
        out.append(r.stdout + r.stderr)
    return "\n".join(out)


#: the names in the docs' quoted messages -> those of the failures the fixture provokes, line by line
REAL_NAMES = [
    {"'acme'": "'broken'", "acme-dftpass": "dftpass-broken-plugin"},
    {"ACME-1": "SHAKY-1", "'acme'": "'shaky'", "acme-dftpass 0.1": "module shaky"},
    {"ACME-1": "NEEDS-1", "acme_facts": "broken_facts", "'acme'": "'shaky'", "acme-dftpass 0.1": "module shaky"},
    {"ACME-1": "SHAKY-1", "'acme'": "'shaky'"},
]


def test_the_quoted_messages_are_the_printed_ones(printed):
    quoted = [line for block in _blocks("text") for line in block.splitlines() if line.strip()]
    assert len(quoted) == len(REAL_NAMES)
    for line, names in zip(quoted, REAL_NAMES):
        want = line.removesuffix("...")
        for a, b in names.items():
            want = want.replace(a, b)
        assert want in printed, f"docs quote {line!r}, but nothing printed {want!r}:\n{printed}"
