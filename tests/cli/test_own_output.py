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


#: issue 39's shapes, each as small as it comes: what dftpass writes for them passes its own checks
SHAPES = {
    "full-batch": {"train.py": (
        "import torch\n\nmodel = torch.nn.Linear(8, 3)\nopt = torch.optim.Adam(model.parameters())\n"
        "x, y = torch.randn(50, 8), torch.randint(0, 3, (50,))\n\n\ndef train(epoch):\n    model.train()\n"
        "    opt.zero_grad()\n    torch.nn.functional.cross_entropy(model(x), y).backward()\n    opt.step()\n\n\n"
        "def test():\n    model.eval()\n    print(model(x).argmax(1).float().mean().item())\n\n\n"
        "for epoch in range(3):\n    train(epoch)\ntest()\n")},
    "validation-inside-training": {"train.py": (
        "import torch\nfrom torch.utils.data import DataLoader\n\n\ndef main():\n    model = torch.nn.Linear(4, 1)\n"
        "    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n    train_ld = DataLoader(torch.ones(8, 4), batch_size=4)\n"
        "    test_ld = DataLoader(torch.ones(4, 4), batch_size=2)\n    k = 0\n    while k < 2:\n"
        "        for j, x in enumerate(train_ld):\n            model(x).sum().backward()\n            opt.step()\n"
        "            if j % 2 == 0:\n                for t in test_ld:\n                    print(model(t).sum().item())\n"
        "        k += 1\n\n\nif __name__ == '__main__':\n    main()\n")},
    "logging-generator": {
        "utils.py": "class Logger:\n    def log_every(self, iterable, n):\n        for i, obj in enumerate(iterable):\n"
                    "            yield obj\n            if i % n == 0:\n                print(i)\n",
        "train.py": "import torch\nimport utils\nfrom streams import make_loader\n\n\ndef one_epoch(model, opt, loader):\n"
                    "    for x, y in utils.Logger().log_every(loader, 10):\n        x = x.to('cuda')\n"
                    "        torch.nn.functional.mse_loss(model(x), y).backward()\n        opt.step()\n\n\n"
                    "def main():\n    model = torch.nn.Linear(4, 1)\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
                    "    for epoch in range(2):\n        one_epoch(model, opt, make_loader())\n\n\n"
                    "if __name__ == '__main__':\n    main()\n"},
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_issue_39_shapes_pass_their_own_checks(cli, project, tmp_path, shape):
    root = project(SHAPES[shape], name=shape)
    first = cli("run", root, "--out", tmp_path / "once")
    assert first.code == 0, first.out + first.err
    check = cli("validate", tmp_path / "once")
    assert check.code == 0, f"validate rejects what run wrote:\n{check.out}"
    written = tree_bytes(tmp_path / "once")
    again = cli("run", tmp_path / "once", "--out", tmp_path / "twice")
    assert again.code == 0, again.out + again.err
    assert not sorted(k for k, v in tree_bytes(tmp_path / "twice").items() if written.get(k) != v)
    assert "ai.dataloader.fetch" in (tmp_path / "once" / "train.py").read_text() or shape == "full-batch"
