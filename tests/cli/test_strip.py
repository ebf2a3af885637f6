"""``dftpass strip``: the exact way back, also after hand edits; hand annotations stay unless --all."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from tests.conftest import APPS, tree_bytes

SHAPES = ["torch_basic", "script_memmap", "next_trainer", "stream_partial", "bench_factories", "namespace_model", "spawn_workers"]


@pytest.mark.parametrize("app", SHAPES)
def test_strip_gives_back_the_original_bytes(cli, tmp_path, app):
    annotated, stripped = tmp_path / "annotated", tmp_path / "stripped"
    assert cli("run", APPS / app, "--out", annotated).code == 0
    assert tree_bytes(annotated) != tree_bytes(APPS / app)
    r = cli("strip", annotated, "--out", stripped)
    assert r.code == 0, r.err
    assert tree_bytes(stripped) == {k: v for k, v in tree_bytes(APPS / app).items() if "__pycache__" not in k}


def test_strip_in_place_keeps_backups_and_forgets_the_record(cli, tmp_path):
    project = tmp_path / "p"
    shutil.copytree(APPS / "namespace_model", project)
    original = tree_bytes(project)
    assert cli("run", project, "--in-place").code == 0
    assert (project / ".dftpass" / "annotations.json").is_file()
    assert cli("strip", project, "--in-place").code == 0
    assert tree_bytes(project) == original
    assert not (project / ".dftpass" / "annotations.json").exists()
    assert len(list((project / ".dftpass" / "backup").iterdir())) == 2  # the run's, the strip's


def test_strip_after_hand_edits_keeps_the_edits_and_the_hand_annotations(cli, tmp_path):
    annotated = tmp_path / "annotated"
    assert cli("run", APPS / "namespace_model", "--out", annotated).code == 0
    train = annotated / "train.py"
    text = train.read_text()
    # the user edits the annotated tree: a new helper with a region of their own, a comment
    # that moves lines down, and a changed learning rate
    text = text.replace("@ai.pipeline.train\ndef train_epoch(", "def log_loss(value):\n    with ai.other.log:\n"
                                                                "        print(value)\n\n\n@ai.pipeline.train\n"
                                                                "def train_epoch(", 1)
    text = text.replace("    parser = argparse.ArgumentParser()", "    # arguments\n    parser = argparse.ArgumentParser()")
    text = text.replace("lr=0.1", "lr=0.2")
    train.write_text(text)
    stripped = tmp_path / "stripped"
    r = cli("strip", annotated, "--out", stripped)
    assert r.code == 0, r.err
    expected = (APPS / "namespace_model" / "train.py").read_text()
    expected = expected.replace("def train_epoch(", "def log_loss(value):\n    with ai.other.log:\n        print(value)\n\n\n"
                                                    "def train_epoch(", 1)
    expected = expected.replace("    parser = argparse.ArgumentParser()",
                                "    # arguments\n    parser = argparse.ArgumentParser()").replace("lr=0.1", "lr=0.2")
    got = (stripped / "train.py").read_text()
    # the hand region stays, and so does the import it needs
    assert "with ai.other.log:" in got and "from dftracer.python import ai" in got
    assert got.replace("from dftracer.python import ai\n", "", 1) == expected
    everything = tmp_path / "everything"
    assert cli("strip", annotated, "--all", "--out", everything).code == 0
    assert "with ai.other.log" not in (everything / "train.py").read_text()
    assert (everything / "train.py").read_text() == expected.replace("    with ai.other.log:\n        print(value)",
                                                                      "    print(value)")


def test_strip_all_removes_hand_annotations_made_through_a_re_export(cli, tmp_path):
    out = tmp_path / "out"
    r = cli("strip", APPS / "hand_annotated", "--all", "--out", out)
    assert r.code == 0, r.err
    train = (out / "handapp" / "train.py").read_text()
    assert "dft_ai." not in train and "@dft_ai" not in train
    assert "PerfTrace.initialize_log" in train  # a hand-written initialization is kept
    compile(train, "train.py", "exec")
    plan = cli("plan", out, "--no-diff")  # dftpass would put the regions back where they were
    assert "ML-R6 batch loop" in plan.out and "ML-R2 train phase" in plan.out


def test_strip_without_a_record_asks_for_all(cli, tmp_path):
    r = cli("strip", APPS / "hand_annotated", "--out", tmp_path / "out")
    assert r.code == 2 and "no record of what dftpass wrote here" in r.err


READER = """import threading

import numpy as np

LOCK = threading.Lock()


class NpyReader:
    def open(self, filename):
        return(np.load(filename))  # one sample a file

    def open_locked(self, filename):
        with LOCK:
            return np.load(filename)


