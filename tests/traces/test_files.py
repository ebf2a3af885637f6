"""Finding trace files and reading the role from a file name."""

from __future__ import annotations

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
