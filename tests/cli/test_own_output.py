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
