"""The emitter's spellings, checked against the installed dftracer package (not a copy of it)."""

from __future__ import annotations

import operator

import pytest

from dftpass.core import emitter
from dftpass.core.summary import summarize

dftracer_python = pytest.importorskip("dftracer.python", reason="the dftracer package is not installed")


def node_object(path: str):
    return operator.attrgetter(path)(dftracer_python.ai) if path else dftracer_python.ai


@pytest.mark.parametrize("path", sorted(emitter.NODES))
def test_every_node_we_emit_exists_with_its_category_and_event_name(path):
    node = node_object(path)
    cat, name = emitter.NODES[path]
    assert node.cat == cat
    assert node.name == name
    for method in ("iter", "start", "stop", "update", "derive"):
        assert callable(getattr(node, method))


def test_the_names_that_do_not_exist_are_not_emitted():
    assert "comm.bcast" in emitter.NODES
    assert "comm.broadcast" not in emitter.NODES
    with pytest.raises(AttributeError):
        node_object("comm.broadcast")
    with pytest.raises(KeyError):
        emitter.FileNames(summarize(b"", "m.py", "m")).node("comm.broadcast")


def test_imported_symbols_exist():
    for symbol in ("ai", "dftracer", "dft_fn"):
        assert hasattr(dftracer_python, symbol)
    assert callable(dftracer_python.dftracer.initialize_log)
    assert callable(dftracer_python.dftracer.get_instance)


def test_recognize_reads_back_what_we_emit():
    fs = summarize(b"from dftracer.python import ai as A, dftracer\n", "m.py", "m")
    assert emitter.recognize(fs, "A.dataloader.fetch.iter") == "dataloader.fetch.iter"
    assert emitter.recognize(fs, "A") == ""
    assert emitter.is_initialize(fs, "dftracer.initialize_log")
    assert emitter.recognize(fs, "torch.save") is None
