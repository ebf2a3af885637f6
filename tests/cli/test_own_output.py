"""dftpass's own output passes dftpass's own checks, on every bundled fixture app: ``run``
exits 0, ``validate`` of what it wrote exits 0 (nothing missing, nothing wrong: what is there
is all a run would write), and a second ``run`` on that output exits 0 and changes nothing.
The same invariant is a column of ``bench/roundtrip.py`` for large codebases, and
docs/realworld.md records it for the public programs."""

from __future__ import annotations

import pytest

from tests.conftest import APPS, tree_bytes

FIXTURES = sorted(p.name for p in APPS.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))


def test_every_fixture_app_is_checked():
    assert len(FIXTURES) >= 14 and "zoo" in FIXTURES and "torch_basic" in FIXTURES


@pytest.mark.parametrize("app", FIXTURES)
def test_run_then_validate_then_run_again(cli, tmp_path, app):
    first = cli("run", APPS / app, "--out", tmp_path / "once")
    assert first.code == 0, first.out + first.err
    check = cli("validate", tmp_path / "once")
    assert check.code == 0, f"validate rejects what run wrote for {app}:\n{check.out}"
    written = tree_bytes(tmp_path / "once")
    again = cli("run", tmp_path / "once", "--out", tmp_path / "twice")
    assert again.code == 0, again.out + again.err
    changed = sorted(k for k, v in tree_bytes(tmp_path / "twice").items() if written.get(k) != v)
    assert not changed, f"a second run on {app}'s output changed {changed}"


def test_code_that_trains_nothing_gets_no_region(cli, project, tmp_path):
    """An export script and a plotting script beside the training program: their checkpoint,
    data and I/O statements get nothing (nothing traces them; a note says why), the training
    program gets its regions, and validate of the output passes."""
    root = project({
        "model.py": "import torch\n\n\nclass Net(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
                    "        self.fc = torch.nn.Linear(4, 1)\n\n    def forward(self, x):\n        return self.fc(x)\n",
        "train.py": "import torch\nfrom torch.utils.data import DataLoader\n\nfrom model import Net\n\n\ndef main():\n"
                    "    model = Net()\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    for epoch in range(2):\n"
                    "        for x in DataLoader(torch.ones(8, 4), batch_size=4):\n            model(x).sum().backward()\n"
                    "            opt.step()\n        torch.save(model.state_dict(), 'ckpt.pt')\n\n\n"
                    "if __name__ == '__main__':\n    main()\n",
        "export.py": "import json\nimport sys\n\nimport torch\n\nfrom model import Net\n\n\ndef hf_export(src, dst):\n"
                     "    state = torch.load(src)\n    model = Net()\n    model.load_state_dict(state)\n"
                     "    half = {k: v.half() for k, v in model.state_dict().items()}\n    torch.save(half, dst)\n"
                     "    with open(dst + '.json', 'w') as f:\n        json.dump(sorted(half), f)\n\n\n"
                     "if __name__ == '__main__':\n    hf_export(sys.argv[1], sys.argv[2])\n",
        "plot.py": "import sys\n\nimport numpy as np\n\n\ndef main(path):\n    losses = np.loadtxt(path)\n"
                   "    np.save(path + '.npy', losses)\n\n\nif __name__ == '__main__':\n    main(sys.argv[1])\n",
    })
    r = cli("run", root, "--out", tmp_path / "out", "-v")
    assert r.code == 0, r.out + r.err
    for script in ("export.py", "plot.py"):
        assert (tmp_path / "out" / script).read_bytes() == (root / script).read_bytes(), script
    assert "export.py:10:1: info: ML-R18 not placed" in r.out and "nothing traces them" in r.out
    train = (tmp_path / "out" / "train.py").read_text()
    assert "ai.checkpoint" in train and "ai.dataloader.fetch" in train
    assert cli("validate", tmp_path / "out").code == 0
