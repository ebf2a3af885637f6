"""A synthetic project of N files, each a small training program's parts (issue 40's work
guard): a data set, a loader factory, a generator over its batches, a model, helpers that call
the previous file's helpers (so that what a function reaches grows with the project), and a
training function with an epoch loop and a batch loop; file 0 is the entry."""

from __future__ import annotations

from pathlib import Path


def module(k: int) -> str:
    prev = f"from mod{k - 1} import helper{k - 1}, make_loader{k - 1}\n" if k else ""
    call_prev = f"    x = helper{k - 1}(x)\n" if k else ""
    return (
        "import torch\nfrom torch.utils.data import DataLoader, Dataset\n" + prev + "\n\n"
        f"class Data{k}(Dataset):\n    def __init__(self, n):\n        self.n = n\n\n"
        "    def __len__(self):\n        return self.n\n\n"
        "    def __getitem__(self, i):\n        return torch.full((4,), float(i))\n\n\n"
        f"def make_loader{k}(n):\n    return DataLoader(Data{k}(n), batch_size=2)\n\n\n"
        f"def batches{k}(loader):\n    for batch in loader:\n        yield batch * 2\n\n\n"
        f"class Net{k}(torch.nn.Module):\n    def __init__(self):\n        super().__init__()\n"
        "        self.fc = torch.nn.Linear(4, 1)\n\n    def forward(self, x):\n        return self.fc(x)\n\n\n"
        f"def helper{k}(x):\n" + call_prev + "    return x + 1\n\n\n"
        f"def train{k}(epochs):\n    model = Net{k}()\n    opt = torch.optim.SGD(model.parameters(), lr=0.1)\n"
        f"    loader = make_loader{k}(8)\n    for epoch in range(epochs):\n"
        f"        for x in batches{k}(loader):\n            y = model(helper{k}(x))\n"
        "            y.sum().backward()\n            opt.step()\n"
        f"        for x in loader:\n            model(x)\n    return model\n"
    )


def write(root: Path, n: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for k in range(n):
        (root / f"mod{k}.py").write_text(module(k))
    calls = "".join(f"    mod{k}.train{k}(1)\n" for k in range(n))
    (root / "main.py").write_text("".join(f"import mod{k}\n" for k in range(n)) + "\n\ndef main():\n" + calls
                                  + "\n\nif __name__ == '__main__':\n    main()\n")
    return root
