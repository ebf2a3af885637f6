"""A framework plugin teaches the analyses its library through ``dftpass_knowledge``."""

from __future__ import annotations

import sys

import pytest

PLUGIN = '''
from dftpass.core.hookspecs import hookimpl


@hookimpl
def dftpass_knowledge():
    return {"loader_factories": ["StreamLoader"], "module_bases": ["fancylib.nn.Layer"],
            "module_call_methods": ["call"]}
'''

TRAIN = '''import torch
from fancylib import nn
from fancylib.io import StreamLoader


class Net(nn.Layer):
    def call(self, x):
        return x * 2


def train(model, data, opt):
    feed = StreamLoader(data)
    for x in feed:
        model(x).backward()
        opt.step()


if __name__ == "__main__":
    train(Net(), [1, 2], torch.optim.SGD([], lr=0.1))
'''


def plugin_module(tmp_path, monkeypatch, name: str, source: str) -> str:
    """Write a one-file plugin named ``name`` on the import path; the ``--set`` that loads it."""
    (tmp_path / f"{name}_src").mkdir()
    (tmp_path / f"{name}_src" / f"{name}.py").write_text(source)
    monkeypatch.syspath_prepend(str(tmp_path / f"{name}_src"))
    monkeypatch.delitem(sys.modules, name, raising=False)
    return f"plugins.load=[{name}]"


