"""The rewrite engine: placement, imports, formatting kept, and files never left broken."""

from __future__ import annotations

import ast

from dftpass.core.edits import EditSet, Enumerate, InsertAfter, InsertBefore, WrapBody, WrapIter, WrapStmt
from dftpass.core.emitter import FileNames
from dftpass.core.placement import function_region
from dftpass.core.apply import apply_edits
from dftpass.core.summary import summarize


def apply(source: str | bytes, plan, relpath="m.py"):
    """``plan(summary, names, edit_set)`` queues edits; returns the new source (str)."""
    data = source.encode() if isinstance(source, str) else source
    fs = summarize(data, relpath, "m")
    names = FileNames(fs)
    es = EditSet(relpath)
    plan(fs, names, es)
    es.api_imports, es.std_imports = names.imports_needed()
    applied = apply_edits(relpath, data, es, fs.import_anchor)
    assert applied.error is None, applied.error
    return applied.new.decode(applied.encoding) if isinstance(source, str) else applied.new


def decorate(name, node="compute.forward"):
    def plan(fs, names, es):
        es.add(function_region(names, fs.function(name), node, "T", "test"))
    return plan


def test_import_after_docstring_and_future_before_a_parenthesized_import():
    src = ('"""Doc."""\nfrom __future__ import annotations\nfrom torch import (\n    nn,\n    optim,\n)\n\n\n'
           "def forward(x):\n    return x\n")
    out = apply(src, decorate("forward"))
    assert out.startswith('"""Doc."""\nfrom __future__ import annotations\nfrom dftracer.python import ai\n'
                          "from torch import (\n    nn,\n    optim,\n)\n")
    ast.parse(out)


def test_existing_dftracer_import_is_extended_not_duplicated():
    src = "from dftracer.python import dft_fn\n\n\ndef forward(x):\n    return x\n"
    out = apply(src, decorate("forward"))
    assert out.count("from dftracer.python import") == 1
    assert "from dftracer.python import dft_fn, ai\n" in out


def test_an_existing_alias_is_reused():
    src = "from dftracer.python import ai as dft_ai\n\n\ndef forward(x):\n    return x\n"
    out = apply(src, decorate("forward"))
    assert "@dft_ai.compute.forward\ndef forward" in out
    assert out.count("import") == 1


def test_a_name_taken_by_the_file_gets_another_alias():
    src = "ai = 'artificial'\n\n\ndef forward(x):\n    return ai\n"
    out = apply(src, decorate("forward"))
    assert "from dftracer.python import ai as dft_ai\n" in out
    assert "@dft_ai.compute.forward" in out and "return ai\n" in out


def test_decorator_goes_innermost_under_staticmethod_and_cache():
    src = ("import functools\n\n\nclass M:\n    @staticmethod\n    @functools.cache\n    def forward(x):\n"
           "        return x\n")
    out = apply(src, decorate("M.forward"))
    assert "    @staticmethod\n    @functools.cache\n    @ai.compute.forward\n    def forward(x):" in out


def test_property_async_and_generator_get_body_regions():
    src = ("class D:\n    @property\n    def size(self):\n        '''Doc.'''\n        return 3\n\n\n"
           "async def fetch(x):\n    return x\n\n\ndef gen(n):\n    for i in range(n):\n        yield i\n")

    def plan(fs, names, es):
        for q in ("D.size", "fetch", "gen"):
            es.add(function_region(names, fs.function(q), "data.item", "T", "test"))

    out = apply(src, plan)
    assert "    @property\n    def size(self):\n        '''Doc.'''\n        with ai.data.item:\n            return 3\n" in out
    assert "async def fetch(x):\n    with ai.data.item:\n        return x\n" in out
    assert "def gen(n):\n    with ai.data.item:\n        for i in range(n):\n            yield i\n" in out
    assert "@ai" not in out


