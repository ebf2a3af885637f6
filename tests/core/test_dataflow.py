"""Batch provenance's walker (core/dataflow.py) on small real projects: where a value comes from."""

from __future__ import annotations

from dftpass.core.callgraph import build_callgraph
from dftpass.core.config import DEFAULT_EXCLUDE
from dftpass.core.loops import LoopOptions
from dftpass.core.project import Project
from dftpass.plugins.analyses.loops import loop_analysis, with_knowledge
from dftpass.plugins.knowledge import resolution_hints
from dftpass.plugins.library import builtin_knowledge


def walker(root):
    project = Project.discover(root, ["**/*.py"], DEFAULT_EXCLUDE)
    project.load(max_bytes=1_000_000)
    graph = build_callgraph(project.summaries(), project.console_scripts(), resolution_hints())
    loops = loop_analysis(graph, with_knowledge(LoopOptions(), builtin_knowledge()), project.read_source)
    return graph, loops, loops.dataflow


def call_line(graph, function_id: str, callee: str):
    call = next(c for c in graph.fn(function_id).calls if c.callee == callee)
    return call.line, call.col


def kinds(trace, kind: str) -> list[tuple[str, str]]:
    return [(s.function.split("::")[-1], s.target or s.text) for s in trace.of_kind(kind)]


def test_a_partial_of_a_bound_method_and_its_star_args_reach_the_batch_moved_two_calls_down(project):
    """improved-diffusion's shape: ``functools.partial(self.diffusion.training_losses, model,
    micro, t)`` called with no argument, the override passing ``*args`` on to ``super()``."""
    root = project({"train.py": (
        "import functools\n\nimport torch\n\n\nclass Base:\n"
        "    def training_losses(self, model, x_start, t):\n        return model(x_start * t)\n\n\n"
        "class Spaced(Base):\n    def training_losses(self, model, *args, **kwargs):\n"
        "        return super().training_losses(model, *args, **kwargs)\n\n\n"
        "def build():\n    model, diffusion = torch.nn.Linear(2, 2), Spaced()\n    return model, diffusion\n\n\n"
        "class Loop:\n    def __init__(self, data):\n        model, diffusion = build()\n"
        "        self.model, self.diffusion, self.data = model, diffusion, data\n\n"
        "    def step(self, batch):\n        micro = batch[0:2].to('cuda')\n"
        "        compute = functools.partial(self.diffusion.training_losses, self.model, micro, 2)\n"
        "        loss = compute()\n        loss.sum().backward()\n\n"
        "    def run(self):\n        for batch in self.data:\n            self.step(batch)\n"
    )})
    graph, _, flow = walker(root)
    line, col = call_line(graph, "train.py::Loop.step", "loss.sum().backward")
    trace = flow.derive_call_args("train.py::Loop.step", line, col, receiver=True)
    assert ("Loop.step", "train.py::Spaced.training_losses") in kinds(trace, "call")
    assert ("Spaced.training_losses", "train.py::Base.training_losses") in kinds(trace, "call")
    assert [s.line for s in trace.of_kind("transfer")] == [27]  # micro = batch[0:2].to('cuda')


def test_a_call_is_entered_with_its_own_arguments_not_every_callers(project):
    """Context: the wrapper's ``x`` is what this call passes, not what another caller passes."""
    root = project({"m.py": (
        "import numpy as np\n\n\ndef scale(x):\n    return x * 2\n\n\n"
        "def main():\n    data = np.load('d.npy')\n    noise = np.zeros(3)\n"
        "    a = scale(data)\n    b = scale(noise)\n    return a, b\n"
    )})
    graph, _, flow = walker(root)
    scope = flow.scope("m.py::main")
    b = next(x for x in scope.bindings["b"])
    trace = flow.derive("m.py::main", [b.value], b.stmt)
    assert not trace.of_kind("read")  # np.load reaches a, not b
    a = next(x for x in scope.bindings["a"])
    assert kinds(flow.derive("m.py::main", [a.value], a.stmt), "read") == [("main", "numpy.load")]