def handwritten(filename):
    _dft_read = np.load(filename)
    return _dft_read
"""


@pytest.mark.parametrize("how", [[], ["--all"]], ids=["record", "all"])
def test_strip_gives_back_a_returned_read_that_was_named_to_be_measured(cli, tmp_path, how):
    """ML-R25 names a read that is returned at once (``_dft_read = np.load(p)`` in the region,
    ``return _dft_read`` after it); strip, from the record or by shape, gives the return back,
    spacing included, also inside the program's own ``with``, and leaves a user's own
    ``_dft_read`` alone when it knows (the record)."""
    project = tmp_path / "p"
    project.mkdir()
    (project / "reader.py").write_text(READER)
    (project / "data.py").write_text(
        "from torch.utils.data import Dataset\n\nfrom reader import NpyReader\n\n\nclass Samples(Dataset):\n"
        "    def __init__(self):\n        self.reader = NpyReader()\n\n    def __getitem__(self, i):\n"
        "        return self.reader.open(f'{i}.npy'), self.reader.open_locked(f'{i}.npy')\n")
    annotated, stripped = tmp_path / "annotated", tmp_path / "stripped"
    assert cli("run", project, "--out", annotated, "--select", "ML-R25", "--set", "project.kind=program").code == 0
    text = (annotated / "reader.py").read_text()
    assert "_dft_read =(np.load(filename))  # one sample a file" in text and "        return _dft_read\n" in text
    # a read returned from inside the program's own ``with`` is named there too, and given back there
    assert "        with LOCK:\n            with ai.data.io.read:\n" in text and "            return _dft_read\n" in text
    r = cli("strip", annotated, "--out", stripped, *how)
    assert r.code == 0, r.err
    got = (stripped / "reader.py").read_text()
    if how:  # by shape: the hand-written pair is dftpass's shape too, and becomes one return
        assert got == READER.replace("    _dft_read = np.load(filename)\n    return _dft_read",
                                     "    return np.load(filename)")
    else:
        assert got == READER


FRAMEWORK_PROGRAMS = {
    "fit_lightning.py": (
        "import lightning as L\nimport torch\n\n\nclass Regressor(L.LightningModule):\n"
        "    def __init__(self):\n        super().__init__()\n        self.net = torch.nn.Linear(4, 1)\n\n"
        "    def training_step(self, batch, batch_idx):\n        x, y = batch\n"
        "        return torch.nn.functional.mse_loss(self.net(x), y)\n\n\n"
        "def main(dm):\n    trainer = L.Trainer(max_epochs=2)\n    trainer.fit(Regressor(), datamodule=dm)\n"),
    "fit_keras.py": (
        "import keras\nimport numpy as np\n\nmodel = keras.Sequential([keras.layers.Dense(1)])\n"
        "model.compile(loss='mse')\nmodel.fit(np.zeros((8, 2)), np.zeros((8, 1)), epochs=1)\n"),
}


@pytest.mark.parametrize("how", [[], ["--all"]], ids=["record", "all"])
def test_strip_takes_out_the_framework_callbacks_and_their_import(cli, tmp_path, how):
    """ML-R12/R13 add one line where the trainer is built or ``fit`` is called, and the import
    of dftpass.runtime; strip, from the record or by shape, gives the original bytes back."""
    project = tmp_path / "p"
    project.mkdir()
    for name, text in FRAMEWORK_PROGRAMS.items():
        (project / name).write_text(text)
    annotated, stripped = tmp_path / "annotated", tmp_path / "stripped"
    r = cli("run", project, "--out", annotated, "--select", "ML-R12", "--select", "ML-R13",
            "--set", "project.kind=program")
    assert r.code == 0, r.err
    assert "trainer.callbacks.append(_dft_runtime.LightningCallback())" in (annotated / "fit_lightning.py").read_text()
    assert "callbacks=[_dft_runtime.KerasCallback()]" in (annotated / "fit_keras.py").read_text()
    if how:  # by shape alone: the record is gone (a tree copied without its .dftpass)
        shutil.rmtree(annotated / ".dftpass")
    r = cli("strip", annotated, "--out", stripped, *how)
    assert r.code == 0, r.err
    for name, text in FRAMEWORK_PROGRAMS.items():
        assert (stripped / name).read_text() == text, name


#: DLIO's shape: one module imports dftracer's logger under its own name, forty others import
#: it from there and make module loggers, update and iterate with them
DLIO_UTIL = "import time\nfrom dftracer.python import dft_fn as Profile, ai as dft_ai\n\n\ndef utcnow():\n    return 0 * time.time()\n"
DLIO_READER = '''from pkg.util import Profile, dft_ai, utcnow

dlp = Profile("reader")


class Reader:
    @dlp.log
    def read(self, i):
        dlp.update(image_size=4)
        with Profile(cat="reader", name="inner"):
            x = i * 2
        for j in dlp.iter(range(3)):
            x += j
        return x + utcnow()


@dft_ai.data.item
def item(i):
    return Reader().read(i)


if __name__ == "__main__":
    print(item(3))
'''
DLIO_BARE = '''from pkg.util import utcnow


class Reader:
    def read(self, i):
        x = i * 2
        for j in range(3):
            x += j
        return x + utcnow()


def item(i):
    return Reader().read(i)


if __name__ == "__main__":
    print(item(3))
'''


def test_strip_all_takes_out_a_re_exported_logger_and_keeps_the_import_others_need(cli, tmp_path):
    """Every use of the re-exported logger goes (the module logger, its decorators, updates,
    ``with``, ``iter``) and so does the importer's import of it; the module that re-exports it
    keeps its dftracer import, which other modules still name (taking it out broke every
    module of DLIO's stripped tree with an ImportError)."""
    project = tmp_path / "proj"
    (project / "pkg").mkdir(parents=True)
    (project / "pkg" / "__init__.py").write_text("")
    (project / "pkg" / "util.py").write_text(DLIO_UTIL)
    (project / "pkg" / "other.py").write_text("from pkg.util import Profile\n\nlog = Profile('other')\n\n\n"
                                              "@log.log\ndef f():\n    return 1\n")
    (project / "pkg" / "reader.py").write_text(DLIO_READER)
    out = tmp_path / "bare"
    assert cli("strip", project, "--all", "--out", out).code == 0
    assert (out / "pkg" / "reader.py").read_text() == DLIO_BARE
    assert (out / "pkg" / "util.py").read_text() == DLIO_UTIL  # still imported from by other.py (before strip)
    done = subprocess.run([sys.executable, "-m", "pkg.reader"], cwd=out, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0 and done.stdout == "9.0\n", done.stderr


DOCSTRING_THEN_DEF = '''"""A module whose docstring is followed by a definition, and no import."""


def mix(table: dict, names: tuple, prefix: str = "m") -> dict:
    """Work enough for a generic region: the logger goes above it, the imports below the docstring."""
    out = table.copy()
    for name in names:
        key = f"{prefix}.{name}".lower()
        out[key.title()] = name.encode().hex().zfill(8).count("0")
        out[key.casefold()] = name.find("a") + name.rfind("b") + name.index(name[0])
        out[key.swapcase()] = name.capitalize().center(12).expandtabs().isidentifier()
    out.update(table)
    return out
'''


def test_strip_gives_back_the_blank_lines_under_a_docstring_when_the_logger_went_first(cli, project, tmp_path):
    """The imports go under the docstring and ML-R19's logger above the definition; the blank
    line the imports gave the logger must go with the logger, not from the ``def`` (found on
    transformers 5.23.0: two files one blank line short)."""
    root = project({"m.py": DOCSTRING_THEN_DEF})
    annotated, stripped = tmp_path / "annotated", tmp_path / "stripped"
    r = cli("run", root, "--out", annotated, "--set", "project.kind=program")
    assert r.code == 0, r.err
    assert "dlp = dft_fn(" in (annotated / "m.py").read_text() and "@dlp.log\ndef mix" in (annotated / "m.py").read_text()
    assert cli("strip", annotated, "--out", stripped).code == 0
    assert (stripped / "m.py").read_text() == DOCSTRING_THEN_DEF


def test_strip_all_takes_out_what_dftpass_wrote_through_its_runtime(cli, tmp_path):
    """Without the record (``.dftpass`` deleted), ``--all`` still recognises the runtime's
    lines dftpass writes: the lifecycle (``initialize``), the workers' initializer, the logged
    parameters and the sizes measured by ``nbytes``, and the runtime's import with them."""
    annotated = tmp_path / "annotated"
    assert cli("run", APPS / "torch_basic", "--out", annotated).code == 0
    text = (annotated / "train.py").read_text()
    for line in ("_dft_runtime.initialize()", "_dft_runtime.worker_init(", "_dft_runtime.log_parameters("):
        assert line in text, line
    shutil.rmtree(annotated / ".dftpass")
    out = tmp_path / "stripped"
    assert cli("strip", annotated, "--all", "--out", out).code == 0
    for name in ("train.py", "data.py", "checkpoint.py", "model.py"):
        got = (out / name).read_text()
        assert "_dft_runtime" not in got and "dftracer" not in got, name
        assert got == (APPS / "torch_basic" / name).read_text(), name
