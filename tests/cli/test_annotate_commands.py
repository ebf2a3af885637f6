"""`dftpass run`, `plan` and `validate` through the real command line."""

from __future__ import annotations

import json

from tests.conftest import line_of, tree_bytes

BROKEN = "def f(:\n    pass\n"
TRAIN = (
    "import torch\nfrom torch.utils.data import DataLoader\n\n\n"
    "def main():\n    loader = DataLoader([1, 2, 3])\n    opt = torch.optim.SGD([], lr=0.1)\n"
    "    for epoch in range(2):\n        for x in loader:\n            opt.step()\n\n\n"
    "if __name__ == '__main__':\n    main()\n"
)


def test_plan_lists_changes_with_rule_file_line_and_the_diff_and_writes_nothing(cli, torch_basic):
    before = tree_bytes(torch_basic)
    r = cli("plan", torch_basic)
    assert r.code == 0
    step = line_of(torch_basic / "engine.py", "optimizer.step()")
    assert f"engine.py:{step}: ML-R4 optimizer step optimizer.step()" in r.out
    guard = line_of(torch_basic / "train.py", '__name__ == "__main__"')
    assert f"train.py:{guard}: ML-R1 program entry" in r.out
    assert "+++ b/engine.py" in r.out and "+        ai.compute.step.start()" in r.out
    assert tree_bytes(torch_basic) == before
    assert not torch_basic.with_name("torch_basic-dftpass").exists()


def test_run_writes_a_copy_and_leaves_the_source_alone(cli, torch_basic):
    before = tree_bytes(torch_basic)
    r = cli("run", torch_basic)
    out = torch_basic.with_name("torch_basic-dftpass")
    assert r.code == 0, r.err
    assert tree_bytes(torch_basic) == before
    assert "@ai.pipeline.train" in (out / "engine.py").read_text()
    assert "@ai.checkpoint.capture" in (out / "checkpoint.py").read_text()
    assert (out / "model.py").read_bytes() != (torch_basic / "model.py").read_bytes()
    patch = (out / ".dftpass" / "patches" / "annotation.patch").read_text()
    assert "+++ b/engine.py" in patch
    report = json.loads((out / ".dftpass" / "report.json").read_text())
    assert "engine.py" in report["files_changed"] and report["edits"]


def test_second_run_on_the_output_changes_nothing(cli, torch_basic, tmp_path):
    assert cli("run", torch_basic, "--out", tmp_path / "once").code == 0
    r = cli("plan", tmp_path / "once")
    assert r.code == 0 and "---" not in r.out and r.out.strip() == ""
    assert "0 of 5 files changed, 0 edits" in r.err


def test_with_no_rule_enabled_every_file_is_byte_identical(cli, torch_basic, tmp_path):
    r = cli("run", torch_basic, "--out", tmp_path / "none", "--ignore", "ML-R*")
    assert r.code == 0
    assert tree_bytes(tmp_path / "none") == tree_bytes(torch_basic)


def test_a_file_that_does_not_parse_is_reported_left_alone_and_the_rest_goes_on(cli, project, tmp_path):
    root = project({"train.py": TRAIN, "broken.py": BROKEN})
    r = cli("run", root, "--out", tmp_path / "out")
    assert r.code == 1  # an error finding
    assert "broken.py:1:" in r.out and "does not parse" in r.out  # findings are the output, on stdout
    assert (tmp_path / "out" / "broken.py").read_text() == BROKEN
    assert "ai.compute.step.start()" in (tmp_path / "out" / "train.py").read_text()


def test_in_place_keeps_a_backup(cli, project):
    root = project({"train.py": TRAIN})
    r = cli("run", root, "--in-place")
    assert r.code == 0
    assert "ai.compute.step.start()" in (root / "train.py").read_text()
    [backup] = list((root / ".dftpass" / "backup").rglob("train.py"))
    assert backup.read_text() == TRAIN
    assert cli("plan", root).out.strip() == ""  # idempotent in place too
    # running again changes nothing, and the patch still says what the first run wrote
    patch = root / ".dftpass" / "patches" / "annotation.patch"
    first = patch.read_bytes()
    assert b"+++ b/train.py" in first
    assert cli("run", root, "--in-place").code == 0
    assert patch.read_bytes() == first


