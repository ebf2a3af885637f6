"""Configuration layers, sources, validation and rule selection."""

from __future__ import annotations

import pytest

from dftpass.core.config import ConfigError, cli_overrides, load_config
from dftpass.core.selection import rule_selected


def test_layers_override_in_order_and_remember_their_source(tmp_path, monkeypatch):
    site = tmp_path / "site.yaml"
    site.write_text("run:\n  jobs: 3\nfiles:\n  max-bytes: 10\n")
    user = tmp_path / "xdg" / "dftpass" / "config.yaml"
    user.parent.mkdir(parents=True)
    user.write_text("files:\n  max-bytes: 20\n")
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "dftpass.yaml").write_text("rules:\n  ignore: [ML-R2]\nfiles:\n  max-bytes: 30\n")
    monkeypatch.setenv("DFTPASS_SITE_CONFIG", str(site))
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))

    config = load_config(proj, cli_overrides(None, None, jobs=5))

    assert config.get("files.max-bytes") == 30
    assert config.source("files.max-bytes").layer == "project"
    assert config.source("files.max-bytes").line == 4
    assert config.get("run.jobs") == 5 and config.source("run.jobs").layer == "cli"
    assert config.get("rules.ignore") == ["ML-R2"]
    shown = config.show()
    assert "files.max-bytes" in shown and "project" in shown and "dftpass.yaml:4" in shown
    assert "run.jobs" in shown and "# cli" in shown


def test_site_value_survives_when_no_higher_layer_sets_it(tmp_path, monkeypatch):
    site = tmp_path / "site.yaml"
    site.write_text("trace:\n  chunk-mb: 8\n")
    monkeypatch.setenv("DFTPASS_SITE_CONFIG", str(site))
    config = load_config(tmp_path)
    assert config.get("trace.chunk-mb") == 8
    assert config.source("trace.chunk-mb").layer == "site"


def test_pyproject_tool_table_is_the_project_layer(tmp_path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.dftpass.rules]\nignore = ["ML-R9"]\n\n[tool.dftpass.run]\njobs = 2\n')
    config = load_config(tmp_path)
    assert config.get("rules.ignore") == ["ML-R9"]
    assert config.source("run.jobs").line == 8


def test_unknown_key_names_file_and_line(tmp_path):
    (tmp_path / "dftpass.yaml").write_text("rules:\n  ignore: []\n  selekt: [ML-R1]\n")
    with pytest.raises(ConfigError, match=r"dftpass.yaml:3: unknown configuration key 'rules.selekt'"):
        load_config(tmp_path)


def test_bad_value_names_file_and_line(tmp_path):
    (tmp_path / "dftpass.yaml").write_text("run:\n  jobs: many\n")
    with pytest.raises(ConfigError, match=r"dftpass.yaml:2: 'run.jobs' must be an integer"):
        load_config(tmp_path)


def test_bad_value_in_pyproject_names_its_line(tmp_path):
    (tmp_path / "pyproject.toml").write_text('[tool.dftpass.files]\nmax-bytes = "big"\n')
    with pytest.raises(ConfigError, match=r"pyproject.toml:2: "):
        load_config(tmp_path)


def test_invalid_yaml_is_a_config_error(tmp_path):
    (tmp_path / "dftpass.yaml").write_text("rules: [unclosed\n")
    with pytest.raises(ConfigError, match="invalid YAML"):
        load_config(tmp_path)


def test_set_override_is_typed_and_checked():
    assert cli_overrides(None, None, None, ["files.max-bytes=1234"])["files.max-bytes"].value == 1234
    with pytest.raises(ConfigError, match="unknown configuration key"):
        cli_overrides(None, None, None, ["nope=1"])
    with pytest.raises(ConfigError, match="^--set: 'run.jobs' must be an integer"):
        cli_overrides(None, None, None, ["run.jobs=x"])


def test_set_takes_a_list_the_way_the_flags_do_and_says_what_it_could_not_read():
    """``--set rules.select=ML-R1`` is a list of one (it was refused as "must be a list"), a
    comma list is a list, and a YAML slip is a sentence naming the key, not parser text."""
    assert cli_overrides(None, None, None, ["rules.select=ML-R1"])["rules.select"].value == ["ML-R1"]
    assert cli_overrides(None, None, None, ["rules.ignore=ML-R19, ML-R27"])["rules.ignore"].value == ["ML-R19", "ML-R27"]
    assert cli_overrides(None, None, None, ["rules.select=[ML-R1, ML-R6]"])["rules.select"].value == ["ML-R1", "ML-R6"]
    with pytest.raises(ConfigError) as err:
        cli_overrides(None, None, None, ["rules.select=[ML-R1"])
    message = str(err.value)
    assert message.startswith("--set rules.select: '[ML-R1' is not a value dftpass can read")
    assert "<unicode string>" not in message and "\n" not in message


