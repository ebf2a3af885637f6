"""ML-R1 for real: the annotated program finalizes its trace on every way out (normal return,
an exception, sys.exit) with ``atexit`` alone, its ``__main__`` block not re-indented, and
does not leave dft.log behind."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys

import pytest

from dftpass.cli import main

pytest.importorskip("dftracer.python", reason="dftracer is not installed (./dev setup installs it)")
pytestmark = pytest.mark.e2e

PROGRAM = '''import sys

import torch
from torch.utils.data import DataLoader


def train(model, loader, opt):
    for x in loader:
        loss = model(x).sum()
        loss.backward()
        opt.step()


def main(mode):
    torch.manual_seed(0)
    model = torch.nn.Linear(2, 1)
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    train(model, DataLoader(torch.randn(8, 2), batch_size=2), opt)
    if mode == "raise":
        raise RuntimeError("boom")
    if mode == "exit":
        sys.exit(3)


if __name__ == "__main__":
    mode = sys.argv[1]
    main(mode)
'''


@pytest.fixture(scope="module")
def annotated(tmp_path_factory):
    src = tmp_path_factory.mktemp("src")
    (src / "prog.py").write_text(PROGRAM)
    out = tmp_path_factory.mktemp("out") / "prog-dftpass"
    assert main(["run", str(src), "--out", str(out)]) == 0
    text = (out / "prog.py").read_text()
    # the block runs two statements: one line in front of them initializes and opens the root
    # region (dftpass.runtime), atexit closes it and finalizes; the block's own lines are left
    # as they were (not re-indented under a try)
    assert "    _dft_log = _dft_runtime.initialize(root=True)\n    mode = sys.argv[1]\n" in text
    assert text.endswith("    mode = sys.argv[1]\n    main(mode)\n") and "finally:" not in text
    return out


@pytest.mark.parametrize("mode, code", [("ok", 0), ("raise", 1), ("exit", 3)])
def test_every_exit_path_leaves_a_complete_trace(annotated, tmp_path, mode, code):
    traces = tmp_path / "traces"
    traces.mkdir()
    env = {k: v for k, v in os.environ.items() if not k.startswith("DFTRACER_")}
    env.update(DFTRACER_ENABLE="1", DFTRACER_INC_METADATA="1", DFTRACER_LOG_FILE=str(traces / "trace"))
    proc = subprocess.run([sys.executable, str(annotated / "prog.py"), mode], cwd=tmp_path, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == code, proc.stderr
    assert not (tmp_path / "dft.log").exists()
    [app] = list(traces.glob("trace-*-app.pfw.gz"))
    events = [json.loads(line) for line in gzip.decompress(app.read_bytes()).decode().splitlines() if line.strip()]
    names = {(e["cat"], e["name"]) for e in events if e.get("ph") == 1}
    # the root region is written even when main() raises or exits; so is everything before
    assert ("ai_root", "ai_root") in names and ("pipeline", "train") in names
    assert ("compute", "backward") in names and ("dataloader", "fetch.iter") in names
    assert any(e["name"] == "end" for e in events)  # finalize() ran


def test_the_import_prelude_skips_dynamo_and_hides_no_module(annotated):
    """The line before dftpass's dftracer import keeps ``torch._dynamo`` out of the process (1.5 s
    an import), and takes its stand-in out of ``sys.modules`` again: a later import of dftracer's
    Dynamo backend gets the real module, not an empty one."""
    from dftpass.core.emitter import IMPORT_PRELUDE

    assert IMPORT_PRELUDE in (annotated / "prog.py").read_text()
    check = ("import sys; import prog; "
             "assert 'torch._dynamo' not in sys.modules, 'the prelude did not keep torch._dynamo out'; "
             "assert 'dftracer.python.dynamo' not in sys.modules, 'the stand-in stayed in sys.modules'; "
             "from dftracer.python.dynamo import create_backend; print(create_backend.__module__)")
    env = {k: v for k, v in os.environ.items() if not k.startswith("DFTRACER_")}
    proc = subprocess.run([sys.executable, "-c", check], cwd=annotated, env=env, capture_output=True, text=True,
                          timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "dftracer.python.dynamo"


MODEL = '''import torch


class Net(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = torch.nn.Linear(2, 1)

    def forward(self, x):
        return self.fc(x)
'''


def test_the_prelude_goes_once_in_the_file_that_starts_tracing(tmp_path):
    """prog.py starts tracing and imports model.py, which gets a region: only prog.py has the
    prelude, and it runs before model.py imports dftracer (torch._dynamo stays out)."""
    from dftpass.core.emitter import IMPORT_PRELUDE

    src = tmp_path / "src"
    src.mkdir()
    (src / "prog.py").write_text(PROGRAM.replace("import torch\n", "import torch\nfrom model import Net\n", 1)
                                 .replace("torch.nn.Linear(2, 1)", "Net()"))
    (src / "model.py").write_text(MODEL)
    out = tmp_path / "out"
    assert main(["run", str(src), "--out", str(out)]) == 0
    model = (out / "model.py").read_text()
    assert "from dftracer.python import ai" in model and IMPORT_PRELUDE not in model
    assert (out / "prog.py").read_text().count(IMPORT_PRELUDE) == 1
    env = {k: v for k, v in os.environ.items() if not k.startswith("DFTRACER_")}
    proc = subprocess.run([sys.executable, "-c", "import sys; import prog; assert 'torch._dynamo' not in sys.modules"],
                          cwd=out, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
