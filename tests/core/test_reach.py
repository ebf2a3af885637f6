"""Reach: what the analyses find in the shapes real programs come in (value flow through
factories, modules without __init__.py, entries and what they run, loops by what they do)."""

from __future__ import annotations

from dftpass.core.config import Config, Value, load_config
from dftpass.core.pipeline import annotate
from dftpass.plugins.analyses.programs import classify
from tests.core.test_callgraph import analyse

FACTORIES = {
    "bench/__init__.py": "",
    "bench/loaders.py": (
        "from torch.utils.data import DataLoader\n\n\n"
        "class TorchLoader:\n    def __init__(self, ds):\n        self._dataset = DataLoader(ds)\n\n"
        "    def next(self):\n        for batch in self._dataset:\n            yield batch\n\n\n"
        "class LoaderFactory:\n    @staticmethod\n    def get_loader(kind, ds):\n"
        "        if kind == 'torch':\n            return TorchLoader(ds)\n        raise ValueError(kind)\n"
    ),
    "bench/framework.py": (
        "from bench.loaders import LoaderFactory\n\n\n"
        "class Framework:\n    def init_loader(self, ds):\n        self.reader_train = LoaderFactory.get_loader('torch', ds)\n\n"
        "    def get_loader(self):\n        return self.reader_train\n\n    def compute(self, batch):\n        raise NotImplementedError\n\n\n"
        "class TorchFramework(Framework):\n    __instance = None\n\n    @staticmethod\n    def get_instance():\n"
        "        if TorchFramework.__instance is None:\n            TorchFramework.__instance = TorchFramework()\n"
        "        return TorchFramework.__instance\n\n    def compute(self, batch):\n        return batch\n"
    ),
    "bench/main.py": (
        "from bench.framework import TorchFramework\n\n\n"
        "class Benchmark:\n    def __init__(self):\n        self.framework = TorchFramework.get_instance()\n\n"
        "    def _train(self, epoch):\n        loader = self.framework.get_loader()\n"
        "        for batch in loader.next():\n            self.framework.compute(batch)\n\n"
        "    def run(self, epochs):\n        for epoch in range(epochs):\n            self._train(epoch)\n\n\n"
        "def main():\n    Benchmark().run(2)\n\n\nif __name__ == '__main__':\n    main()\n"
    ),
}


def test_values_follow_factories_singletons_and_base_class_attributes(project):
    graph, loops = analyse(project(FACTORIES))
    origins = graph.values.of("bench/main.py::Benchmark._train", "loader.next()")
    assert origins == {"gen:bench/loaders.py::TorchLoader.next"}
    # self.framework.compute(batch) resolves to the subclass's compute through the singleton
    edges = set(graph.graph.edges)
    assert ("bench/main.py::Benchmark._train", "bench/framework.py::TorchFramework.compute") in edges
    facts = {(f.function, f.loop.line): f for f in loops.facts.values()}
    consumer = facts[("bench/main.py::Benchmark._train", 10)]
    assert (consumer.kind, consumer.style) == ("batch", "fed")
    assert consumer.feeders == ("bench/loaders.py::TorchLoader.next",)
    inner = facts[("bench/loaders.py::TorchLoader.next", 9)]
    assert (inner.kind, inner.style, inner.yields_batches) == ("batch", "iter", True)
    assert facts[("bench/main.py::Benchmark.run", 14)].kind == "epoch"


def test_modules_resolve_without_init_py_and_from_the_script_folder(project):
    graph, _ = analyse(project({
        "model/layers.py": "import torch\n\n\nclass Block(torch.nn.Module):\n    pass\n",
        "model/net.py": "import torch\nfrom model.layers import Block\n\n\nclass Net(torch.nn.Module):\n"
                        "    def __init__(self):\n        super().__init__()\n        self.b = Block()\n",
        "tools/train.py": "from helper import f\n\n\ndef main():\n    f()\n",
        "tools/helper.py": "def f():\n    return 1\n",
        "helper.py": "def f():\n    return 2\n",
    }))
    assert graph.instantiated_in["model/layers.py::Block"] == {"model/net.py::Net.__init__"}
    # the script's own folder comes first, as sys.path[0] does
    assert ("tools/train.py::main", "tools/helper.py::f") in set(graph.graph.edges)


def test_a_main_block_of_an_imported_module_is_not_part_of_the_importer(project):
    graph, _ = analyse(project({
        "lib.py": "def smoke():\n    return 1\n\n\nif __name__ == '__main__':\n    smoke()\n",
        "train.py": "import lib\n\n\ndef main():\n    return 0\n\n\nif __name__ == '__main__':\n    main()\n",
    }))
    train = next(e for e in graph.entries if e.relpath == "train.py")
    reach = graph.program_reach(train)
    assert "lib.py::<module>" in reach and "lib.py::smoke" not in reach
    lib = next(e for e in graph.entries if e.relpath == "lib.py")
    assert "lib.py::smoke" in graph.program_reach(lib)


