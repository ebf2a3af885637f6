"""A statement region is written as ``start()``/``stop()`` around its statements where nothing
leaves them early (``emit.lean-regions``, on by default), as a ``with`` otherwise; a second run
reads the pair as the region it is."""

from __future__ import annotations

from dftpass.core.apply import apply_edits
from dftpass.core.config import Config, Source, Value
from dftpass.core.edits import EditSet, InsertAfter, InsertBefore, WrapStmt
from dftpass.core.pipeline import annotate
from dftpass.core.placement import lean_statement_regions, merge_adjacent_regions
from dftpass.core.summary import summarize

SOURCE = (
    "import torch\n\n\ndef train(model, loader, opt):\n    for x in loader:\n        if x is None:\n"
    "            continue\n        loss = model(x).sum()\n        loss.backward()\n        opt.step()\n"
)


def _run(project, source=SOURCE, mode="run", lean=True):
    root = project({"train.py": source})
    src = Source("test")
    config = Config(values={"rules.select": Value(["ML-R7"], src), "plugins.disable": Value([], src),
                            "project.kind": Value("program", src), "emit.skip-dynamo-import": Value(False, src),
                            "emit.lean-regions": Value(lean, src)})
    return annotate(root, config, mode, jobs=1)


def test_a_statement_region_is_a_start_stop_pair_and_a_second_run_finds_it(project):
    text = _run(project).files["train.py"].new.decode()
    assert ("        ai.compute.backward.start()\n        loss.backward()\n        ai.compute.backward.stop()\n"
            in text), text
    # the summary reads the pair as the region: nothing more to place
    again = _run(project, source=text, mode="plan")
    assert not [e for _, e in again.edits() if "backward" in e.why], again.edits()


def test_off_it_is_a_with_block(project):
    text = _run(project, lean=False).files["train.py"].new.decode()
    assert "        with ai.compute.backward:\n            loss.backward()\n" in text


def test_a_span_that_control_flow_can_leave_keeps_its_with():
    """A ``return``, ``break``, ``continue`` or ``raise`` inside the statements would skip the
    ``stop()``; so would a ``yield`` suspend the region: those keep the ``with``."""
    source = (b"def f(paths):\n    for p in paths:\n        with open(p) as fh:\n            return fh.read()\n"
              b"    x = 1\n    y = x + 1\n")
    fs = summarize(source, "m.py", "m")
    loop, plain = (("body", 0), ("body", 0)), (("body", 0), ("body", 1))
    es = EditSet("m.py")
    es.add(WrapStmt("T", 2, "loop", loop, "ai.data.io.read"))
    es.add(WrapStmt("T", 5, "two statements", plain, "ai.compute", through=(("body", 0), ("body", 2))))
    lean_statement_regions(es, fs)
    kinds = [(type(e).__name__, getattr(e, "code", "")) for e in es.edits]
    assert kinds == [("InsertAfter", "ai.compute.stop()"), ("WrapStmt", ""), ("InsertBefore", "ai.compute.start()")]
    assert isinstance(es.edits[2], InsertBefore) and es.edits[2].stmt == plain
    assert isinstance(es.edits[0], InsertAfter) and es.edits[0].stmt == (("body", 0), ("body", 2))


def test_a_span_in_a_try_that_catches_by_design_keeps_its_with():
    """``next()`` restarted on ``StopIteration``, and a batch skipped on an error inside the
    loop: the exception is the program's control flow, and would skip a ``stop()``. A ``try``
    around the whole loop (``KeyboardInterrupt``) does not stop the pair."""
    source = (b"def f(it, loader, step):\n"
              b"    try:\n        batch = next(it)\n    except StopIteration:\n        batch = None\n"
              b"    for x in loader:\n        try:\n            step(x)\n        except ValueError:\n            pass\n"
              b"    try:\n        step(batch)\n    except KeyboardInterrupt:\n        pass\n")
    fs = summarize(source, "m.py", "m")
    fetch = (("body", 0), ("body", 0), ("body", 0))
    skipped = (("body", 0), ("body", 1), ("body", 0), ("body", 0), ("body", 0))
    outer = (("body", 0), ("body", 2), ("body", 0))
    es = EditSet("m.py")
    for path in (fetch, skipped, outer):
        es.add(WrapStmt("T", 1, "r", path, "ai.compute"))
    lean_statement_regions(es, fs)
    assert [type(e).__name__ for e in es.edits] == ["InsertAfter", "WrapStmt", "WrapStmt", "InsertBefore"]


