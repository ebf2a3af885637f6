"""The traced program's loaders as the diagnosis reads them (analysis/context.py)."""

from __future__ import annotations

from tests.core.test_callgraph import analyse

from dftpass.analysis.context import program_facts


class _Detection:
    cuda = False


def test_a_dataloader_subclass_a_configuration_picks_is_the_programs_loader(project):
    """pytorch-template: ``config.init_obj('data_loader', module_data)`` builds a subclass of a
    ``BaseDataLoader(DataLoader)`` by name; the graph sees no call of it. It is the program's
    loader all the same (the diagnosis said "no DataLoader" and proposed producing batches
    beside the loop), with settings it cannot read (a dict handed on): unknown, not torch's
    default of no workers."""
    root = project({
        "base.py": (
            "from torch.utils.data import DataLoader\n\n\nclass BaseDataLoader(DataLoader):\n"
            "    def __init__(self, dataset, batch_size, num_workers):\n"
            "        self.init_kwargs = {'dataset': dataset, 'batch_size': batch_size, 'num_workers': num_workers}\n"
            "        super().__init__(**self.init_kwargs)\n"
        ),
        "loaders.py": "from base import BaseDataLoader\n\n\nclass MnistLoader(BaseDataLoader):\n    pass\n",
        "train.py": (
            "import loaders\n\n\ndef main(config):\n    loader = getattr(loaders, config['type'])(**config['args'])\n"
            "    for x in loader:\n        print(x)\n\n\nif __name__ == '__main__':\n    main({})\n"
        ),
    })
    graph, loops = analyse(root)
    facts = program_facts(graph, loops, _Detection(), root, ["python", "train.py"], str(root), {})
    assert facts.has_loader
    [loader] = facts.loaders
    assert (loader.path, loader.callee) == ("base.py", "super().__init__")
    assert loader.workers is None  # set somewhere dftpass cannot read: unknown
