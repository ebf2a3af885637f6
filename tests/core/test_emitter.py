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


@pytest.mark.parametrize("key", sorted(emitter.DERIVED))
def test_every_derived_node_we_emit_exists_with_its_category_and_event_name(key):
    path, name = key
    cat, event = emitter.DERIVED[key]
    node = node_object(path).derive(name=name)
    assert (node.cat, node.name) == (cat, event)
    assert node_object(path).derive(name=name) is node  # cached by name: cheap in a decorator
    code = emitter.FileNames(summarize(b"", "m.py", "m")).derived(path, name)
    assert eval(code, {"ai": dftracer_python.ai}) is node
    fs = summarize(f"from dftracer.python import ai\n\n\n@{code}\ndef f(b):\n    return b\n".encode(), "m.py", "m")
    assert emitter.is_derived(fs, fs.function("f").decorators[0], path)
    assert not emitter.is_node(fs, fs.function("f").decorators[0], path)
    with pytest.raises(KeyError):
        emitter.FileNames(fs).derived(path, "no-such-child")


class _Tracer:
    """Stands in for ``dftracer.get_instance()``: records what the emitted block logs."""

    def __init__(self, on: bool) -> None:
        self.logger = object() if on else None
        self.lines: list[tuple[str, str]] = []

    def get_instance(self):
        return self

    def log_metadata_event(self, key, value):
        assert isinstance(key, str) and isinstance(value, str)  # the native method takes nothing else
        self.lines.append((key, value))


def test_metadata_block_logs_escaped_fields_only_when_tracing_and_never_raises(monkeypatch):
    """One line per configuration in the program (``dftpass.runtime.log_parameters``); the
    runtime writes each field escaped, only while tracing, and never raises."""
    import argparse
    import json

    dftracer_python = pytest.importorskip("dftracer.python", reason="dftracer is not installed")
    from dftpass.runtime import log_parameters

    class Unprintable:
        def __str__(self):
            raise RuntimeError("no")

    fs = summarize(b"import argparse\n", "m.py", "m")
    names = emitter.FileNames(fs)
    code = names.metadata([("args", "args", False), ("cfg", "cfg", True), ("bad", "bad", True)])
    assert code == ('_dft_runtime.log_parameters("args", args)\n_dft_runtime.log_parameters("cfg", cfg)\n'
                    '_dft_runtime.log_parameters("bad", bad)\n')
    assert names.imports_needed() == ([], [("dftpass.runtime", "_dft_runtime")])
    args = argparse.Namespace(lr=0.1, note='a "q" \\ b\nc', big="x" * 5000)
    cfg = {"model": {"depth": 2}, "n": None}
    bad = {"ok": 1, "broken": Unprintable(), "after": 2}
    for on in (False, True):
        tracer = _Tracer(on)
        monkeypatch.setattr(dftracer_python, "dftracer", tracer)
        for prefix, value in (("args", args), ("cfg", cfg), ("bad", bad)):
            log_parameters(prefix, value)
        if not on:
            assert tracer.lines == []
            continue
        logged = dict(tracer.lines)
        # the JSON line dftracer writes, with key and value pasted in unescaped, parses back
        back = {json.loads(f'"{k}"'): json.loads(f'"{v}"') for k, v in logged.items()}
        assert back["args.lr"] == "0.1" and back["args.note"] == args.note
        assert back["args.big"] == "x" * emitter.METADATA_VALUE_MAX
        assert back["cfg.model"] == "{'depth': 2}" and back["cfg.n"] == "None"
        assert back["bad.ok"] == "1" and "bad.broken" not in back  # a failing field ends its own fields only


def test_metadata_calls_are_recognised():
    assert emitter.is_metadata_call("dftracer.get_instance().log_metadata_event")
    assert emitter.is_metadata_call("log.log_metadata_event")
    assert not emitter.is_metadata_call("log_metadata_event")