@pytest.fixture
def knowledge_plugin(tmp_path, monkeypatch):
    (tmp_path / "plugin_src").mkdir()
    (tmp_path / "plugin_src" / "paddle_knowledge.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path / "plugin_src"))
    yield "plugins.load=[paddle_knowledge]"
    sys.modules.pop("paddle_knowledge", None)


def test_a_plugin_s_loader_and_model_classes_are_recognised(cli, project, knowledge_plugin):
    root = project({"train.py": TRAIN})
    without = cli("plan", root, "--no-diff")
    # without the plugin the step alone shows the batch loop (issue 39), not what feeds it
    assert "ML-R6 batch loop: runs a step" in without.out and "a data loader" not in without.out
    assert "forward of model" not in without.out
    with_plugin = cli("plan", root, "--no-diff", "--set", knowledge_plugin)
    assert with_plugin.code == 0, with_plugin.err
    assert "train.py:13: ML-R6 batch loop: iterates feed, a data loader" in with_plugin.out
    assert "train.py:7: ML-R7 forward of model Net" in with_plugin.out


def test_an_unknown_kind_of_knowledge_names_the_plugin(cli, project, tmp_path, monkeypatch):
    (tmp_path / "bad_src").mkdir()
    (tmp_path / "bad_src" / "bad_knowledge.py").write_text(
        "from dftpass.core.hookspecs import hookimpl\n\n\n@hookimpl\ndef dftpass_knowledge():\n"
        "    return {'loaders': ['X']}\n")
    monkeypatch.syspath_prepend(str(tmp_path / "bad_src"))
    r = cli("plan", project({"train.py": TRAIN}), "--set", "plugins.load=[bad_knowledge]")
    assert r.code == 3
    assert "plugin 'bad_knowledge' gives knowledge of unknown kind 'loaders'" in r.err


DATA_PLUGIN = '''
from dftpass.core.hookspecs import hookimpl


@hookimpl
def dftpass_knowledge():
    return {"dataset_bases": ["fancylib.data.Source"]}
'''

DATA_TRAIN = '''import numpy as np
import torch
from fancylib.data import Source


class Shards(Source):
    def __init__(self, paths):
        self.paths = paths

    def __len__(self):
        return len(self.paths)

    def __getitem__(self, i):
        return np.load(self.paths[i])


def train(model, paths, opt):
    data = Shards(paths)
    for i in range(len(data)):
        model(torch.as_tensor(data[i])).sum().backward()
        opt.step()


if __name__ == "__main__":
    train(torch.nn.Linear(4, 1), ["a.npy"], None)
'''


CKPT_PLUGIN = '''
from dftpass.core.hookspecs import hookimpl


@hookimpl
def dftpass_knowledge():
    return {"checkpoint_methods": {"persist_shards": "save"}, "optimizer_classes": ["Muon"]}
'''

CKPT_TRAIN = '''import torch
from shardlib import Engine, Muon


def train(model, data, engine):
    tuner = Muon(model.parameters())
    for x in data:
        model(x).sum().backward()
        tuner.step()
    engine.persist_shards("ckpt/")


if __name__ == "__main__":
    train(torch.nn.Linear(4, 1), [torch.zeros(4)], Engine())
'''


def test_a_fact_two_plugins_disagree_on_names_the_plugin():
    from dftpass.core.manager import PluginError, merge_knowledge
    from dftpass.plugins.library import builtin_knowledge

    with pytest.raises(PluginError, match=r"plugin 'mine' gives checkpoint_methods\['save_weights'\] = 'load'"):
        merge_knowledge([("builtin", builtin_knowledge()), ("mine", {"checkpoint_methods": {"save_weights": "load"}})])
    with pytest.raises(PluginError, match="plugin 'mine' gives knowledge 'checkpoint_methods' as a list"):
        merge_knowledge([("mine", {"checkpoint_methods": ["save_weights"]})])


def test_dftpass_s_own_facts_are_the_data_file_and_name_every_kind():
    """Every kind the hook accepts is in plugins/library.toml, with the shape the pass
    manager merges it as, and nothing else is (a fact is data in one place)."""
    from dftpass.core.manager import KNOWLEDGE_LISTS, KNOWLEDGE_TABLES
    from dftpass.plugins.library import builtin_knowledge

    own = builtin_knowledge()
    assert set(own) == set(KNOWLEDGE_LISTS) | set(KNOWLEDGE_TABLES)
    assert all(isinstance(own[k], list) for k in KNOWLEDGE_LISTS)
    assert all(isinstance(own[k], dict) for k in KNOWLEDGE_TABLES)


COMM_PLUGIN = '''
from dftpass.core.hookspecs import hookimpl


@hookimpl
def dftpass_knowledge():
    return {"collective_functions": {"ringlib": {"ring_allreduce": "all_reduce"}}}
'''

COMM_TRAIN = '''import torch
import ringlib.torch as ring


def train(model, data, opt):
    for x in data:
        model(x).sum().backward()
        for p in model.parameters():
            ring.ring_allreduce(p.grad)
        opt.step()


if __name__ == "__main__":
    net = torch.nn.Linear(4, 1)
    train(net, [torch.zeros(4)], torch.optim.SGD(net.parameters(), lr=0.1))
'''


#: what a plugin's facts teach, and the rules' findings that show it reached them: a data set
#: base (ML-R9 times its ``__getitem__``), a checkpoint method and an optimizer class (tables
#: and lists add up with plugins/library.toml), a collective library (module -> function ->
#: ``ai.comm`` node; it also makes the project distributed, which gates ML-R5)
TAUGHT = {
    "data set base": ("source_knowledge", DATA_PLUGIN, DATA_TRAIN, ["train.py:13: ML-R9"]),
    "checkpoint method and optimizer class": ("shard_knowledge", CKPT_PLUGIN, CKPT_TRAIN,
                                              ["train.py:10: ML-R18", "train.py:9: ML-R4"]),
    "collective library": ("ring_knowledge", COMM_PLUGIN, COMM_TRAIN, ["train.py:9: ML-R5 ringlib all-reduce"]),
}


@pytest.mark.parametrize("case", list(TAUGHT))
def test_what_a_plugin_teaches_reaches_the_rules(case, cli, project, tmp_path, monkeypatch):
    name, plugin, program, expected = TAUGHT[case]
    load = plugin_module(tmp_path, monkeypatch, name, plugin)
    root = project({"train.py": program})
    without = cli("plan", root, "--no-diff")
    with_plugin = cli("plan", root, "--no-diff", "--set", load)
    assert with_plugin.code == 0, with_plugin.err
    for finding in expected:
        assert finding not in without.out, without.out
        assert finding in with_plugin.out, with_plugin.out


DS_LOOP = '''{imports}


def train(model, train_ds, opt):
    for batch in train_ds:
        model(batch).sum().backward()
        opt.step()
'''


@pytest.mark.parametrize("imports, batch_loop", [
    ("import tensorflow as tf\nimport torch", True),
    ("import torch", False),
])
def test_a_framework_s_loader_names_count_only_where_the_framework_is_imported(cli, project, imports, batch_loop):
    """The TensorFlow plugin says ``train_ds`` holds a dataset (``loader_names``, by module):
    in a file that imports TensorFlow, not in torch code (torch's own sources have 70 entries
    and many a ``ds``: they were judged a program and rewritten, 533 MB of memory)."""
    root = project({"train.py": DS_LOOP.format(imports=imports)})
    out = cli("plan", root, "--no-diff", "--set", "project.kind=program").out
    assert ("ML-R6 batch loop: iterates train_ds" in out) == batch_loop, out