ENTRIES = {
    "prepare.py": "import numpy as np\n\nnp.save('x.npy', np.zeros(3))\n",  # a script that trains nothing
    "configurator.py": "import sys\n\nfor arg in sys.argv[1:]:\n    print(arg)\n",  # exec'd by train.py
    "train.py": (
        "import torch\n\nexec(open('configurator.py').read())\nw = torch.zeros(1, requires_grad=True)\n"
        "for _ in range(3):\n    (w * 2).sum().backward()\n"
    ),
    "launch.py": (
        "import fire\nimport torch.multiprocessing as mp\n\n\ndef worker(rank):\n"
        "    torch.ones(1, requires_grad=True).sum().backward()\n\n\n"
        "def main(n=2):\n    mp.spawn(worker, nprocs=n)\n\n\nif __name__ == '__main__':\n    fire.Fire(main)\n"
    ),
    "smoke.py": "import torch\n\n\nclass Net(torch.nn.Module):\n    pass\n\n\nif __name__ == '__main__':\n    Net()\n",
}


def test_entries_and_what_each_runs(project):
    graph, loops = analyse(project(ENTRIES))
    programs = classify(graph, loops, [], "auto")
    roles = {(p.entry.kind, p.entry.relpath): (p.role, p.instrumented) for p in programs.programs}
    assert roles == {
        ("module-script", "prepare.py"): ("other", False),
        ("module-script", "train.py"): ("train", True),  # configurator.py is part of it, not a program
        ("main-guard", "launch.py"): ("train", True),  # fire.Fire(main) -> mp.spawn(worker): it trains
        ("process-target", "launch.py"): ("train", True),  # worker starts a process of its own
        ("main-guard", "smoke.py"): ("other", False),  # a smoke test builds a model, trains nothing
    }
    assert programs.kind == "program"
    chosen = classify(graph, loops, ["prepare.py"], "auto")
    assert [p.entry.relpath for p in chosen.instrumented()] == ["prepare.py"]


def test_a_project_whose_entries_train_nothing_is_a_library(project, cli):
    root = project({
        "layers.py": "import torch\n\n\nclass Dense(torch.nn.Module):\n    def forward(self, x):\n        return x\n\n\n"
                     "def fit(model, loader, opt):\n    for x in loader:\n        model(x).backward()\n        opt.step()\n",
        "smoke.py": "from layers import Dense\n\nif __name__ == '__main__':\n    Dense()\n",
    })
    detect = cli("detect", root)
    assert "library" in detect.out
    plan = cli("plan", root)
    assert "0 edits" in plan.err and "+++" not in plan.out
    assert cli("validate", root).code == 0
    forced = cli("plan", root, "--set", "project.kind=program", "--no-diff")
    assert "ML-R7 forward of model Dense" in forced.out


def test_a_framework_used_through_a_dotted_name_counts(project):
    """`import torch` then `torch.distributed.all_reduce(...)`: distributed, in that file."""
    from dftpass.core.manager import PassManager

    root = project({"sync.py": "import torch\n\n\ndef sync(t):\n    torch.distributed.all_reduce(t)\n"})
    config = load_config(root)
    manager = PassManager(config)
    result = annotate(root, Config(values={**config.values, "rules.select": Value(["ML-R1"], config.source(
        "run.jobs"))}), "plan", manager=manager, jobs=1)
    assert result.findings is not None
    from dftpass.core.context import RunContext
    from dftpass.core.project import Project

    proj = Project.discover(root, ["**/*.py"], [])
    proj.load(10**6)
    ctx = RunContext(config, proj, manager)
    detection = ctx.analysis("frameworks")
    assert detection.distributed and detection.evidence["distributed"] == ["sync.py"]


def test_loops_over_closures_lists_and_splits_are_not_loaders_or_epochs(project):
    _, loops = analyse(project({"a.py": (
        "import torch\n\n\ndef get_batch(split):\n    return torch.zeros(2), torch.zeros(2)\n\n\n"
        "def f(model):\n"
        "    loaders = [lambda: 1, lambda: 2]\n"
        "    for i, fn in enumerate(loaders):\n        fn()\n"  # 10
        "    for split in ['train', 'val']:\n"  # 12
        "        for k in range(4):\n"  # 13
        "            x, y = get_batch(split)\n            model(x)\n"
    )}))
    facts = {f.loop.line: f for f in loops.facts.values()}
    assert facts[10].kind == "other" and facts[12].kind == "other"
    assert (facts[13].kind, facts[13].style, facts[13].step_var) == ("batch", "producer", "k")


def test_gradient_accumulation_belongs_to_the_step_and_the_counter_is_the_step(project):
    _, loops = analyse(project({"a.py": (
        "def get_batch(split):\n    return 1, 2\n\n\n"
        "def train(model, opt, steps):\n    X, Y = get_batch('train')\n    iter_num = 0\n"
        "    while True:\n"  # 8
        "        for micro_step in range(4):\n            loss = model(X, Y)\n            X, Y = get_batch('train')\n"
        "            loss.backward()\n        opt.step()\n        iter_num += 1\n"
        "        if iter_num > steps:\n            break\n"
    )}))
    facts = {f.loop.line: f for f in loops.facts.values()}
    assert (facts[8].kind, facts[8].style, facts[8].step_var, facts[8].split) == ("batch", "producer", "iter_num",
                                                                                  "train")
    assert facts[9].kind == "other"


