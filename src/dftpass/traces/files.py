"""Which files are traces, and what a trace file's name says about its process.

dftracer names each process's file ``<prefix>-<16 hex>-<role>.pfw[.gz]``: ``app`` for a
process that called ``initialize_log``, ``fork`` for a forked child (DataLoader workers
under the fork start method), ``preload`` for ``LD_PRELOAD`` tracing.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable

from dftpass.traces.names import FILE_ROLES, FILE_SUFFIXES

_ROLE = re.compile(r"-[0-9a-fA-F]{16}-(%s)\.pfw(?:\.gz)?$" % "|".join(FILE_ROLES))


def role_of(path: str | Path) -> str | None:
    """``app`` / ``fork`` / ``preload`` from the file name, None for other names."""
    match = _ROLE.search(Path(path).name)
    return match.group(1) if match else None


def is_trace(path: Path) -> bool:
    return path.name.endswith(FILE_SUFFIXES)


def trace_files(paths: Iterable[str | Path]) -> list[Path]:
    """The trace files among ``paths``, directories searched recursively (hidden ones skipped,
    e.g. the ``.dftindex`` of dftracer-utils); sorted, each once."""
    found: set[Path] = set()
    for path in map(Path, paths):
        if path.is_dir():
            found.update(p for p in path.rglob("*")
                         if p.is_file() and is_trace(p)
                         and not any(part.startswith(".") for part in p.relative_to(path).parts))
        else:
            found.add(path)
    return sorted(found)
