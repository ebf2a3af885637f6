"""The harness runs a program again once when it died of gloo's teardown race, and only then."""

from __future__ import annotations

import sys

import pytest

from tests.e2e.harness import GLOO_TEARDOWN_ABORT, run_program

FLAKY = (
    "import pathlib, sys\n"
    "marker = pathlib.Path('ran-once')\n"
    "if not marker.exists():\n"
    "    marker.write_text('1')\n"
    f"    sys.stderr.write({GLOO_TEARDOWN_ABORT[0]!r} + '\\n' + 'process 1 ' + {GLOO_TEARDOWN_ABORT[1]!r})\n"
    "    sys.exit(1)\n"
    "print('done')\n"
)


def test_a_teardown_abort_is_run_again_once(tmp_path):
    (tmp_path / "prog.py").write_text(FLAKY)
    stale = tmp_path / "trace-0123-app.pfw"
    stale.write_text("from the aborted run")
    proc = run_program([sys.executable, "prog.py"], tmp_path, tmp_path / "trace")
    assert proc.stdout == "done\n" and not stale.exists()


def test_another_failure_is_not_run_again(tmp_path):
    (tmp_path / "prog.py").write_text("import sys\nsys.stderr.write('terminate called without an active exception')\n"
                                      "sys.exit(1)\n")
    with pytest.raises(AssertionError):
        run_program([sys.executable, "prog.py"], tmp_path, None)