def test_next_with_a_stop_iteration_restart_is_one_fetch_region(project):
    _, loops = analyse(project({"a.py": (
        "from torch.utils.data import DataLoader\n\n\nclass T:\n    def run(self, ds):\n"
        "        loader = DataLoader(ds)\n        it = iter(loader)\n        while True:\n"
        "            try:\n                batch = next(it)\n            except StopIteration:\n"
        "                it = iter(loader)\n                batch = next(it)\n            self.iter_num += 1\n"
    )}))
    [facts] = loops.of_kind("batch")
    assert facts.style == "next" and facts.step_var == "self.iter_num"
    assert len(facts.fetch_regions) == 1 and facts.fetch_regions[0][-1] == ("body", 0)  # the try statement


def test_python_dash_m_pkg_starts_at_main_py(project, cli):
    root = project({
        "pkg/__init__.py": "",
        "pkg/cli.py": "import torch\n\n\ndef main():\n    torch.ones(1, requires_grad=True).sum().backward()\n",
        "pkg/__main__.py": "from pkg.cli import main\n\nmain()\n",
    })
    plan = cli("plan", root, "--no-diff")
    assert "pkg/__main__.py:3: ML-R1 module-level script: initialize after the imports" in plan.out


def test_a_lightning_style_smoke_block_with_its_own_init_is_no_double_initialization(project, cli):
    """The __main__ block of an imported module never runs on import (lightning 2, deepspeed 13,
    torch 19 false errors before)."""
    init = "from dftracer.python import dftracer\n"
    root = project({
        "net.py": init + "import torch\n\n\nclass Net(torch.nn.Module):\n    pass\n\n\n"
                  "if __name__ == '__main__':\n    log = dftracer.initialize_log(None, None, -1)\n    Net()\n",
        "train.py": init + "import torch\nfrom net import Net\n\n\ndef main():\n"
                    "    log = dftracer.initialize_log(None, None, -1)\n    Net()\n"
                    "    torch.ones(1, requires_grad=True).sum().backward()\n\n\nif __name__ == '__main__':\n    main()\n",
    })
    r = cli("validate", root)
    assert "initializes dftracer" not in r.out, r.out


def test_annotations_of_the_dlio_profiler_era_are_recognised(project, cli):
    root = project({"train.py": (
        "import torch\nfrom dlio_profiler.logger import dlio_logger as logger, fn_interceptor\n\n"
        "dlp = fn_interceptor('train')\n\n\n@dlp.log\ndef step(w):\n    (w * 2).sum().backward()\n\n\n"
        "def main():\n    log = logger.initialize_log(logfile=None, data_dir=None, process_id=-1)\n"
        "    step(torch.zeros(1, requires_grad=True))\n    log.finalize()\n\n\n"
        "if __name__ == '__main__':\n    main()\n")})
    plan = cli("plan", root, "--no-diff")
    assert "ML-R1" not in plan.out  # initialized already, through the old module's name


def test_a_loop_that_can_break_is_a_warning_in_plan_and_nothing_in_validate(project, cli):
    root = project({"train.py": (
        "import torch\nfrom torch.utils.data import DataLoader\n\n\ndef train(model, loader, opt, dry_run):\n"
        "    for x in loader:\n        model(x).sum().backward()\n        opt.step()\n        if dry_run:\n"
        "            break\n\n\nif __name__ == '__main__':\n    train(torch.nn.Linear(2, 1), DataLoader(torch.ones(4, 2)), "
        "None, True)\n")})
    plan = cli("plan", root, "--no-diff")
    assert "warning: ML-R6 the loop can `break`" in plan.out
    annotated = root.parent / "annotated"
    cli("run", root, "--out", annotated)
    assert cli("validate", annotated).code == 0


def test_a_closure_called_in_the_loop_resolves(project):
    """timm's train_one_epoch calls its nested `_backward(loss)`: the backward pass in it makes
    train.py a training program."""
    graph, loops = analyse(project({"train.py": (
        "import torch\n\n\ndef train_one_epoch(model, loader, opt):\n    for x in loader:\n\n"
        "        def _backward(_loss):\n            _loss.backward()\n            opt.step()\n\n"
        "        _backward(model(x).sum())\n\n\ndef main():\n"
        "    train_one_epoch(torch.nn.Linear(2, 1), torch.utils.data.DataLoader(torch.ones(4, 2)), None)\n\n\n"
        "if __name__ == '__main__':\n    main()\n")}))
    assert ("train.py::train_one_epoch", "train.py::train_one_epoch.<locals>._backward") in set(graph.graph.edges)
    [program] = classify(graph, loops, [], "auto").programs
    assert program.role == "train"
