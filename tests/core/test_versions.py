"""The dftracer versions dftpass is tested with: declared once (pyproject's ``trace`` extra),
read back from the installed metadata, and checked by ``dftpass detect``."""

from __future__ import annotations

import sys
from pathlib import Path

from packaging.specifiers import SpecifierSet

from dftpass.core import versions

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[2]


def test_the_range_is_the_trace_extra_of_pyproject_and_bounded():
    extra = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["trace"]
    [line] = [r for r in extra if r.startswith("dftracer")]
    declared = SpecifierSet(line[len("dftracer"):])
    assert any(s.operator == "<" for s in declared) and any(s.operator == ">=" for s in declared)  # bounded
    assert SpecifierSet(versions.tested_range()) == declared  # the installed metadata says the same


def test_the_installed_dftracer_is_in_the_range():
    check = versions.check()
    assert check["installed"] and check["ok"] is True and check["warning"] is None, check


def test_outside_the_range_is_a_warning_that_says_what_to_install():
    check = versions.check(have="2.4.0", want=">=2.2.0,<2.3")
    assert check["ok"] is False
    assert check["warning"].startswith("dftracer 2.4.0 is outside the versions dftpass is tested with")
    assert "pip install 'dftracer>=2.2.0,<2.3'" in check["warning"]
    assert versions.check(have="2.2.5", want=">=2.2.0,<2.3")["ok"] is True
