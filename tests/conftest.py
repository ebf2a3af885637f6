"""Shared fixtures: the real CLI in-process, throwaway projects, the bundled fixture app."""

from __future__ import annotations

import shutil
from pathlib import Path

import attrs
import pytest

from dftpass.cli import main

ROOT = Path(__file__).resolve().parents[1]
FIXTURES = ROOT / "fixtures"
APPS = FIXTURES / "apps"


@pytest.fixture(autouse=True)
def isolated_config(tmp_path_factory, monkeypatch):
    """No site or user configuration of the machine leaks into a test, and no test writes the
    user's cache (a bare folder of traces is cached there)."""
    home = tmp_path_factory.mktemp("home")
    monkeypatch.setenv("DFTPASS_SITE_CONFIG", str(home / "no-site-config.yaml"))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(home / "config"))
    monkeypatch.setenv("XDG_CACHE_HOME", str(home / "cache"))


@attrs.frozen
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def cli(capsys):
    """Run ``dftpass ARGS`` in this process; returns exit code, stdout and stderr."""

    def run(*args) -> CliResult:
        code = main([str(a) for a in args])
        out, err = capsys.readouterr()
        return CliResult(code, out, err)

    return run


def write_project(root: Path, files: dict[str, str | bytes]) -> Path:
    for rel, content in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")
    return root


@pytest.fixture
def project(tmp_path):
    """A factory: ``project({"train.py": "..."})`` -> the project's root."""

    def make(files: dict[str, str | bytes], name: str = "proj") -> Path:
        return write_project(tmp_path / name, files)

    return make


@pytest.fixture
def torch_basic(tmp_path) -> Path:
    """A fresh copy of the bundled fixture app."""
    dst = tmp_path / "torch_basic"
    shutil.copytree(APPS / "torch_basic", dst, ignore=shutil.ignore_patterns("__pycache__", "data", "out"))
    return dst


def line_of(path: Path, text: str) -> int:
    """The 1-based number of the first line of ``path`` that contains ``text``."""
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if text in line:
            return number
    raise AssertionError(f"{text!r} not in {path}")


def tree_bytes(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (dftpass's own state folder excluded) -> its bytes."""
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and ".dftpass" not in p.parts and "__pycache__" not in p.parts}
