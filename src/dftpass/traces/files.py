"""Which files are traces, and what a trace file's name says about its process.

dftracer names each process's file ``<prefix>-<16 hex>-<role>.pfw[.gz]``: ``app`` for a
process that called ``initialize_log``, ``fork`` for a forked child (DataLoader workers
under the fork start method), ``preload`` for ``LD_PRELOAD`` tracing.
"""

from __future__ import annotations

import os
import re
import stat
from pathlib import Path
from typing import Iterable

from dftpass.traces import problems as P
from dftpass.traces.names import FILE_ROLES, FILE_SUFFIXES

_ROLE = re.compile(r"-[0-9a-fA-F]{16}-(%s)\.pfw(?:\.gz)?$" % "|".join(FILE_ROLES))


def role_of(path: str | Path) -> str | None:
    """``app`` / ``fork`` / ``preload`` from the file name, None for other names."""
    match = _ROLE.search(Path(path).name)
    return match.group(1) if match else None


def is_trace(path: Path) -> bool:
    return path.name.endswith(FILE_SUFFIXES)


def trace_files(paths: Iterable[str | Path], problems: list[P.Problem] | None = None) -> list[Path]:
    """The trace files among ``paths``, directories searched recursively (hidden ones skipped,
    e.g. the ``.dftindex`` of dftracer-utils; links to folders not followed); sorted, each once.

    Only regular files are returned (a FIFO named ``x.pfw`` would block the reader forever).
    What looks like a trace but cannot be one, a link that leads nowhere (a loop, a missing
    target), a FIFO or socket, and a folder that cannot be listed, is added to ``problems``."""
    found: set[Path] = set()
    problems = problems if problems is not None else []
    for path in map(Path, paths):
        if path.is_dir():
            found.update(_walk(path, problems))
        elif _regular(path, problems):
            found.add(path)
    return sorted(found)


def _walk(root: Path, problems: list[P.Problem]) -> Iterable[Path]:
    def unreadable(error: OSError) -> None:
        problems.append(P.Problem(str(error.filename or root), P.UNREADABLE,
                                  f"cannot list the folder ({error.strerror or error}); its traces are not read"))

    for folder, dirs, names in os.walk(root, onerror=unreadable):
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted(names):
            path = Path(folder, name)
            if not name.startswith(".") and is_trace(path) and _regular(path, problems):
                yield path


def _regular(path: Path, problems: list[P.Problem]) -> bool:
    """Whether ``path`` is (or links to) a regular file; if not, why, in ``problems``."""
    try:
        mode = os.stat(path).st_mode
    except OSError as error:
        if os.path.islink(path):
            problems.append(P.Problem(str(path), P.UNREADABLE, "a link that leads nowhere (a loop, or its target "
                                      "is missing); not read"))
        else:
            problems.append(P.Problem(str(path), P.UNREADABLE, f"cannot read: {error.strerror or error}"))
        return False
    if stat.S_ISREG(mode):
        return True
    if not stat.S_ISDIR(mode):
        problems.append(P.Problem(str(path), P.UNREADABLE, "not a regular file (a FIFO, socket or device); not read"))
    return False
