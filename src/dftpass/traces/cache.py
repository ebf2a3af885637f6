"""The second look is instant: each trace file's summary, kept beside the workspace.

Reading traces is the expensive part of an analysis (JSON, decompression); the result of
reading one file, its :class:`~dftpass.traces.summary.Summary` and its spill file of
timeline events (:mod:`~dftpass.traces.spill`), is stored under
``<workspace>/.dftpass-cache/traces/``, and so are the busy times of pass 2 for a set of
files and a bucket width. A second ``analyze`` (``compare`` and ``report`` reuse the saved
``analysis.json`` already) of unchanged traces reads none of them again.

**The key of a file** is its identity and its content: the resolved path, size, mtime (ns)
and inode, and a BLAKE2b digest of its first and last 64 KiB, with the cache format's
version. Any write to a file changes its mtime, size or ends, so the entry no longer
matches and the file is read again; a new dftpass with a new format never reads old entries.
(Hashing the whole of every file would cost as much as a large part of reading it: a 5 GB
trace set would take seconds to look at, not the 0.2 s the cache is for.)

Entries are written atomically (temporary file, then rename), so a crash leaves no half
entry. The folder may be deleted at any time; ``--no-cache`` leaves it alone. Disk use is
the spill files' 27 bytes per event plus a small summary per file.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from pathlib import Path

from dftpass.core.writer import umask_mode

#: bump when Summary, the spill layout or the busy series change
FORMAT = 8
#: the bytes hashed at each end of a file
EDGE = 64 * 1024
CACHE_DIR = ".dftpass-cache"


def file_key(path: str | Path) -> str | None:
    """The cache key of one trace file (None when it cannot be read)."""
    try:
        real = os.path.realpath(path)
        st = os.stat(real)
        digest = hashlib.blake2b(digest_size=16)
        digest.update(f"{FORMAT}\0{real}\0{st.st_size}\0{st.st_mtime_ns}\0{st.st_ino}\0".encode())
        with open(real, "rb") as fh:
            digest.update(fh.read(EDGE))
            if st.st_size > EDGE:  # the last EDGE bytes, or all the rest of a shorter file
                fh.seek(max(EDGE, st.st_size - EDGE))
                digest.update(fh.read(EDGE))
        return digest.hexdigest()
    except OSError:
        return None


def set_key(parts: list[str], *extra: object) -> str:
    digest = hashlib.blake2b(digest_size=16)
    for part in [str(FORMAT), *sorted(parts), *map(repr, extra)]:
        digest.update(part.encode())
        digest.update(b"\0")
    return digest.hexdigest()


def user_cache(name: str = "traces") -> Path:
    """The cache of trace folders that are not in a workspace (traces copied from a cluster):
    the user's cache directory (``$XDG_CACHE_HOME/dftpass`` or ``~/.cache/dftpass`` on Linux,
    ``~/Library/Caches/dftpass`` on macOS). Entries are keyed on each file's path, size, mtime,
    inode and content hash, so one cache serves every folder."""
    import platformdirs

    return Path(platformdirs.user_cache_dir("dftpass", appauthor=False)) / name


class TraceCache:
    """One cache folder: ``files/<key>.summary`` (+ ``.spill``) and ``busy/<key>.busy``."""

    def __init__(self, root: str | Path) -> None:
        self.root = Path(root)
        self.hits = self.misses = 0

    def _load(self, path: Path):
        try:
            with open(path, "rb") as fh:
                return pickle.load(fh)
        except FileNotFoundError:
            return None
        except (OSError, pickle.UnpicklingError, EOFError, AttributeError, ImportError, ValueError):
            return None  # a damaged or foreign entry is a miss, never an error

    def _store(self, path: Path, obj) -> None:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
            with os.fdopen(fd, "wb") as fh:
                pickle.dump(obj, fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.chmod(tmp, umask_mode())  # a workspace a team shares: not mkstemp's 0600
            os.replace(tmp, path)
        except OSError:
            pass  # a cache that cannot be written only costs the next look its speed

    # -- per file -------------------------------------------------------------------------
    def spill_path(self, key: str) -> Path:
        return self.root / "files" / f"{key}.spill"

    def new_spill(self, key: str) -> str | None:
        """Where pass 1 writes a file's spill before :meth:`store_file` keeps it (None: the
        cache folder cannot be written; the caller spills elsewhere)."""
        try:
            (self.root / "files").mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=self.root / "files", prefix=".tmp-", suffix=".spill")
            os.chmod(tmp, umask_mode())
        except OSError:
            return None
        os.close(fd)
        return tmp

    def load_file(self, key: str, need_spill: bool):
        """(summary, spill path or None) of a cached file, or None on a miss."""
        entry = self._load(self.root / "files" / f"{key}.summary")
        if entry is None:
            self.misses += 1
            return None
        summary, has_spill = entry
        spill = self.spill_path(key)
        if need_spill and has_spill and not spill.is_file():
            self.misses += 1
            return None
        self.hits += 1
        return summary, (str(spill) if has_spill else None)

    def store_file(self, key: str, summary, spill: str | None) -> str | None:
        """Keep a file's summary and its spill (moved into the cache); returns the spill's path."""
        kept = None
        if spill is not None:
            try:
                os.replace(spill, self.spill_path(key))
                kept = str(self.spill_path(key))
            except OSError:
                kept = spill
        self._store(self.root / "files" / f"{key}.summary", (summary, kept is not None))
        return kept

    # -- pass 2 ---------------------------------------------------------------------------
    def load_busy(self, key: str):
        return self._load(self.root / "busy" / f"{key}.busy")

    def store_busy(self, key: str, busy) -> None:
        self._store(self.root / "busy" / f"{key}.busy", busy)
