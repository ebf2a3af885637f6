"""Fixtures of the analysis tests: the tiny real program, written once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.analysis.helpers import TINY


@pytest.fixture(scope="session")
def tiny_program(tmp_path_factory) -> Path:
    pytest.importorskip("dftracer.python", reason="the dftracer package is not installed")
    folder = tmp_path_factory.mktemp("tiny")
    (folder / "tiny.py").write_text(TINY)
    return folder
