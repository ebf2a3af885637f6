"""What dftpass wrote into each file: the record that makes ``dftpass strip`` exact.

``run`` writes it to ``.dftpass/annotations.json`` beside its report: per file, every edit it
applied, located by *scope* (the qualified name of the function it is in or on, as the
summaries spell it: ``Trainer.run``, ``main.<locals>.step``, ``<module>``) and by the exact
code it inserted, not by line: a tree edited by hand after annotation still strips, and an
annotation the user wrote by hand (same node, another place) is not mistaken for dftpass's.
"""

from __future__ import annotations

import json
from pathlib import Path

import attrs

from dftpass.core.edits import AddArgument, Decorate, Edit, EditSet, Enumerate, InsertAfter, InsertBefore, WrapBody, \
    WrapIter, WrapStmt, WrapValue, edit_target
from dftpass.core.summary import MODULE_SCOPE, FileSummary, StmtPath

FILE = "annotations.json"
VERSION = 1


def _scope(fs: FileSummary, path: StmtPath, on_function: bool) -> tuple[str, str]:
    """(scope, what the edit is on) for an edit targeting ``path``: the function that *is*
    the target (a decorator, a body region) or the innermost one that contains it."""
    best, best_len = MODULE_SCOPE, -1
    for fn in fs.functions:
        if fn.is_module:
            continue
        if on_function and fn.stmt == path:
            return fn.qualname, "function"
        if len(fn.stmt) < len(path) and path[: len(fn.stmt)] == fn.stmt and len(fn.stmt) > best_len:
            best, best_len = fn.qualname, len(fn.stmt)
    if on_function:
        if any(g.stmt == path for g in fs.main_guards):
            return best, "guard"
        return best, "loop"
    return best, "statement"


def entry(fs: FileSummary, edit: Edit) -> dict:
    """One edit as the strip engine recognises it again."""
    path = edit_target(edit)
    scope, on = _scope(fs, path, isinstance(edit, (Decorate, WrapBody)))
    out: dict = {"edit": type(edit).__name__, "rule": edit.rule, "scope": scope}
    if isinstance(edit, Decorate):
        out["code"] = edit.code
    elif isinstance(edit, WrapBody):
        out.update(on=on, item=edit.with_item, prologue=list(edit.prologue), final=list(edit.finally_))
    elif isinstance(edit, (WrapIter, WrapValue)):
        out["callee"] = edit.callee
    elif isinstance(edit, Enumerate):
        loop = next((lp for fn in fs.functions for lp in fn.loops if lp.stmt == path), None)
        out.update(index=edit.index, parens=bool(loop and loop.target_parens))
    elif isinstance(edit, WrapStmt):
        out["item"] = edit.with_item
        if edit.tail:
            out["tail"] = list(edit.tail)
        if edit.bind:
            out["bind"] = edit.bind
        if edit.through:
            out["through"] = list(map(list, edit.through))
    elif isinstance(edit, AddArgument):
        out.update(callee=edit.callee, keyword=edit.keyword, item=edit.item, new=edit.new, listed=edit.listed)
    elif isinstance(edit, (InsertBefore, InsertAfter)):
        out.update(code=edit.code, separate=getattr(edit, "separate", False))
    return out


def record(fs: FileSummary, edit_set: EditSet) -> dict:
    return {"edits": [entry(fs, e) for e in edit_set.edits],
            "imports": {"api": [list(x) for x in edit_set.api_imports], "std": [list(x) for x in edit_set.std_imports]}}


@attrs.define
class Records:
    """``.dftpass/annotations.json``: relpath -> the records of every run that edited it."""

    files: dict[str, list[dict]] = attrs.field(factory=dict)

    @classmethod
    def read(cls, state_dir: Path) -> "Records | None":
        path = state_dir / FILE
        if not path.is_file():
            return None
        data = json.loads(path.read_bytes())
        return cls({rel: list(runs) for rel, runs in data.get("files", {}).items()})

    def add(self, relpath: str, file_record: dict) -> None:
        self.files.setdefault(relpath, []).append(file_record)

    def to_bytes(self) -> bytes:
        return json.dumps({"version": VERSION, "files": self.files}, indent=1, sort_keys=True).encode()