def test_a_later_binding_outside_any_loop_does_not_reach_back(project):
    """char-rnn's ``hidden = hidden.cuda()`` comes before ``output, hidden = model(x, hidden)``
    in no loop around both: what it moves is the model's fresh state, not the data."""
    root = project({"m.py": (
        "import numpy as np\n\n\ndef step(model, x):\n    hidden = model.init_hidden()\n"
        "    hidden = hidden.cuda()\n    for c in range(3):\n        out, hidden = model(x[c], hidden)\n"
        "    return out\n\n\ndef main(model):\n    step(model, np.load('x.npy'))\n"
    )})
    graph, _, flow = walker(root)
    line, col = call_line(graph, "m.py::step", "hidden.cuda")
    call = flow.call_node("m.py::step", line, col)
    before = flow.derive("m.py::step", [call.func.value], (("body", 1), ("body", 1)))
    assert not before.of_kind("read")
    # inside the loop, the model's state is made of the data the loop feeds it
    line, col = call_line(graph, "m.py::step", "model")
    assert kinds(flow.derive_call_args("m.py::step", line, col), "read") == [("main", "numpy.load")]


def test_a_loader_leads_to_its_data_sets_item_and_through_shape_to_nothing(project):
    """``DataLoader(ds)`` hands out ``ds.__getitem__``'s return; ``x.shape`` is no data."""
    root = project({"m.py": (
        "import numpy as np\nimport torch\nfrom torch.utils.data import DataLoader, Dataset\n\n\n"
        "class Samples(Dataset):\n    def __getitem__(self, i):\n        return np.load(f'{i}.npy')\n\n"
        "    def __len__(self):\n        return 4\n\n\n"
        "def fit(model, opt):\n    loader = DataLoader(Samples(), batch_size=2)\n"
        "    for x in loader:\n        t = torch.zeros(x.shape[0])\n        model(x, t).sum().backward()\n"
    )})
    graph, _, flow = walker(root)
    line, col = call_line(graph, "m.py::fit", "model")
    trace = flow.derive_call_args("m.py::fit", line, col)
    assert kinds(trace, "dataset") == [("fit", "m.py::Samples")]
    assert kinds(trace, "read") == [("Samples.__getitem__", "numpy.load")]
    # t is made from x.shape only: walked alone, it reaches no data
    t = flow.scope("m.py::fit").bindings["t"][0]
    assert not flow.derive("m.py::fit", [t.value], t.stmt).of_kind("read", "loader", "dataset")


def test_a_generator_drawn_with_next_leads_to_what_it_slices_and_a_break_is_said(project):
    root = project({"m.py": (
        "import numpy as np\n\n\ndef stream(x):\n    while True:\n        for i in range(0, len(x), 2):\n"
        "            yield x[i:i + 2]\n\n\ndef fit(model, opt, extra):\n"
        "    batches = stream(np.fromfile('d.bin'))\n    for step in range(10):\n"
        "        model(next(batches), extra).sum().backward()\n"
    )})
    graph, _, flow = walker(root)
    line, col = call_line(graph, "m.py::fit", "model")
    trace = flow.derive_call_args("m.py::fit", line, col)
    assert kinds(trace, "next") == [("fit", "batches")]
    assert kinds(trace, "generator") == [("fit", "m.py::stream")]
    assert kinds(trace, "read") == [("fit", "numpy.fromfile")]
    assert any("extra is a parameter of fit that no call dftpass can follow passes" in b.reason for b in trace.breaks)


def test_star_imports_bind_the_names_of_the_module_they_import(project):
    """char-rnn's ``from helpers import *``: ``read_file()`` is the project's function."""
    root = project({
        "helpers.py": "def read_file(path):\n    return open(path).read()\n",
        "generate.py": "from helpers import *\n\n\ndef sample(text):\n    return text[:10]\n",
        "train.py": "from generate import *\n\n\ntext = read_file('x.txt')\nprint(sample(text))\n",
    })
    graph, _, _ = walker(root)
    targets = {c.callee: graph.targets("train.py::<module>", i)
               for i, c in enumerate(graph.fn("train.py::<module>").calls)}
    assert targets["read_file"] == ("helpers.py::read_file",)  # through generate's own star import
    assert targets["sample"] == ("generate.py::sample",)


def test_values_follow_a_tuple_a_factory_returns_and_a_class_defined_in_a_function(project):
    root = project({"m.py": (
        "class Model:\n    pass\n\n\nclass Diffusion:\n    pass\n\n\n"
        "def build():\n    return Model(), Diffusion()\n\n\n"
        "def train():\n    class Items:\n        pass\n\n    model, diffusion = build()\n    items = Items()\n"
        "    return model, diffusion, items\n"
    )})
    graph, _, _ = walker(root)
    assert graph.values.of("m.py::train", "diffusion") == {"inst:m.py::Diffusion"}
    assert graph.values.of("m.py::train", "model") == {"inst:m.py::Model"}
    assert graph.values.of("m.py::train", "items") == {"inst:m.py::train.<locals>.Items"}
