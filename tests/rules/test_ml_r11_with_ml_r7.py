"""ML-R11 next to ML-R7: what it says about the forward regions ML-R7 queues in the same run."""

from __future__ import annotations

from dftpass.core.config import Config, Source, Value
from dftpass.core.pipeline import annotate

MODEL = (
    "import torch\nfrom torch import nn\nfrom torch.nn.parallel import DistributedDataParallel as DDP\n\n\n"
    "class Net(nn.Module):\n    def __init__(self):\n        super().__init__()\n        self.fc = nn.Linear(4, 2)\n\n"
    "    def forward(self, x):\n        return self.fc(x)\n\n\n"
    "def {factory}():\n    return Net()\n\n\n"
    "def main(rank, loader):\n    model = DDP({factory}().to(rank), device_ids=[rank])\n"
    "    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    for x, y in loader:\n        out = model(x)\n"
    "        (out - y).pow(2).mean().backward()\n        opt.step()\n"
)


def _plan(project, source: str):
    root = project({"train.py": source})
    src = Source("test")
    config = Config(values={"rules.select": Value(["ML-R7", "ML-R11"], src), "plugins.disable": Value([], src),
                            "project.kind": Value("program", src)})
    return annotate(root, config, "plan", jobs=1)


def test_a_factory_ml_r7_does_not_look_into_gets_a_warning_naming_the_class(project):
    """``build_model()`` is opaque to ML-R7, which times the DDP call; ML-R11 names Net.forward."""
    result = _plan(project, MODEL.format(factory="build_model"))
    assert any(e.rule == "ML-R7" and e.line == 23 for _, e in result.edits())
    warnings = [f for f in result.findings if f.rule == "ML-R11"]
    assert len(warnings) == 1 and warnings[0].line == 23
    assert "ML-R7's region around model(), a DistributedDataParallel call" in warnings[0].message
    assert "Net.forward (train.py:11)" in warnings[0].message


def test_a_factory_ml_r7_follows_needs_nothing_from_ml_r11(project):
    """``make_net()`` is followed through DDP: ML-R7 decorates Net.forward and ML-R11 is silent."""
    result = _plan(project, MODEL.format(factory="make_net"))
    assert any(e.rule == "ML-R7" and e.line == 11 for _, e in result.edits())
    assert not [f for f in result.findings if f.rule == "ML-R11"]
