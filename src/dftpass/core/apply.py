"""Applying one file's queued edits: in pieces (only the top-level statements that hold an
edit are regenerated, :mod:`dftpass.core.pieces`), else the whole file (:mod:`dftpass.core.
rewrite`), and never a file that does not compile afterwards. Above both, so that neither
imports the other."""

from __future__ import annotations

import attrs
import libcst as cst

from dftpass.core.edits import EditSet
from dftpass.core.linebytes import keep_original_bytes
from dftpass.core.pieces import apply_in_pieces
from dftpass.core.rewrite import EditError, transform


@attrs.frozen
class Applied:
    relpath: str
    original: bytes
    new: bytes | None  # None: left untouched (see error)
    encoding: str = "utf-8"
    error: str | None = None


def apply_edits(relpath: str, source: bytes, edit_set: EditSet, import_anchor: int) -> Applied:
    """Apply the queued edits to ``source``; never raises for a problem in the file or edits.
    Only the top-level statements that hold an edit are regenerated (:mod:`dftpass.core.
    pieces`); a file that cannot be cut, or whose pieces fail, is transformed whole."""
    try:
        new = apply_in_pieces(source, edit_set, import_anchor)
    except Exception:  # noqa: BLE001 - the whole-file transform below says what is wrong
        new = None
    encoding = "utf-8"
    if new is None:
        try:
            module = cst.parse_module(source)
        except cst.ParserSyntaxError as exc:
            return Applied(relpath, source, None, error=f"libcst cannot parse the file: {exc.message}")
        except Exception as exc:  # noqa: BLE001 - an encoding libcst refuses, a recursion limit: never a crash
            return Applied(relpath, source, None, error=f"libcst cannot parse the file ({type(exc).__name__}: "
                                                         f"{exc}); left untouched")
        encoding = module.encoding
        try:
            new_module = transform(module, edit_set.edits, edit_set.api_imports, edit_set.std_imports,
                                   import_anchor, edit_set.import_prelude)
            new = keep_original_bytes(source, new_module.bytes)
        except (EditError, cst.ParserSyntaxError, Exception) as exc:  # noqa: BLE001 - the user's file must survive
            return Applied(relpath, source, None, encoding, error=f"edits could not be applied: {exc}")
    try:
        compile(new, relpath, "exec", dont_inherit=True)
    except (SyntaxError, ValueError) as exc:
        return Applied(relpath, source, None, encoding,
                       error=f"the transformed file does not compile ({exc}); left untouched")
    return Applied(relpath, source, new, encoding)
