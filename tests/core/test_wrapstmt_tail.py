"""``WrapStmt.tail``: statements inside a ``with`` region after the wrapped statement (the
``update(image_size=...)`` of what it read), applied and stripped back byte for byte."""

from __future__ import annotations

import ast

from dftpass.core.edits import EditSet, WrapStmt
from dftpass.core.emitter import FileNames, image_size
from dftpass.core.provenance import record
from dftpass.core.apply import apply_edits
from dftpass.core.strip import strip_source
from dftpass.core.summary import summarize


def wrap_reads(source: str) -> tuple[str, str]:
    """Wrap every ``x = np.load(...)`` in a read region with its update; return (new, stripped)."""
    data = source.encode()
    fs = summarize(data, "m.py", "m")
    names = FileNames(fs)
    es = EditSet("m.py")
    for fn in fs.functions:
        for call in fn.calls:
            if call.callee == "np.load" and call.stmt_kind == "assign":
                target = call.assigned_to[0]
                tail = (names.node_update("data.io.read", image_size=image_size(target, "ndarray")),)
                es.add(WrapStmt("T", call.line, "read", call.stmt, names.node("data.io.read"), tail))
    es.api_imports, es.std_imports = names.imports_needed()
    applied = apply_edits("m.py", data, es, fs.import_anchor)
    assert applied.error is None, applied.error
    stripped = strip_source(applied.new, [record(fs, es)])
    assert stripped.error is None, stripped.error
    return applied.new.decode(), stripped.new.decode()


def test_the_tail_goes_inside_the_region_after_the_statement():
    src = "import numpy as np\n\n\ndef read(p):\n    # one sample\n    x = np.load(p)\n    return x\n"
    new, back = wrap_reads(src)
    assert ("    # one sample\n    with ai.data.io.read:\n        x = np.load(p)\n"
            "        ai.data.io.read.update(image_size=x.nbytes)\n    return x\n") in new
    ast.parse(new)
    assert back == src


def test_one_line_suites_and_semicolon_lines():
    src = ("import numpy as np\n\n\ndef read(p, q):\n    if p: x = np.load(p)\n"
           "    y = np.load(q); z = 1\n    return x, y, z\n")
    new, back = wrap_reads(src)
    assert "    if p:\n        with ai.data.io.read:\n            x = np.load(p)\n" \
           "            ai.data.io.read.update(image_size=x.nbytes)\n" in new
    assert "    with ai.data.io.read:\n        y = np.load(q)\n        ai.data.io.read.update(image_size=y.nbytes)\n" \
           "    z = 1\n" in new
    ast.parse(new)
    # the one-line suite and the ``;`` line stay expanded (as for every edit inside them)
    assert "x = np.load(p)" in back and "y = np.load(q)" in back and "update" not in back and "ai" not in back