def test_comments_and_formatting_outside_the_edits_are_kept():
    src = ("import torch  # the framework\n\n# a comment about f\ndef f(optimizer ,x):   # odd spacing\n"
           "    # before the step\n    optimizer.step()  # step!\n    y = [1,\n         2]\n    return y\n")

    def plan(fs, names, es):
        call = next(c for c in fs.function("f").calls if c.callee == "optimizer.step")
        es.add(InsertBefore("T", 1, "", call.stmt, names.start("compute.step")))
        es.add(InsertAfter("T", 1, "", call.stmt, names.stop("compute.step")))

    out = apply(src, plan)
    assert out == ("from dftracer.python import ai\nimport torch  # the framework\n\n# a comment about f\n"
                   "def f(optimizer ,x):   # odd spacing\n    # before the step\n    ai.compute.step.start()\n"
                   "    optimizer.step()  # step!\n    ai.compute.step.stop()\n    y = [1,\n         2]\n    return y\n")


def test_one_line_suites_and_semicolons_are_split_only_where_edited():
    src = "def f(loss, n):\n    if n: loss.backward()\n    a = 1; loss.backward(); b = 2\n"

    def plan(fs, names, es):
        for call in fs.function("f").calls:
            es.add(WrapStmt("T", 1, "", call.stmt, names.node("compute.backward")))

    out = apply(src, plan)
    assert out == ("from dftracer.python import ai\n\n\ndef f(loss, n):\n    if n:\n        with ai.compute.backward:\n"
                   "            loss.backward()\n    a = 1\n    with ai.compute.backward:\n        loss.backward()\n"
                   "    b = 2\n")


def test_wrap_iter_at_depth_and_enumerate():
    src = "def f(loader):\n    for x, y in tqdm(\n            loader):  # multi-line\n        pass\n"

    def plan(fs, names, es):
        loop = fs.function("f").loops[0]
        es.add(WrapIter("T", 1, "", loop.stmt, names.iter_callee("dataloader.fetch"), depth=1))
        es.add(Enumerate("T", 1, "", loop.stmt, "_dft_step"))

    out = apply(src, plan)
    assert "for _dft_step, (x, y) in enumerate(tqdm(\n            ai.dataloader.fetch.iter(loader))):  # multi-line" in out


def test_wrap_body_with_prologue_and_finally_on_elif_free_guard():
    src = 'if __name__ == "__main__":\n    # run it\n    main()\nelse:\n    pass\n'

    def plan(fs, names, es):
        g = fs.main_guards[0]
        es.add(WrapBody("T", 1, "", g.stmt, None, ("x = 1\n",), ("x = 2\n",)))

    out = apply(src, plan)
    assert out == ('if __name__ == "__main__":\n    x = 1\n    try:\n        # run it\n        main()\n'
                   "    finally:\n        x = 2\nelse:\n    pass\n")


def test_crlf_and_declared_encoding_survive():
    src = "# -*- coding: latin-1 -*-\r\nname = 'caf\xe9'\r\ndef forward(x):\r\n    return x\r\n".encode("latin-1")
    out = apply(src, decorate("forward"))
    assert isinstance(out, bytes)
    text = out.decode("latin-1")
    assert "@ai.compute.forward\r\ndef forward(x):\r\n" in text and "caf\xe9" in text
    assert "\n" not in text.replace("\r\n", "")


def test_output_that_does_not_compile_leaves_the_file_untouched():
    src = "def f(x):\n    return x\n"
    fs = summarize(src.encode(), "m.py", "m")
    es = EditSet("m.py")
    # an insertion the parser accepts but the compiler refuses
    es.add(InsertBefore("T", 1, "", fs.function("f").body_first, "break"))
    applied = apply_edits("m.py", src.encode(), es, fs.import_anchor)
    assert applied.new is None
    assert "does not compile" in applied.error and "left untouched" in applied.error


def test_a_path_that_does_not_exist_is_an_error_not_a_crash():
    src = "x = 1\n"
    es = EditSet("m.py")
    es.add(InsertBefore("T", 1, "", (("body", 7),), "y = 2"))
    applied = apply_edits("m.py", src.encode(), es, 0)
    assert applied.new is None and "does not exist" in applied.error