def test_a_step_update_above_the_first_statement_stays_above_the_start(project):
    """The step's ``update`` goes above a loop body's first statement; a region there is a
    ``start()`` right before the statement, below the update."""
    source = ("import torch\n\n\ndef train(model, loader, opt, device):\n    for step, (x, y) in enumerate(loader):\n"
              "        x = x.to(device)\n        loss = model(x, y)\n        loss.backward()\n        opt.step()\n")
    root = project({"train.py": source})
    src = Source("test")
    config = Config(values={"rules.select": Value(["ML-R8", "ML-R17"], src),
                            "plugins.disable": Value([], src), "project.kind": Value("program", src),
                            "emit.skip-dynamo-import": Value(False, src), "emit.lean-regions": Value(True, src)})
    text = annotate(root, config, "run", jobs=1).files["train.py"].new.decode()
    update, start = text.find(".update(step=step"), text.find("ai.device.transfer.start()")
    assert -1 < update < start < text.find("        x = x.to(device)\n        ai.device.transfer.stop()"), text


def test_an_outer_pair_on_the_same_statement_stays_outside():
    """A checkpoint's capture (``start()``/``stop()`` on the save) and its write (a region on
    the same statement): the write's pair nests inside the capture's."""
    source = b"def save(model, path):\n    torch.save(model.state_dict(), path)\n"
    fs = summarize(source, "m.py", "m")
    stmt = (("body", 0), ("body", 0))
    es = EditSet("m.py")
    es.add(InsertBefore("T", 2, "capture", stmt, "ai.checkpoint.capture.start()"))
    es.add(InsertAfter("T", 2, "capture", stmt, "ai.checkpoint.capture.stop()"))
    es.add(WrapStmt("T", 2, "write", stmt, "ai.checkpoint.io.write"))
    lean_statement_regions(es, fs)
    text = apply_edits("m.py", source, es, 0).new.decode()
    assert text.endswith("    ai.checkpoint.capture.start()\n    ai.checkpoint.io.write.start()\n"
                         "    torch.save(model.state_dict(), path)\n    ai.checkpoint.io.write.stop()\n"
                         "    ai.checkpoint.capture.stop()\n"), text


def test_two_regions_of_one_node_in_a_row_are_one(project):
    """``x.to(d)`` and ``y.to(d)`` on consecutive lines: one transfer region over both; a
    read whose size is updated after it stays a region of its own."""
    source = ("import torch\n\n\ndef train(model, loader, opt, device):\n    for x, y in loader:\n"
              "        x = x.to(device)\n        y = y.to(device)\n        loss = model(x, y)\n"
              "        loss.backward()\n        opt.step()\n")
    root = project({"train.py": source})
    src = Source("test")
    config = Config(values={"rules.select": Value(["ML-R17"], src),
                            "plugins.disable": Value([], src), "project.kind": Value("program", src),
                            "emit.skip-dynamo-import": Value(False, src), "emit.lean-regions": Value(True, src)})
    text = annotate(root, config, "run", jobs=1).files["train.py"].new.decode()
    assert ("        ai.device.transfer.start()\n        x = x.to(device)\n        y = y.to(device)\n"
            "        ai.device.transfer.stop()\n") in text, text
    assert text.count("ai.device.transfer.start()") == 1


def test_a_region_with_a_size_is_not_merged_with_the_next():
    es = EditSet("m.py")
    first, second = (("body", 0), ("body", 0)), (("body", 0), ("body", 1))
    es.add(WrapStmt("T", 2, "r", first, "ai.data.io.read", tail=("ai.data.io.read.update(image_size=x.nbytes)",)))
    es.add(WrapStmt("T", 3, "r", second, "ai.data.io.read", tail=("ai.data.io.read.update(image_size=y.nbytes)",)))
    merge_adjacent_regions(es)
    assert [e.stmt for e in es.edits] == [first, second]
