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


def _cut_at_newlines(pieces: Iterator[bytes], name: str, problems: list[P.Problem]) -> Iterator[bytes]:
    tail = b""
    for piece in pieces:
        text = tail + piece if tail else piece
        cut = text.rfind(b"\n") + 1
        if cut:
            yield text[:cut]
            tail = text[cut:]
        else:
            tail = text
    if tail.strip():
        last = problems[-1] if problems else None
        if last is not None and last.file == name and last.kind in (P.TRUNCATED, P.CORRUPT):
            problems[-1] = replace(last, message=last.message + "; its partial last line was dropped")
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
