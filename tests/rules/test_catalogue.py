"""The catalogue users read is generated from the rules, and the ready-made configurations load."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import ROOT
from dftpass.commands.info import catalogue_markdown
from dftpass.core.config import Config, load_config
from dftpass.core.manager import PassManager


def test_catalogue_is_up_to_date(monkeypatch):
    monkeypatch.setenv("DFTPASS_DISABLE_PLUGIN_AUTOLOAD", "1")
    expected = catalogue_markdown(PassManager(Config(values={}))) + "\n"
    assert (ROOT / "rules" / "catalogue.md").read_text() == expected, \
        "rules/catalogue.md is stale: run `dftpass rules --markdown > rules/catalogue.md`"


@pytest.mark.parametrize("path", sorted((ROOT / "rules").rglob("*.yaml")), ids=lambda p: p.name)
def test_ready_made_configurations_load_and_name_real_rules(path: Path):
    config = load_config(None, config_file=path)
    PassManager(config).check_config()
