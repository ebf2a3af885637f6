"""Fixtures of the analysis tests: the tiny real program, written once per session, and a\nworkspace of two real runs of it with their report (test_report.py, test_report_browser.py)."""

from __future__ import annotations

import contextlib
import io
from pathlib import Path

import pytest

from tests.analysis.helpers import PY, TINY


@pytest.fixture(scope="session")
def tiny_program(tmp_path_factory) -> Path:
    pytest.importorskip("dftracer.python", reason="the dftracer package is not installed")
    folder = tmp_path_factory.mktemp("tiny")
    (folder / "tiny.py").write_text(TINY)
    return folder


@pytest.fixture(scope="session")
def report_workspace(tiny_program, tmp_path_factory):
    """Two real runs, ``baseline`` (2 fork workers) and ``opt1`` (3, applying IO-L1-num-workers),
    then one ``dftpass report``; returns (workspace, what report said on stderr)."""
    pytest.importorskip("matplotlib", reason="the report's timeline picture needs matplotlib")
    from dftpass.cli import main

    ws = tmp_path_factory.mktemp("ws")
    home = tmp_path_factory.mktemp("home")
    with pytest.MonkeyPatch.context() as mp:  # the isolated_config of tests/conftest.py, session-wide
        mp.setenv("DFTPASS_SITE_CONFIG", str(home / "no-site-config.yaml"))
        mp.setenv("XDG_CONFIG_HOME", str(home / "config"))
        mp.setenv("XDG_CACHE_HOME", str(home / "cache"))
        assert main(["trace", "--label", "baseline", "--workspace", str(ws), "--cwd", str(tiny_program),
                     "--", PY, "tiny.py", "2"]) == 0
        assert main(["trace", "--label", "opt1", "--workspace", str(ws), "--cwd", str(tiny_program),
                     "--applies", "IO-L1-num-workers", "--", PY, "tiny.py", "3"]) == 0
        err = io.StringIO()
        with contextlib.redirect_stderr(err):
            assert main(["report", str(ws)]) == 0
    return ws, err.getvalue()
