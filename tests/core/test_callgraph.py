"""Call graph resolution, entry points and loop roles, on small real projects."""

from __future__ import annotations

from dftpass.core import emitter
from dftpass.core.callgraph import build_callgraph
from dftpass.core.config import DEFAULT_EXCLUDE
from dftpass.core.loops import LoopAnalysis, LoopOptions
from dftpass.plugins.analyses.loops import with_knowledge
from dftpass.core.project import Project
from dftpass.plugins.knowledge import does_step, resolution_hints
from dftpass.plugins.library import builtin_knowledge


def analyse(root):
    project = Project.discover(root, ["**/*.py"], DEFAULT_EXCLUDE)
    project.load(max_bytes=1_000_000)
    graph = build_callgraph(project.summaries(), project.console_scripts(), resolution_hints())
    return graph, LoopAnalysis(graph, with_knowledge(LoopOptions(), builtin_knowledge()), emitter.recognize,
                               lambda function_id, loops: does_step(graph, function_id, loops)).run()


PKG = {
    "pkg/__init__.py": "",
    "pkg/engine.py": (
        "from .model import Net\n\n\n"
        "def train(model, loader):\n    for x in loader:\n        model(x)\n\n\n"
        "class Trainer:\n    def __init__(self):\n        self.net = Net()\n\n"
        "    def fit(self, dl):\n        self.step(dl)\n        self.net.forward(1)\n\n"
        "    def step(self, dl):\n        train(self.net, dl)\n"
    ),
    "pkg/model.py": "import torch\n\n\nclass Net(torch.nn.Module):\n    def forward(self, x):\n        return x\n",
    "main.py": (
        "import pkg.engine as engine\nfrom pkg.engine import Trainer\nfrom torch.utils.data import DataLoader\n\n\n"
        "def main():\n    t = Trainer()\n    loader = DataLoader([1, 2])\n    for epoch in range(3):\n        t.fit(loader)\n"
        "    engine.train(None, loader)\n\n\n"
        "if __name__ == '__main__':\n    main()\n"
    ),
}


def test_calls_resolve_through_imports_self_and_instances(project):
    graph, _ = analyse(project(PKG))
    edges = set(graph.graph.edges)
    assert ("main.py::main", "pkg/engine.py::Trainer.__init__") in edges  # instantiation
    assert ("main.py::main", "pkg/engine.py::Trainer.fit") in edges  # t.fit() with t = Trainer()
    assert ("main.py::main", "pkg/engine.py::train") in edges  # engine.train via `import pkg.engine as engine`
    assert ("pkg/engine.py::Trainer.fit", "pkg/engine.py::Trainer.step") in edges  # self.step()
    assert ("pkg/engine.py::Trainer.fit", "pkg/model.py::Net.forward") in edges  # self.net.forward()
    assert ("pkg/engine.py::Trainer.step", "pkg/engine.py::train") in edges  # relative import
    assert graph.instantiated_in["pkg/model.py::Net"] == {"pkg/engine.py::Trainer.__init__"}
    assert graph.is_module_class("pkg/model.py::Net")


def test_entry_is_the_guard_and_the_function_it_runs(project):
    graph, _ = analyse(project(PKG))
    [entry] = graph.entries
    assert (entry.kind, entry.relpath, entry.function) == ("main-guard", "main.py", "main.py::main")


def test_console_script_entry(project):
    files = dict(PKG)
    files["pyproject.toml"] = '[project]\nname = "x"\n[project.scripts]\nx-train = "pkg.engine:train"\n'
    graph, _ = analyse(project(files))
    kinds = {(e.kind, e.function) for e in graph.entries}
    assert ("console-script", "pkg/engine.py::train") in kinds


def test_loop_roles_follow_data_flow_and_calls(project):
    _, loops = analyse(project(PKG))
    roles = {(f.function, f.loop.line): f.kind for f in loops.facts.values()}
    # `loader` in train() is a parameter that main() fills with a DataLoader (through Trainer.step's `dl`)
    assert roles[("pkg/engine.py::train", 5)] == "batch"
    # main's range loop calls t.fit -> step -> train's batch loop: the epoch loop
    assert roles[("main.py::main", 9)] == "epoch"


