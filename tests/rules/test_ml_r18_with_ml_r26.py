"""ML-R18 and ML-R26 in one run: the I/O phase nests inside the checkpoint region, the sizes are
measured in memory, and the emitted constructs exist in the installed dftracer."""

from __future__ import annotations

import pytest

from dftpass.core import emitter
from dftpass.core.config import Config, Source, Value
from dftpass.core.pipeline import annotate
from dftpass.core.strip import strip_source
from dftpass.core.summary import summarize

LOOP = (
    "import torch\n\n\ndef train(model, optimizer, loader, epochs, path):\n"
    "    state = torch.load(path)\n    model.load_state_dict(state['model'])\n"
    "    optimizer.load_state_dict(state['optimizer'])\n    for epoch in range(epochs):\n"
    "        for x, y in loader:\n            model(x).loss(y).backward()\n            optimizer.step()\n"
    "        if epoch % 5 == 0:\n            torch.save(model.state_dict(), path + '.model')\n"
    "            torch.save(optimizer.state_dict(), path + '.optim')\n"
)


def _run(project, source: str, mode: str = "run"):
    root = project({"train.py": source})
    src = Source("test")
    config = Config(values={"rules.select": Value(["ML-R18", "ML-R26"], src), "plugins.disable": Value([], src),
                            "project.kind": Value("program", src),
                            "emit.skip-dynamo-import": Value(False, src),
                            # the regions as ``with`` blocks, whose nesting the lines below read
                            "emit.lean-regions": Value(False, src)})
    return annotate(root, config, mode, jobs=1)


def test_the_io_phase_nests_inside_the_statement_region_and_strip_gives_the_file_back(project):
    result = _run(project, LOOP)
    fr = result.files["train.py"]
    new = fr.new.decode()
    lines = [line.strip() for line in new.splitlines()]
    # restart: start, the read inside its own with, the restart's statements, stop
    start = lines.index("ai.checkpoint.restart.start()")
    assert lines[start + 1] == "with ai.checkpoint.io.read:"
    assert lines[start + 2] == "state = torch.load(path)"
    assert lines[start + 3].startswith("ai.checkpoint.io.read.update(image_size=sum(")
    assert lines[start + 6] == "ai.checkpoint.restart.stop()"
    # capture: one region for both saves, each write with its own size
    start = lines.index("ai.checkpoint.capture.start()")
    assert lines[start + 1] == "with ai.checkpoint.io.write:"
    assert lines[start + 3].startswith("ai.checkpoint.io.write.update(image_size=")
    # the model's class is known: its parameters and buffers, measured inline (no -1 fallback)
    assert "[*model.parameters(), *model.buffers()]" in lines[start + 3] and "-1" not in lines[start + 3]
    assert lines[start + 4] == "with ai.checkpoint.io.write:"
    assert "list(optimizer.state.values())" in lines[start + 6] and "-1" not in lines[start + 6]
    assert lines[start + 7] == "ai.checkpoint.capture.stop()"
    compile(new, "train.py", "exec")
    stripped = strip_source(fr.new, [fr.provenance])
    assert stripped.new == fr.original


def test_a_second_run_changes_nothing(project):
    first = _run(project, LOOP)
    again = _run(lambda files: project(files, name="again"), first.files["train.py"].new.decode())
    assert not again.changed() and not again.edits()


def test_the_innermost_saver_is_decorated_and_its_caller_is_not(project):
    source = (
        "import torch\n\n\ndef write(state, path):\n    torch.save(state, path)\n\n\n"
        "def save_checkpoint(model, path):\n    state = {'model': model.state_dict()}\n    write(state, path)\n"
    )
    result = _run(project, source)
    new = result.files["train.py"].new.decode()
    assert "@ai.checkpoint.capture\ndef write(" in new
    assert "@ai.checkpoint.capture\ndef save_checkpoint(" not in new
    assert "ai.checkpoint.capture.start()" not in new  # the caller's call is covered by write's region


# -- what the emitted code does, against the installed packages ----------------------------------

dftracer_python = pytest.importorskip("dftracer.python", reason="the dftracer package is not installed")


def test_checkpoint_init_is_a_constructor_decorator_writing_checkpoint_init():
    names = emitter.FileNames(summarize(b"", "m.py", "m"))
    assert names.init_decorator("checkpoint") == "ai.checkpoint.init"
    with pytest.raises(KeyError):
        names.init_decorator("compute.forward")
    cat, name = emitter.INIT_NODES["checkpoint"]
    node = dftracer_python.ai.checkpoint.init()
    assert (node.cat, node.name) == (cat, name) == ("checkpoint", "checkpoint.init")

    class Saver:
        @dftracer_python.ai.checkpoint.init
        def __init__(self, x):
            self.x = x

    assert Saver(3).x == 3


def test_the_size_expressions_measure_in_memory_and_never_raise():
    torch = pytest.importorskip("torch")
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.BatchNorm1d(3))
    optimizer = torch.optim.AdamW(model.parameters())
    model(torch.randn(2, 4)).sum().backward()
    optimizer.step()
    state_bytes = sum(t.element_size() * t.nelement() for t in model.state_dict().values())
    checkpoint = {"model": model.state_dict(), "optimizer": optimizer.state_dict(), "epoch": 3, "args": object(),
                  "history": [1.0, None, "x"]}
    scope = {"torch": torch, "model": model, "optimizer": optimizer, "checkpoint": checkpoint,
             "tensors": dict(model.state_dict()), "other": object()}

    def size(value, kind):
        return eval(emitter.image_size(value, kind, torch="torch"), scope)

    assert size("model", "module") == state_bytes
    moments = sum(t.element_size() * t.nelement() for s in optimizer.state.values() for t in s.values())
    assert size("optimizer", "optimizer") == moments
    assert size("checkpoint", "state") == state_bytes + moments
    assert size("tensors", "tensors") == state_bytes
    # the walk of a checkpoint's tensors counts anything else as 0, never an exception
    assert size("other", "state") == 0
    # a module or optimizer not known to be one is measured by dftpass.runtime.nbytes
    from dftpass.runtime import nbytes

    assert nbytes(model) == state_bytes and nbytes(optimizer) == moments and nbytes(object()) == 0
    assert all("-1" not in expression for expression in emitter.IMAGE_SIZE.values())
