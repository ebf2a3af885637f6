"""The codemods of the mechanical proposals, on real source through libcst: each one's
examples are its tests (before -> after), and a site that already has the change is refused."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from dftpass.proposals.codemods import CODEMODS, NotApplicable, Site, Target


def _project(tmp_path: Path, source: str, name: str = "train.py") -> Path:
    root = tmp_path / "src"
    root.mkdir()
    (root / name).write_text(textwrap.dedent(source), encoding="utf-8")
    return root


def _line_of(root: Path, needle: str, name: str = "train.py") -> int:
    return next(i for i, line in enumerate((root / name).read_text().splitlines(), 1) if needle in line)


def test_loader_keywords_replaces_a_keyword_and_adds_a_missing_one(tmp_path):
    root = _project(tmp_path, """\
        from torch.utils.data import DataLoader
        loader = DataLoader(ds, batch_size=16,  # keep me
                            num_workers=args.workers)
        """)
    done = CODEMODS["loader-keywords"](Target(root, root, [Site("train.py", 2)],
                                               {"num_workers": 2, "persistent_workers": True}))
    text = (root / "train.py").read_text()
    assert "num_workers=2, persistent_workers=True)" in text
    assert "# keep me" in text and "args.workers" not in text
    assert done == ["train.py:2: DataLoader(ds, batch_size=16, # keep me num_workers=args.workers) -> "
                    "DataLoader(ds, batch_size=16, # keep me num_workers=2, persistent_workers=True)"]


def test_loader_keywords_finds_the_call_by_rank_in_the_unannotated_source(tmp_path):
    """Lines are measured in the annotated copy; the edit lands on the same call of the source."""
    analysed = _project(tmp_path, """\
        import dftracer  # two lines the annotation added
        import os
        a = DataLoader(x)
        b = DataLoader(y, num_workers=0)
        """)
    source = tmp_path / "orig"
    source.mkdir()
    (source / "train.py").write_text("a = DataLoader(x)\nb = DataLoader(y, num_workers=0)\n")
    CODEMODS["loader-keywords"](Target(analysed, source, [Site("train.py", 4)], {"num_workers": 4}))
    assert (source / "train.py").read_text() == "a = DataLoader(x)\nb = DataLoader(y, num_workers=4)\n"
    assert "num_workers=0" in (analysed / "train.py").read_text()  # the analysed copy is not touched


def test_a_positional_setting_is_replaced_in_place(tmp_path):
    root = _project(tmp_path, "l = DataLoader(ds, 8, True, None, None, 0)\n")
    CODEMODS["loader-keywords"](Target(root, root, [Site("train.py", 1)], {"num_workers": 2}))
    assert (root / "train.py").read_text() == "l = DataLoader(ds, 8, True, None, None, 2)\n"


def test_a_site_that_already_has_the_change_is_refused(tmp_path):
    root = _project(tmp_path, "l = DataLoader(ds, num_workers=2)\n")
    with pytest.raises(NotApplicable, match="already"):
        CODEMODS["loader-keywords"](Target(root, root, [Site("train.py", 1)], {"num_workers": 2}))


def test_non_blocking_copies(tmp_path):
    root = _project(tmp_path, """\
        for x, y in loader:
            x = x.to(device)
            y = y.cuda()
        """)
    sites = [Site("train.py", _line_of(root, "x.to")), Site("train.py", _line_of(root, "y.cuda"))]
    CODEMODS["non-blocking"](Target(root, root, sites))
    text = (root / "train.py").read_text()
    assert "x.to(device, non_blocking=True)" in text and "y.cuda(non_blocking=True)" in text


def test_cudnn_benchmark_after_import_torch_once(tmp_path):
    root = _project(tmp_path, "import os\nimport torch\n\nprint(1)\n")
    target = Target(root, root, [Site("train.py", 0)])
    CODEMODS["cudnn-benchmark"](target)
    assert (root / "train.py").read_text() == "import os\nimport torch\ntorch.backends.cudnn.benchmark = True\n\nprint(1)\n"
    with pytest.raises(NotApplicable, match="already"):
        CODEMODS["cudnn-benchmark"](target)


def test_no_matching_call_is_not_applicable_and_the_file_is_untouched(tmp_path):
    root = _project(tmp_path, "x = 1\n")
    with pytest.raises(NotApplicable):
        CODEMODS["loader-keywords"](Target(root, root, [Site("train.py", 1)], {"num_workers": 2}))
    assert (root / "train.py").read_text() == "x = 1\n"


def test_every_catalogue_strategy_says_how_it_is_applied():
    from dftpass.analysis.proposals import catalogue

    for s in catalogue()["strategies"]:
        how = s.get("apply") or {}
        assert len(how) == 1 and next(iter(how)) in ("codemod", "env", "manual"), s["id"]
        names = how.get("codemod", [])
        for name in [names] if isinstance(names, str) else names:
            assert name in CODEMODS, (s["id"], name)
        if "codemod" in how and "loader-keywords" in ([names] if isinstance(names, str) else names):
            assert s.get("settings"), f"{s['id']}: loader-keywords needs settings to write"
    mixed = next(s for s in catalogue()["strategies"] if s["id"] == "COMP-L1-mixed-precision")
    assert mixed["changes_results"] is True