def test_loops_over_other_things_are_left_alone(project):
    _, loops = analyse(project({"a.py": (
        "def f(cfg, items, data):\n"
        "    for item in cfg.items():\n        pass\n"
        "    for data in data:\n        pass\n"
        "    for epoch in range(3):\n        print(epoch)\n"
    )}))
    assert {f.kind for f in loops.facts.values()} == {"other"}


def test_shapes_of_batch_loops(project):
    src = (
        "from tqdm import tqdm\nfrom torch.utils.data import DataLoader\n\n\n"
        "def make():\n    return DataLoader([1])\n\n\n"
        "def f(ds, val_loader, other):\n"
        "    loader = DataLoader(ds)\n"
        "    for batch_idx, (data, target) in enumerate(loader):\n        pass\n"  # 11
        "    for images, labels in loader:\n        pass\n"  # 13
        "    for x in tqdm(val_loader):\n        pass\n"  # 15
        "    for a, b in zip(loader, other):\n        pass\n"  # 17
        "    for batch in make():\n        pass\n"  # 19
        "    pbar = tqdm(loader)\n"
        "    for batch in pbar:\n        pass\n"  # 22
        "    it = iter(loader)\n"
        "    while True:\n        batch = next(it)\n"  # 25
    )
    _, loops = analyse(project({"a.py": src}))
    facts = {f.loop.line: f for f in loops.facts.values()}
    assert {line: f.kind for line, f in facts.items()} == {11: "batch", 13: "batch", 15: "batch", 17: "batch",
                                                          19: "batch", 22: "batch", 25: "batch"}
    assert facts[11].step_var == "batch_idx" and facts[11].wrap_depth == 1
    assert facts[13].step_var is None
    assert facts[25].style == "next"


def test_epoch_loop_is_innermost_around_batch_loops(project):
    src = (
        "def train(model, loader):\n    for x in loader:\n        model(x)\n\n\n"
        "def sweep(model, loader):\n"
        "    for lr in (0.1, 0.01):\n"  # 7
        "        for epoch in range(3):\n"  # 8
        "            train(model, loader)\n"
    )
    _, loops = analyse(project({"a.py": src}))
    facts = {f.loop.line: f for f in loops.facts.values()}
    assert facts[8].kind == "epoch" and facts[8].int_var == "epoch"
    assert facts[7].kind == "other"


def test_a_value_chosen_by_a_condition_or_a_default_may_be_either(project):
    """``A() if c else B()`` and ``given or B()`` hold either object: calls on them reach both."""
    graph, _ = analyse(project({
        "readers.py": (
            "class Npy:\n    def open(self, p):\n        return p\n\n\nclass Png:\n    def open(self, p):\n        return p\n\n\n"
            "class Raw:\n    def open(self, p):\n        return p\n\n\n"
            "class Samples:\n    def __init__(self, kind, fallback=None):\n"
            "        self.reader = Npy() if kind == 'npy' else Png()\n        self.spare = fallback or Raw()\n\n"
            "    def get(self, i):\n        self.spare.open(i)\n        return self.reader.open(i)\n"
        ),
    }))
    edges = set(graph.graph.edges)
    for cls in ("Npy", "Png", "Raw"):
        assert ("readers.py::Samples.get", f"readers.py::{cls}.open") in edges, cls


def test_dftpass_lifecycle_in_a_main_block_leaves_the_entry_function_as_it_was(project):
    """A second run reads the block the first one wrote: its entry is still ``main`` (it was
    None, and ML-R18 then put a restart region on ``main`` around the one the first run had
    placed inside it: the same node nested)."""
    root = project({"run.py": (
        "import atexit\nimport os\n\nfrom dftracer.python import ai, dftracer\n\n\ndef main():\n    pass\n\n\n"
        "if __name__ == '__main__':\n    _dft_log = dftracer.get_instance()\n"
        "    if os.environ.get('DFTRACER_ENABLE') == '1' and _dft_log.logger is None:\n"
        "        _dft_log = dftracer.initialize_log(logfile=None, data_dir=None, process_id=-1)\n"
        "    atexit.register(_dft_log.finalize)\n    main()\n"
    ), "two.py": "def a():\n    pass\n\n\ndef b():\n    pass\n\n\nif __name__ == '__main__':\n    a()\n    b()\n"})
    graph, _ = analyse(root)
    by_file = {e.relpath: e.function for e in graph.entries}
    assert by_file == {"run.py": "run.py::main", "two.py": None}
