"""The trace cache: a second look at unchanged files reads none of them; any change is seen."""

from __future__ import annotations

import os
import shutil

from dftpass.traces import analyze
from dftpass.traces.cache import TraceCache, file_key

from .trace_data import REAL


def copy_traces(tmp_path):
    folder = tmp_path / "traces"
    shutil.copytree(REAL, folder)
    return folder


def test_the_second_look_reads_nothing_and_finds_the_same(tmp_path):
    traces = copy_traces(tmp_path)
    files = sorted(traces.iterdir())
    first_cache = TraceCache(tmp_path / "cache")
    first = analyze([traces], cache=first_cache)
    assert first_cache.misses == len(files) and first_cache.hits == 0
    second_cache = TraceCache(tmp_path / "cache")
    second = analyze([traces], cache=second_cache)
    assert second_cache.hits == len(files) and second_cache.misses == 0
    assert second.overlap == first.overlap == analyze([traces]).overlap
    assert second.summary.events == first.summary.events
    assert second.summary.first_fetch == first.summary.first_fetch


def test_a_changed_file_is_read_again(tmp_path):
    traces = copy_traces(tmp_path)
    analyze([traces], cache=TraceCache(tmp_path / "cache"))
    victim = sorted(traces.glob("*-fork.pfw.gz"))[0]
    before = file_key(victim)
    victim.write_bytes(victim.read_bytes()[: victim.stat().st_size // 2])  # truncated: a different file
    assert file_key(victim) != before
    cache = TraceCache(tmp_path / "cache")
    result = analyze([traces], cache=cache)
    assert cache.misses == 1 and cache.hits == len(list(traces.iterdir())) - 1
    fresh = analyze([traces])
    assert result.summary.events == fresh.summary.events and result.overlap == fresh.overlap
    # the same bytes written again (a new mtime) is a change too: read again, never trusted blindly
    os.utime(victim, ns=(victim.stat().st_atime_ns, victim.stat().st_mtime_ns + 1_000_000))
    again = TraceCache(tmp_path / "cache")
    analyze([traces], cache=again)
    assert again.misses == 1


def test_damaged_entries_are_misses_and_an_unwritable_cache_only_costs_speed(tmp_path):
    traces = copy_traces(tmp_path)
    analyze([traces], cache=TraceCache(tmp_path / "cache"))
    for entry in (tmp_path / "cache" / "files").glob("*.summary"):
        entry.write_bytes(b"not a pickle")
    for entry in (tmp_path / "cache" / "busy").glob("*.busy"):
        entry.write_bytes(b"")
    cache = TraceCache(tmp_path / "cache")
    assert analyze([traces], cache=cache).overlap == analyze([traces]).overlap
    assert cache.hits == 0
    blocked = tmp_path / "blocked"
    blocked.write_text("a file where the cache folder would go")
    assert analyze([traces], cache=TraceCache(blocked / "cache")).overlap == analyze([traces]).overlap


def test_the_key_sees_every_byte_of_a_file_shorter_than_both_ends(tmp_path):
    """A file between one and two edges long is hashed whole: a copy that kept the size and
    the mtime (``cp -p``) but not the bytes in the middle is a new file."""
    from dftpass.traces.cache import EDGE, file_key

    path = tmp_path / "t.pfw"
    data = bytearray(b"x" * (EDGE + EDGE // 2))
    path.write_bytes(bytes(data))
    stat = path.stat()
    before = file_key(path)
    data[EDGE + 10] = ord("y")
    path.write_bytes(bytes(data))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert file_key(path) != before


def test_a_bare_folder_of_traces_is_cached_in_the_users_cache_directory(tmp_path, monkeypatch):
    """Traces copied from a cluster (no workspace): a second ``analyze`` reads none of them, from
    the user's cache directory; the entries follow the umask, not mkstemp's 0600."""
    from dftpass.plugins.analyses.traces import analyze_run
    from dftpass.runs.layout import open_run
    from dftpass.traces import cache as cache_module

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    made = []
    real = cache_module.TraceCache.__init__
    monkeypatch.setattr(cache_module.TraceCache, "__init__", lambda self, root: (made.append(self), real(self, root))[1])
    old = os.umask(0o022)
    try:
        traces = copy_traces(tmp_path)
        first = analyze_run(open_run(traces))
        second = analyze_run(open_run(traces))
    finally:
        os.umask(old)
    files = len(list(traces.iterdir()))
    assert made[0].misses == files and made[1].hits == files and made[1].misses == 0
    entries = list((tmp_path / "xdg" / "dftpass" / "traces" / "files").glob("*.summary"))
    assert len(entries) == len(list(traces.iterdir()))
    assert {e.stat().st_mode & 0o777 for e in entries} == {0o644}
    assert second.primary.analysis.summary.events == first.primary.analysis.summary.events
    assert second.primary.analysis.overlap == first.primary.analysis.overlap


class Recorder:
    """A progress bar's side of the contract: ``start(total)``, a call per file, ``close()``."""

    def __init__(self) -> None:
        self.totals, self.items, self.closed = [], [], 0

    def start(self, total: int) -> None:
        self.totals.append(total)

    def __call__(self, item: str = "") -> None:
        self.items.append(item)

    def close(self) -> None:
        self.closed += 1


def test_progress_counts_the_files_read_and_not_those_served_from_the_cache(tmp_path):
    traces = copy_traces(tmp_path)
    names = sorted(p.name for p in traces.iterdir())
    first, second = Recorder(), Recorder()
    analyze([traces], cache=TraceCache(tmp_path / "cache"), progress=first)
    assert first.totals == [len(names)] and sorted(first.items) == names and first.closed == 1
    analyze([traces], cache=TraceCache(tmp_path / "cache"), progress=second)
    assert second.totals == [0] and second.items == []  # nothing read: no bar
