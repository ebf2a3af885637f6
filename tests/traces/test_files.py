"""Finding trace files and reading the role from a file name."""

from __future__ import annotations

from pathlib import Path

from dftpass.traces.files import role_of, trace_files

from tests.traces.trace_data import REAL


def test_roles_from_file_names():
    assert role_of("run/trace-0f7df9248955a29c-app.pfw.gz") == "app"
    assert role_of("trace-0199d9a88f3ddaa5-fork.pfw") == "fork"
    assert role_of("trace-0199d9a88f3ddaa5-preload.pfw.gz") == "preload"
    assert role_of("trace-123-app.pfw.gz") is None and role_of("notes.txt") is None


def test_directories_are_searched_hidden_ones_skipped(tmp_path):
    (tmp_path / "raw").mkdir()
    (tmp_path / ".dftindex").mkdir()
    for name in ("raw/a-0000000000000001-app.pfw.gz", ".dftindex/x.pfw.gz", "raw/b.pfw", "raw/c.txt"):
        (tmp_path / name).write_bytes(b"")
    found = trace_files([tmp_path, tmp_path / "raw" / "b.pfw"])
    assert [p.relative_to(tmp_path).as_posix() for p in found] == ["raw/a-0000000000000001-app.pfw.gz", "raw/b.pfw"]
    assert len(trace_files([REAL])) == 5


def test_links_to_nowhere_and_fifos_are_problems_never_opened(tmp_path):
    import os

    from dftpass.traces import problems as P

    good = tmp_path / "a-0000000000000001-app.pfw"
    good.write_bytes(b"")
    (tmp_path / "dead.pfw").symlink_to(tmp_path / "missing.pfw")
    (tmp_path / "loop.pfw").symlink_to(tmp_path / "loop.pfw")
    os.mkfifo(tmp_path / "pipe.pfw")  # opening it would block forever
    problems: list = []
    assert trace_files([tmp_path], problems) == [good]
    said = {Path(p.file).name: p.message for p in problems}
    assert set(said) == {"dead.pfw", "loop.pfw", "pipe.pfw"} and all(p.kind == P.UNREADABLE for p in problems)
    assert "leads nowhere" in said["loop.pfw"] and "not a regular file" in said["pipe.pfw"]
