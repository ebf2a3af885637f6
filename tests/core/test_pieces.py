"""Regenerating only the edited statements gives byte for byte what regenerating the whole
file gives (the whole-file transform is the oracle), and parses a fraction of the file."""

from __future__ import annotations

import libcst as cst
import pytest

import dftpass.core.pieces as pieces
from dftpass.core import pipeline
from dftpass.core.config import cli_overrides, load_config
from dftpass.core.edits import Decorate, EditSet, InsertAfter, InsertBefore, WrapBody, WrapStmt
from dftpass.core.linebytes import keep_original_bytes
from dftpass.core.rewrite import transform
from tests.conftest import FIXTURES


def B(*steps):  # noqa: N802 - a statement path, read like the summary's
    return tuple(("body", i) for i in steps)


def both(source: bytes, edits, api=(), std=(), anchor=0):
    """(pieces, whole file): the edited file both ways."""
    es = EditSet("m.py")
    for e in edits:
        assert es.add(e)
    es.api_imports, es.std_imports = list(api), list(std)
    cut = pieces.apply_in_pieces(source, es, anchor)
    whole = transform(cst.parse_module(source), es.edits, es.api_imports, es.std_imports, anchor)
    return cut, keep_original_bytes(source, whole.bytes)


CLASS = b'''"""Doc."""
import os

# a comment above the class


class Trainer:
    """A trainer."""

    @staticmethod
    # between the decorator and def
    def load(path):
        return open(path).read()

    def fit(self, loader):
        for batch in loader:
            self.step(batch)
            # trailing, indented under the loop

    def step(self, batch):
        return batch


if __name__ == "__main__":
    Trainer().fit([1, 2])
'''

CASES = {
    "decorators go innermost, below a comment after the last one": (
        CLASS, [Decorate("T", 12, "x", B(2, 1), "dlp.log"), Decorate("T", 15, "x", B(2, 2), "ai.compute", rank=1),
                Decorate("T", 15, "x", B(2, 2), "dlp.log")], [("dft_fn", "dft_fn")], 1),
    "a logger above the class: its comments stay above the class": (
        CLASS, [InsertBefore("T", 7, "x", B(2), 'dlp = dft_fn("m")', take_comments=False),
                Decorate("T", 20, "x", B(2, 3), "dlp.log")], [("dft_fn", "dft_fn")], 1),
    "a region around a statement in a method": (
        CLASS, [WrapStmt("T", 17, "x", B(2, 2, 0, 0), "ai.compute"), InsertAfter("T", 17, "x", B(2, 2, 0), "n = 1")],
        [("ai", "ai")], 1),
    "code after a loop whose block ends in an indented comment": (
        CLASS, [InsertAfter("T", 16, "x", B(2, 2, 0), "done()")], [], 1),
    "code above a block's first statement, below no comment of its own": (
        CLASS, [InsertBefore("T", 9, "x", B(2, 1), "before()", take_comments=False)], [], 1),
    "a body wrapped and the main guard edited": (
        CLASS, [WrapBody("T", 20, "x", B(2, 3), "ai.compute"), InsertBefore("T", 24, "x", B(3, 0), "start()")],
        [("ai", "ai")], 1),
    "the imports join an existing dftracer import": (
        b"import os\nfrom dftracer.python import dft_fn\n\n\ndef f():\n    return 1\n",
        [Decorate("T", 5, "x", B(2), "ai.compute")], [("ai", "ai")], 2),
    "the imports go first, below the header comments": (
        b"# Copyright\n# License\n\ndef f():\n    return 1\n",
        [Decorate("T", 4, "x", B(0), "dlp.log")], [("dft_fn", "dft_fn")], 0),
    "the imports go above a function whose last statement holds an edit": (
        b"def train(loader):\n    for x in loader:\n        f(x)\n\n\ndef main():\n    train([])\n",
        [InsertBefore("T", 3, "x", B(0, 0, 0), "ai.update(step=1)", take_comments=False)], [("ai", "ai")], 0),
    "CRLF endings": (
        b"import os\r\n\r\n\r\nclass A:\r\n    def f(self):\r\n        return 1\r\n",
        [WrapStmt("T", 6, "x", B(1, 0, 0), "ai.compute")], [("ai", "ai")], 1),
    "CRLF at the top, LF below": (
        b"import os\r\n\r\n\r\nclass A:\n    def f(self):\n        x = 1\n        return x\n",
        [InsertBefore("T", 6, "x", B(1, 0, 0), "start()"), Decorate("T", 5, "x", B(1, 0), "dlp.log")],
        [("dft_fn", "dft_fn")], 1),
    "tabs": (
        b"class A:\n\tdef f(self):\n\t\tx = 1\n\t\treturn x\n",
        [WrapStmt("T", 3, "x", B(0, 0, 0), "ai.compute")], [("ai", "ai")], 0),
    "no newline at the end": (
        b"import os\n\ndef f():\n    return os.sep",
        [WrapStmt("T", 4, "x", B(1, 0), "ai.compute", bind="_r")], [("ai", "ai")], 1),
    "semicolons and a one-line suite": (
        b"import os\nif os.sep: a = 1; b = 2\nc = 3; d = 4\n",
        [InsertBefore("T", 3, "x", B(3), "x()"), InsertAfter("T", 2, "x", B(1, 1), "y()")], [], 1),
}


