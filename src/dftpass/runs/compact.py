"""Compaction: a run's raw trace files -> gzip chunks of bounded size in ``traces/compact``.

Each raw file (one per process) becomes one or more gzip chunks of at most
``chunk_mb`` MB of uncompressed lines. A chunk after the first starts with the file's header
(the metadata lines before its first event: host, time unit), so every chunk reads on its
own. What cannot be read (a truncated or empty file) is kept as far as it decompresses and
reported; an empty file produces no chunk.
"""

from __future__ import annotations

import gzip
from pathlib import Path

from dftpass.traces.files import trace_files
from dftpass.traces.problems import Problem
from dftpass.traces.source import line_chunks

_META = b'"ph":4'


def _chunk_name(raw: Path, k: int) -> str:
    """The first chunk keeps the raw name (``trace-<hash>-<role>``, gzip); later ones put the
    chunk number in the prefix (``trace.1-<hash>-<role>``), so the role still reads."""
    stem = raw.name.removesuffix(".gz").removesuffix(".pfw")
    if k:
        prefix, sep, rest = stem.partition("-")
        stem = f"{prefix}.{k}{sep}{rest}"
    return f"{stem}.pfw.gz"


def compact_dir(raw_dir: Path, out_dir: Path, chunk_mb: int = 64) -> tuple[list[Path], list[Problem]]:
    """Compact every trace file under ``raw_dir`` into ``out_dir``; returns (chunks, problems)."""
    limit = max(1, chunk_mb) << 20
    out_dir.mkdir(parents=True, exist_ok=True)
    chunks: list[Path] = []
    problems: list[Problem] = []
    for raw in trace_files([raw_dir]):
        header: list[bytes] = []
        in_header = True
        k, size, out = 0, 0, None
        for piece in line_chunks(raw, problems):
            for line in piece.splitlines(keepends=True):
                if not line.strip():
                    continue
                if in_header and _META in line:
                    header.append(line)
                elif in_header:
                    in_header = False
                if out is None or size + len(line) > limit and size:
                    if out is not None:
                        out.close()
                    path = out_dir / _chunk_name(raw, k)
                    out = gzip.open(path, "wb", compresslevel=6)
                    chunks.append(path)
                    size = 0
                    if k and header:
                        out.writelines(header)
                        size = sum(map(len, header))
                    k += 1
                out.write(line if line.endswith(b"\n") else line + b"\n")
                size += len(line)
        if out is not None:
            out.close()
    return chunks, problems