@pytest.mark.parametrize(
    "rule, tags, default, select, ignore, expected",
    [
        ("ML-R6", ("pipeline",), True, None, [], True),  # default on
        ("ML-R28", ("pytorch",), False, None, [], False),  # default off
        ("ML-R6", ("pipeline",), True, None, ["ML-R6"], False),  # ignored by id
        ("ML-R21", (), True, None, ["ML-R2*"], False),  # ignored by glob prefix
        ("ML-R3", ("pipeline",), True, None, ["tag:pipeline"], False),  # ignored by tag
        ("ML-R3", ("pipeline",), True, ["ML-R6"], [], False),  # not selected
        ("ML-R28", (), False, ["ML-R*"], [], False),  # opt-in rules need their exact id
        ("ML-R28", (), False, ["ML-R28"], [], True),
        ("ML-R4", ("compute",), True, ["tag:compute"], [], True),
    ],
)
def test_rule_selection(rule, tags, default, select, ignore, expected):
    assert rule_selected(rule, tags, default, select, ignore) is expected


# -- numbers as users write them (issue 41) --------------------------------------------------
@pytest.mark.parametrize("spelling", ["1e-05", ".00001", "0.00001", "1E-5", "9e-05", "2e-05"])
def test_a_number_in_any_python_spelling_is_a_number(tmp_path, spelling):
    """YAML 1.1 reads ``1e-05`` as text; every layer reads it as the number it is."""
    expected = float(spelling)
    assert cli_overrides(None, None, None, [f"overhead.step-time={spelling}"])["overhead.step-time"].value == expected
    (tmp_path / "dftpass.yaml").write_text(f"overhead:\n  step-time: {spelling}\n")
    assert load_config(tmp_path).get("overhead.step-time") == expected


def test_a_flag_s_bad_value_names_the_flag_and_a_file_s_names_the_file(tmp_path):
    with pytest.raises(ConfigError, match=r"^--sample-every: 'overhead.sample-every' must be an integer >= 1"):
        cli_overrides(None, None, None, flags=[("overhead.sample-every", 0, "--sample-every")])
    (tmp_path / "dftpass.yaml").write_text("overhead:\n  step-time: -1e-05\n")
    with pytest.raises(ConfigError, match=r"dftpass.yaml:2: 'overhead.step-time' must be a number of seconds > 0"):
        load_config(tmp_path)


def test_step_time_flag_takes_small_values(cli, tmp_path):
    root = tmp_path / "p"
    root.mkdir()
    (root / "train.py").write_text("import torch\n\n\ndef main(model, loader, opt):\n    for x in loader:\n"
                                   "        model(x).sum().backward()\n        opt.step()\n\n\n"
                                   "if __name__ == '__main__':\n    main(None, [], None)\n")
    for value in ("1e-05", ".00001", "9e-05"):
        r = cli("plan", root, "--no-diff", "--step-time", value)
        assert r.code in (0, 1), r.err
        assert f"{float(value) * 1000:.2f} ms step" in r.out + r.err


def test_jobs_default_to_the_cores_for_a_large_project_only(monkeypatch):
    """Issue 40: ``run.jobs`` 0 (the default) reads and rewrites a project of 64 files or more
    in worker processes, one per core (at most 8); a small project stays in the process."""
    import os

    from dftpass.core.config import AUTO_JOBS_FILES, effective_jobs

    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: set(range(12)), raising=False)
    assert load_config(None).get("run.jobs") == 0
    assert effective_jobs(0, AUTO_JOBS_FILES - 1) == 1
    assert effective_jobs(0, AUTO_JOBS_FILES) == 8  # 12 cores, at most 8
    assert effective_jobs(None, 1000) == 8
    assert effective_jobs(3, 10) == 3 and effective_jobs(1, 1000) == 1
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1})
    assert effective_jobs(0, 500) == 2
    with pytest.raises(ConfigError, match="^--jobs: 'run.jobs' must be an integer >= 0"):
        cli_overrides(None, None, -1)
