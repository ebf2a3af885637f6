"""What a new user meets first: help that explains every option, and output that reads right."""

from __future__ import annotations

import argparse
import re
import warnings
from pathlib import Path

import pytest

from dftpass.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]


def _subcommands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    return dict(sub.choices)


def test_every_option_of_every_command_has_help_text():
    missing = [f"{name} {'/'.join(a.option_strings) or a.dest}"
               for name, p in _subcommands().items() for a in p._actions
               if not isinstance(a, argparse._HelpAction) and a.help is None]
    assert not missing, f"options without help: {missing}"


@pytest.mark.parametrize("command", ["explain", "trace", "install", "strip", "detect", "plugins"])
def test_rule_selection_is_not_offered_where_it_changes_nothing(command):
    options = {o for a in _subcommands()[command]._actions for o in a.option_strings}
    assert "--select" not in options and "--ignore" not in options


def test_top_level_help_text(capsys):
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(["--help"])
    assert done.value.code == 0
    text = capsys.readouterr().out
    assert "exit codes" in text and "130  interrupted" in text
    assert "====" not in text and "``" not in text  # no reStructuredText


def test_docs_cli_md_describes_every_command():
    doc = (ROOT / "docs" / "cli.md").read_text()
    missing = [name for name in _subcommands() if f"`dftpass {name}" not in doc]
    assert not missing, f"docs/cli.md lacks {missing}"


def test_validate_says_1_problem_not_1_problems(cli, project):
    root = project({"train.py": "import torch\n\n\ndef main(opt):\n    opt.step()\n\n\n"
                                "if __name__ == '__main__':\n    main(torch.optim.SGD([], lr=0.1))\n"})
    r = cli("validate", root, "--select", "ML-R4")
    assert "validate: 1 problem in 1 file" in r.err, r.err


def test_plan_lists_one_line_per_change_sorted_by_file_and_line(cli, torch_basic):
    r = cli("plan", torch_basic, "--no-diff")
    lines = [line for line in r.out.splitlines() if re.match(r"^\S+\.py:\d+: ML-R", line)]
    assert lines and len(lines) == len(set(lines)), "a change listed twice"
    keys = [(line.split(":")[0], int(line.split(":")[1])) for line in lines]
    assert keys == sorted(keys)
    assert re.search(rf"{len(lines)} edits", r.err), r.err  # the count is the lines'


def test_a_folder_without_python_files_is_said(cli, tmp_path):
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "notes.txt").write_text("no code here\n")
    r = cli("run", tmp_path / "empty", "--out", tmp_path / "out")
    assert "no Python files to read here" in r.out
    assert "0 of 0 files changed" in r.err


def test_the_package_metadata_builds_without_setuptools_warnings():
    setuptools = pytest.importorskip("setuptools", reason="setuptools is in the dev extra")
    from setuptools.config.pyprojecttoml import apply_configuration
    from setuptools.dist import Distribution

    del setuptools
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        apply_configuration(Distribution(), str(ROOT / "pyproject.toml"))
    assert not [str(w.message) for w in seen]
