"""ML-R11 next to ML-R7: what it says about the forward regions ML-R7 queues in the same run."""

from __future__ import annotations

import pytest

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


@pytest.mark.parametrize("factory", ["build_model", "make_net"])
def test_ml_r7_puts_the_forward_where_ml_r11_asks_whatever_the_factory(project, factory):
    """One answer: a DDP around the project's Net, built by a factory ML-R7 treats as opaque
    (``build_model``) or one it follows (``make_net``): ML-R7 decorates Net.forward, never the
    DDP call, and ML-R11 has nothing to say about dftpass's own region."""
    result = _plan(project, MODEL.format(factory=factory))
    edits = [e for _, e in result.edits() if e.rule == "ML-R7"]
    assert any(e.line == 11 for e in edits) and not any(e.line == 23 for e in edits), edits
    assert not [f for f in result.findings if f.rule == "ML-R11"]


def test_a_library_module_in_ddp_is_timed_at_the_call_with_a_note(project):
    """The module DDP wraps is torch's own: the call site is the only place; ML-R11 says what
    the event also holds, as a note that fails no gate."""
    source = MODEL.format(factory="build_model").replace("build_model().to(rank)", "nn.Linear(4, 2).to(rank)")
    result = _plan(project, source)
    assert any(e.rule == "ML-R7" and e.line == 23 for _, e in result.edits())
    notes = [f for f in result.findings if f.rule == "ML-R11"]
    assert len(notes) == 1 and notes[0].severity.value == "info" and "no single class of the project" in notes[0].message


def test_a_registry_of_many_models_in_ddp_is_timed_at_the_call_with_a_note(project):
    """open_clip's shape: the factory may build any of five model classes; ML-R7 times the DDP
    call rather than decorate them all, and ML-R11 agrees (a note, not a warning)."""
    classes = "".join(f"class Net{i}(nn.Module):\n    def forward(self, x):\n        return x\n\n\n" for i in range(5))
    source = (MODEL.format(factory="build_model")
              .replace("class Net(nn.Module):", classes + "class Net(nn.Module):")
              .replace("def build_model():\n    return Net()",
                       "def build_model(name='Net0'):\n    return {" + ", ".join(f"'Net{i}': Net{i}" for i in range(5))
                       + "}[name]()"))
    result = _plan(project, source)
    line = source.splitlines().index("        out = model(x)") + 1
    assert any(e.rule == "ML-R7" and e.line == line for _, e in result.edits())
    findings = [f for f in result.findings if f.rule == "ML-R11"]
    assert findings and all(f.severity.value == "info" for f in findings), findings
