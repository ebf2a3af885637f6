"""The clock of untraced runs: the program's time from the end of the main script's imports
to its exit, from the process that started first, with the real sitecustomize."""

from __future__ import annotations

import os
import subprocess
import sys

from dftpass.runs.clock import clock_env, read_clock

PROGRAM = (
    "import subprocess, sys, time\n"
    "time.sleep(0.2)  # the program's own work, after its imports\n"
    "subprocess.run([sys.executable, '-c', 'import time; time.sleep(0.6)'], check=True)\n"
)


def test_the_program_time_is_the_first_process_s_and_leaves_out_its_imports(tmp_path):
    (tmp_path / "prog.py").write_text(PROGRAM)
    clock = tmp_path / "clock.jsonl"
    subprocess.run([sys.executable, "prog.py"], cwd=tmp_path, check=True,
                   env=clock_env({**os.environ, "PYTHONPATH": str(tmp_path)}, clock))
    lines = clock.read_text().splitlines()
    assert len(lines) == 2  # the program and the child it started (which ran 0.6 s on its own)
    got = read_clock(clock)
    assert got["processes"] == 2 and 0.75 <= got["program_s"] < 3.0  # 0.2 s + the child's 0.6 s, not the child's
    assert got["startup_s"] < 0.5


def test_a_torn_line_is_skipped_and_no_line_is_no_clock(tmp_path):
    clock = tmp_path / "clock.jsonl"
    clock.write_text('{"pid": 10, "ppid": 1, "startup_s": 0.5, "program_s": 2.0}\n'
                     '{"pid": 11, "ppid": 10, "startup_s": 0.1, "program_s": 5.0}\n{"pid": 12, "pp')
    assert read_clock(clock) == {"program_s": 2.0, "startup_s": 0.5, "processes": 2}
    assert read_clock(tmp_path / "missing.jsonl") is None