@pytest.mark.parametrize("name", list(CASES))
def test_pieces_give_what_the_whole_file_gives(name):
    source, edits, api, anchor = CASES[name]
    cut, whole = both(source, edits, api, (), anchor)
    assert cut is not None, "the file was not cut"
    assert cut == whole
    compile(cut, "m.py", "exec")


def test_a_file_whose_indentation_varies_is_left_to_the_whole_file_transform():
    """A new block is indented like the file's first one: a piece whose own first block is
    indented otherwise would indent it differently."""
    source = b"def g():\n    return 0\n\n\nclass A:\n  def f(self, x):\n      if x:\n          return 1\n"
    cut, _ = both(source, [WrapStmt("T", 7, "x", B(1, 0, 0), "ai.compute")], [("ai", "ai")])
    assert cut is None


def test_a_file_in_another_encoding_is_left_to_the_whole_file_transform():
    source = "# -*- coding: latin-1 -*-\ndef f():\n    return 'é'\n".encode("latin-1")
    cut, _ = both(source, [Decorate("T", 2, "x", B(0), "dlp.log")])
    assert cut is None


def test_one_edited_method_parses_a_small_part_of_a_large_file(monkeypatch):
    methods = "".join(f"    def m{i}(self, x):\n        y = x + {i}\n        return y * 2\n\n" for i in range(400))
    source = f"import os\n\n\nclass Big:\n{methods}".encode()
    edits = [WrapStmt("T", 6, "x", B(1, 0, 0), "ai.compute")]
    _, whole = both(source, edits, [("ai", "ai")], (), 1)
    parsed: list[int] = []
    real = cst.parse_module
    monkeypatch.setattr(pieces.cst, "parse_module", lambda text, *a, **k: parsed.append(len(text)) or real(text))
    cut, _ = both(source, edits, [("ai", "ai")], (), 1)
    assert cut == whole
    # the oracle's parse of the whole file is the last one
    assert parsed[-1] == len(source) and sum(parsed[:-1]) < len(source) / 50, parsed


@pytest.mark.parametrize("app", sorted(p.name for p in (FIXTURES / "apps").iterdir() if p.is_dir()))
def test_every_fixture_app_is_annotated_alike_both_ways(app, monkeypatch):
    """The real plan over each fixture app (every rule, program mode), with and without
    the pieces: the same bytes in every file."""
    root = FIXTURES / "apps" / app
    config = load_config(root, cli_overrides(None, None, 1, ["project.kind=program"]))
    cut = pipeline.annotate(root, config, "plan", jobs=1)
    monkeypatch.setattr(pieces, "apply_in_pieces", lambda *a: None)
    whole = pipeline.annotate(root, config, "plan", jobs=1)
    assert cut.files.keys() == whole.files.keys()
    for rel, result in cut.files.items():
        assert result.error is None and result.new == whole.files[rel].new, rel


def test_a_one_line_definition_stays_one_line_under_inserted_code():
    """Code above ``def f(): ...`` leaves its body where it is (found on transformers'
    ``@overload`` stubs, which the whole-file transform used to expand)."""
    source = b"import os\n\n\nclass Cache(Base): ...\ndef f(x) -> int: ...\n"
    cut, whole = both(source, [InsertBefore("T", 4, "x", B(1), 'dlp = dft_fn("m")', take_comments=False),
                               InsertAfter("T", 5, "x", B(2), "g()")], [("dft_fn", "dft_fn")], (), 1)
    assert cut == whole
    assert b"\nclass Cache(Base): ...\ndef f(x) -> int: ...\ng()\n" in cut, cut.decode()