def test_out_must_not_clobber_a_folder_that_is_not_ours(cli, project, tmp_path):
    root = project({"train.py": TRAIN})
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "thesis.tex").write_text("do not delete")
    r = cli("run", root, "--out", precious)
    assert r.code == 2 and "is not a dftpass output" in r.err
    assert (precious / "thesis.tex").read_text() == "do not delete"
    # our own previous output is replaced
    assert cli("run", root, "--out", tmp_path / "mine").code == 0
    assert cli("run", root, "--out", tmp_path / "mine").code == 0


def test_out_inside_the_project_is_excluded_from_the_copy(cli, project):
    root = project({"train.py": TRAIN})
    assert cli("run", root, "--out", root / "annotated").code == 0
    assert (root / "annotated" / "train.py").exists()
    assert not (root / "annotated" / "annotated").exists()


def test_diff_flag_and_formats(cli, project, tmp_path):
    root = project({"train.py": TRAIN, "broken.py": BROKEN})
    r = cli("run", root, "--out", tmp_path / "o", "--diff", "--format", "json")
    findings = json.loads(r.out[r.out.index("\n[") + 1:])
    assert findings[0]["path"] == "broken.py" and findings[0]["severity"] == "error"
    assert "+++ b/train.py" in r.out
    sarif = json.loads(cli("plan", root, "--format", "sarif").out)
    assert sarif["version"] == "2.1.0"
    assert sarif["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "broken.py"


def test_validate_fails_on_the_source_and_passes_on_the_annotated_copy(cli, torch_basic, tmp_path):
    r = cli("validate", torch_basic)
    assert r.code == 1
    assert "not annotated" in r.out and "ML-R6" in r.out
    cli("run", torch_basic, "--out", tmp_path / "ann")
    r = cli("validate", tmp_path / "ann")
    assert r.code == 0, r.out
    assert "validate: 0 problems" in r.err


def test_validate_reports_double_initialization(cli, project):
    init = "from dftracer.python import dftracer\nlog = dftracer.initialize_log(logfile=None, data_dir=None, process_id=-1)\n"
    root = project({
        "helpers.py": init + "\n\ndef helper():\n    return 1\n",
        "main.py": init + "from helpers import helper\n\n\ndef main():\n    helper()\n\n\n"
                   "if __name__ == '__main__':\n    main()\n",
    })
    r = cli("validate", root)
    assert r.code == 1
    assert "initializes dftracer 2 times (helpers.py:2, main.py:2)" in r.out


def test_time_passes_and_passes_filter(cli, torch_basic):
    r = cli("plan", torch_basic, "--passes", "ML-R6", "--time-passes", "--no-diff")
    assert r.code == 0
    assert {line.split(": ")[1].split()[0] for line in r.out.splitlines() if line} == {"ML-R6"}
    timed = [line.split()[0] for line in r.err.splitlines() if line.startswith("  ")]
    assert timed.index("loops") < timed.index("ML-R6")


def test_bad_usage_exit_codes(cli, tmp_path):
    assert cli("plan", tmp_path / "missing").code == 2
    (tmp_path / "dftpass.yaml").write_text("rules:\n  bogus: 1\n")
    r = cli("plan", tmp_path)
    assert r.code == 2 and "dftpass.yaml:2" in r.err


def test_logs_are_structured_json_with_log_format_json(cli, torch_basic, tmp_path):
    import json as _json

    r = cli("-v", "--log-format", "json", "run", torch_basic, "--out", tmp_path / "o")
    events = [_json.loads(line) for line in r.err.splitlines() if line.startswith("{")]
    names = [e["event"] for e in events]
    assert "project read" in names and "annotated copy written" in names
    read = next(e for e in events if e["event"] == "project read")
    assert read["files"] == 5 and read["level"] == "info" and "timestamp" in read
    quiet = cli("run", torch_basic, "--out", tmp_path / "q")
    assert not any(line.startswith("{") for line in quiet.err.splitlines())


def test_jobs_2_writes_exactly_what_jobs_1_writes(cli, torch_basic, tmp_path):
    assert cli("run", torch_basic, "--out", tmp_path / "one", "--jobs", "1").code == 0
    assert cli("run", torch_basic, "--out", tmp_path / "two", "--jobs", "2").code == 0
    assert tree_bytes(tmp_path / "one") == tree_bytes(tmp_path / "two")


def test_a_training_project_without_an_entry_is_told_so(cli, project):
    root = project({"lib.py": "import torch\n\n\ndef train(model, loader):\n    for x in loader:\n        model(x)\n"})
    r = cli("plan", root)
    assert "treated as a library, so no AI regions are added: no program entry" in r.out and "warning" in r.out
    assert "--set project.kind=program" in r.out
    assert "0 edits" in r.err and "+++" not in r.out  # no AI regions on a library
    forced = cli("plan", root, "--set", "project.kind=program")
    assert "ML-R6 batch loop" in forced.out
    plain = project({"util.py": "def f():\n    return 1\n"}, name="plain")
    # shown at default verbosity too: a user who runs dftpass on it expects regions
    assert "treated as a library, so no AI regions are added: no program entry" in cli("plan", plain).out


STREAM = (
    "import torch\nfrom streams import make_stream\n\n\ndef train(model, opt):\n"
    "    it = make_stream('train')\n    for step in range(10):\n        x, y = next(it)\n"
    "        model(x).sum().backward()\n        opt.step()\n\n\n"
    "if __name__ == '__main__':\n    train(torch.nn.Linear(2, 1), None)\n"
)
#: a loop that calls a model on what an outside iterator hands it, neither training nor
#: gradient-free: no step dftpass can read, so no fetch is placed
PREDICT = (
    "import torch\nfrom streams import make_stream\n\n\ndef predict(model):\n"
    "    it = make_stream('test')\n    for step in range(10):\n        x = next(it)\n"
    "        print(model(x))\n\n\n"
    "if __name__ == '__main__':\n    predict(torch.nn.Linear(2, 1))\n"
)


def test_a_step_places_its_fetch_and_names_the_broken_chain(cli, project, tmp_path):
    """Issue 39: a training step shows its batch loop; the iterator's producer outside the
    project is said in a note (-v), and the fetch is placed all the same."""
    root = project({"train.py": STREAM})
    plan = cli("plan", root, "-v")
    assert "+        ai.dataloader.fetch.start()" in plan.out
    assert "info: ML-R6 batch fetch placed from the step's own evidence" in plan.out
    assert "make_stream(), outside the project" in plan.out
    assert "warning: ML-R6" not in plan.out


def test_a_limit_of_dftpass_is_a_warning_in_plan_and_a_note_in_validate(cli, project, tmp_path):
    """A batch fetch dftpass cannot place (a model run on what an outside iterator hands it,
    with no step to read) is said by plan; validate of the annotated copy has nothing missing
    that a run would write, so it exits 0 and keeps the reason as a note (-v)."""
    root = project({"train.py": PREDICT, "pyproject.toml": "[tool.dftpass]\nproject.kind = 'program'\n"})
    plan = cli("plan", root)
    assert "warning: ML-R6 no batch fetch placed" in plan.out
    assert cli("run", root, "--out", tmp_path / "out").code == 0
    quiet = cli("validate", tmp_path / "out")
    assert quiet.code == 0, quiet.out
    verbose = cli("validate", tmp_path / "out", "-v")
    assert "ML-R6 no batch fetch placed" in verbose.out


def test_the_progress_bar_is_for_a_person_at_a_terminal(monkeypatch, tmp_path):
    """Issue 40: progress on a terminal's stderr, never under -q or for --format json."""
    import argparse

    from dftpass.commands import annotate as commands

    made = []

    class Recording:
        def __init__(self, label, enabled=None):
            made.append(enabled)

        def close(self):
            pass

    monkeypatch.setattr(commands, "Progress", Recording)
    monkeypatch.setattr("dftpass.core.pipeline.annotate", lambda *a, **k: None)
    base = dict(project=tmp_path, passes=None, time_passes=False, log_format="console", set=[], select=None,
                ignore=None, jobs=None, config=None)
    for extra, expected in (({"format": "text"}, None), ({"format": "text", "quiet": True}, False),
                            ({"format": "json"}, False)):
        commands._annotate(argparse.Namespace(**base, **extra), "plan")
        assert made[-1] is expected, extra