def test_the_import_goes_after_environment_set_up_of_the_import_block_whatever_the_framework():
    """``import dftracer.python`` imports torch: CUDA_VISIBLE_DEVICES set between the imports
    must be set before it, also when the framework the set-up is for is not one dftpass knows."""
    src = ("import os\nimport numpy as np\nos.environ['CUDA_VISIBLE_DEVICES'] = '0'\nimport mxnet\n\n\n"
           "def forward(x):\n    return x\n")
    out = apply(src, decorate("forward"))
    assert out.startswith("import os\nimport numpy as np\nos.environ['CUDA_VISIBLE_DEVICES'] = '0'\n"
                          "from dftracer.python import ai\nimport mxnet\n")
    # set-up after the first code is the program's business: the import stays at the top
    late = "import torch\n\nx = 1\nos.environ['A'] = '1'\n\n\ndef forward(x):\n    return x\n"
    assert apply(late, decorate("forward")).startswith("from dftracer.python import ai\nimport torch\n")


def test_a_class_that_sets_the_environment_in_a_method_is_no_set_up():
    """A class right after the imports whose method exports credentials (DLIO's S3 storage)
    sets nothing when it is defined: the import does not go after it, and its methods, now
    "before the imports dftpass adds", are not refused their regions."""
    src = ("import os\n\n\nclass Storage:\n    def connect(self, key):\n        os.environ['KEY'] = key\n\n\n"
           "def forward(x):\n    return x\n")
    assert summarize(src.encode(), "m.py", "m").import_anchor == 0
    assert apply(src, decorate("forward")).startswith("from dftracer.python import ai\nimport os\n")


def test_edits_in_the_branches_of_an_elif_chain_each_find_their_statement():
    """Paths through several ``elif`` each resolve to their own branch (the cache of a block's
    statements once keyed an ``elif`` by the id of a wrapper that was already gone, so a later
    path read another branch's statements: Megatron's ``checkpointing.py`` was left untouched)."""
    branches = "".join(f"    {'if' if k == 0 else 'elif'} mode == {k}:\n        a = {k}\n        if n:\n"
                       f"            b = {k}\n            loss.backward()\n" for k in range(6))
    src = f"def f(loss, mode, n):\n{branches}"

    def plan(fs, names, es):
        for call in fs.function("f").calls:
            if call.callee == "loss.backward":
                es.add(WrapStmt("T", 1, "", call.stmt, names.node("compute.backward")))

    out = apply(src, plan)
    assert out.count("with ai.compute.backward:\n                loss.backward()") == 6, out


def test_a_region_over_several_statements_holds_their_own_edits_and_takes_their_comments():
    """The tracing budget's one compute region per step: ``with`` around a run of statements
    of one block, the comments above the first moving above the ``with``, an edit on a
    statement inside staying inside, a ``;`` line going in whole."""
    src = ("def f(model, x, opt):\n    opt.zero_grad()\n    # the step\n    loss = model(x)\n"
           "    loss.backward()  # grads\n    opt.step(); n = 1\n    return loss\n")

    def plan(fs, names, es):
        body = fs.function("f").body_first[:-1]
        at = lambda k: (*body, ("body", k))  # noqa: E731
        es.add(WrapStmt("T", 4, "", at(1), names.node("compute"), through=at(3)))
        es.add(InsertBefore("T", 5, "", at(2), "print('inside')", take_comments=False))

    assert apply(src, plan) == (
        "from dftracer.python import ai\n\n\ndef f(model, x, opt):\n    opt.zero_grad()\n    # the step\n"
        "    with ai.compute:\n        loss = model(x)\n        print('inside')\n        loss.backward()  # grads\n"
        "        opt.step(); n = 1\n    return loss\n")


def test_a_region_that_ends_outside_its_block_leaves_the_file_untouched():
    src = "def f(a):\n    if a:\n        x = 1\n    y = 2\n"
    fs = summarize(src.encode(), "m.py", "m")
    body = fs.function("f").body_first[:-1]
    es = EditSet("m.py")
    es.add(WrapStmt("T", 3, "", (*body, ("body", 0), ("body", 0)), "ai.compute", through=(*body, ("body", 1))))
    applied = apply_edits("m.py", src.encode(), es, fs.import_anchor)
    assert applied.new is None and "later statement of its block" in applied.error
