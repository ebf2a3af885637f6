"""Bytes of a trace file, decompressed and cut at line ends, in bounded pieces.

Traces are ``.pfw`` (plain) or ``.pfw.gz``; a ``.gz`` may hold several gzip members
(appended writes, ``cat a.gz b.gz``), so a new decompressor starts after each member's end.
Decompression uses ``isal`` (igzip, ~3.5x faster than zlib here) when installed and the
stdlib ``zlib`` otherwise. Output per call is capped, so memory does not depend on the file.

What cannot be read is recorded as a :class:`~dftpass.traces.problems.Problem` and reading
keeps everything before it: a stream that ends inside a member (a killed process) is
TRUNCATED, damaged data is CORRUPT, a 0-byte file (no ``finalize()``) is EMPTY.
"""

from __future__ import annotations

import zlib
from dataclasses import replace
from pathlib import Path
from typing import Any, BinaryIO, Callable, Iterator

from dftpass.traces import problems as P

try:
    from isal import isal_zlib as _fast_zlib
except ImportError:  # isal is a dependency; this keeps a bare install working (tested in a subprocess)
    _fast_zlib = None

_ERRORS: tuple[type[Exception], ...] = (zlib.error,) + ((_fast_zlib.error,) if _fast_zlib else ())


def _zlib_gunzip() -> Any:
    return zlib.decompressobj(31)  # 31: gzip header and trailer


def _decompressobj() -> Any:
    return _fast_zlib.decompressobj(31) if _fast_zlib else _zlib_gunzip()

GZIP_MAGIC = b"\x1f\x8b"
READ_SIZE = 1 << 20
#: decompressed bytes per piece: ~25k events, a few MB of decoded objects at a time
OUT_SIZE = 4 << 20
#: compressed bytes per step when salvaging what precedes damaged data
SALVAGE_STEP = 256
#: the longest line kept. dftracer's lines are under a few KB; a longer one is damage or a
#: foreign file, and holding it would cost memory (and, joined piece by piece, time)
#: proportional to its length
MAX_LINE_BYTES = OUT_SIZE


def line_chunks(path: str | Path, problems: list[P.Problem]) -> Iterator[bytes]:
    """Pieces of the file's text, each ending at a newline (the last one may not)."""
    name = str(path)
    try:
        fh = open(path, "rb")
    except OSError as err:
        problems.append(P.Problem(name, P.UNREADABLE, f"cannot open: {err.strerror or err}"))
        return
    with fh:
        head = fh.read(2)
        if not head:
            problems.append(P.Problem(name, P.EMPTY, "0-byte file: the process never called finalize() "
                                      "(or was killed before it); no events"))
            return
        fh.seek(0)
        pieces = _gunzip(fh, name, problems) if head == GZIP_MAGIC else iter(lambda: fh.read(READ_SIZE), b"")
        yield from _cut_at_newlines(pieces, name, problems)


def _cut_at_newlines(pieces: Iterator[bytes], name: str, problems: list[P.Problem],
                     max_line: int | None = None) -> Iterator[bytes]:
    """Pieces that end at newlines. A line is held as a list of its parts (joined once, when
    it ends: linear time); one longer than ``max_line`` is dropped as it grows and the rest
    of it skipped up to its newline, so memory stays bounded whatever the file holds."""
    max_line = MAX_LINE_BYTES if max_line is None else max_line
    held: list[bytes] = []  # the parts of a line that has not ended yet
    held_size = 0
    skipping = False        # inside a line that is too long
    long_lines = 0
    for piece in pieces:
        start = 0
        if held or skipping:
            nl = piece.find(b"\n")
            if nl < 0:
                if not skipping:
                    held.append(piece)
                    held_size += len(piece)
                    if held_size > max_line:
                        held, held_size, skipping, long_lines = [], 0, True, long_lines + 1
                continue
            if skipping:
                skipping = False
            elif held_size + nl + 1 > max_line:
                long_lines += 1
            else:
                yield b"".join(held) + piece[:nl + 1]
            held, held_size, start = [], 0, nl + 1
        cut = piece.rfind(b"\n") + 1
        if cut > start:
            yield piece[start:cut] if start else piece[:cut]
            start = cut
        if start < len(piece):
            held, held_size = [piece[start:]], len(piece) - start
            if held_size > max_line:  # a piece larger than the bound, with no newline after start
                held, held_size, skipping, long_lines = [], 0, True, long_lines + 1
    if long_lines:
        problems.append(P.Problem(name, P.LONG_LINE, f"line(s) longer than {max_line} bytes skipped: no dftracer "
                                  "event is that long (a damaged or foreign file?)", long_lines))
    tail = b"".join(held)
    if tail.strip():
        last = next((p for p in reversed(problems) if p.file == name and p.kind != P.LONG_LINE), None)
        if last is not None and last.kind in (P.TRUNCATED, P.CORRUPT):
            i = problems.index(last)
            problems[i] = replace(last, message=last.message + "; its partial last line was dropped")
        else:
            yield tail


def _gunzip(fh: BinaryIO, name: str, problems: list[P.Problem], new: Callable[[], Any] = _decompressobj,
            read_size: int = READ_SIZE, skip: int = 0) -> Iterator[bytes]:
    """Decompressed pieces of every member. On damaged data, decompress again from the start
    with zlib in small steps (isal cannot copy its state) to keep what precedes the damage."""
    decomp = new()
    fed = False       # has the current member's decompressor seen input?
    produced = 0
    data = b""
    while True:
        if not data:
            data = fh.read(read_size)
            if not data:
                break
        try:
            out = decomp.decompress(data, OUT_SIZE)
        except _ERRORS as err:
            if read_size == READ_SIZE:
                fh.seek(0)
                yield from _gunzip(fh, name, problems, _zlib_gunzip, SALVAGE_STEP, produced)
            else:
                problems.append(P.Problem(name, P.CORRUPT, f"gzip data damaged after {produced} decompressed "
                                          f"bytes ({err}); kept what came before"))
            return
        fed = True
        if produced + len(out) > skip:
            yield out[max(0, skip - produced):]
        produced += len(out)
        if decomp.eof:
            data = decomp.unused_data
            if data and not data.strip(b"\0"):  # zero padding after the last member
                data = b""
            decomp, fed = new(), False
        else:
            data = decomp.unconsumed_tail
    if fed and not decomp.eof:
        problems.append(P.Problem(name, P.TRUNCATED, f"gzip stream ends early after {produced} decompressed bytes: "
                                  "the process was probably killed while writing; kept what decompressed"))
