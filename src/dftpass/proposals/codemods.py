"""The mechanical form of the proposals that have one: edits of the source, or of the run's
environment, that ``dftpass optimize`` applies on a copy of the project.

The catalogue (``catalogue.yaml``) says of every strategy how it is applied (``apply:``):

* ``codemod: NAME`` (or a list): an edit of the source made here, with libcst, formatting
  kept. The site comes from the analysis: the DataLoader of the stalled phase
  (:class:`~dftpass.analysis.context.LoaderFacts`), the copies a cause points at;
* ``env: {VAR: VALUE}``: the run's environment (``OMP_NUM_THREADS``), nothing in the source;
* ``manual: WHY``: no mechanical form (a restructured pipeline, a new file format); a person
  applies it.

A site is located in the analysed (annotated) copy, by line, and edited in the un-annotated
source by its rank among the same calls of the file: the annotation adds no DataLoader and no
``.to()`` call, so the n-th one is the same call in both.

Every codemod returns what it changed in words (``loader.py:40: num_workers=args.workers ->
num_workers=2``) or raises :class:`NotApplicable` with the reason. It never leaves a file that
does not parse: the edited text is compiled before it is written, atomically.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from dftpass.core.writer import atomic_write


class NotApplicable(Exception):
    """The codemod has no site in this program, or the site already has the change."""


@dataclass
class Site:
    """Where a codemod applies: a file (relative to the project) and a line of the analysed copy."""

    path: str
    line: int


@dataclass
class Target:
    """What a codemod is given: the analysed copy (where lines were measured), the source it
    edits, the sites, and the proposal's settings."""

    analysed: Path
    source: Path
    sites: list[Site]
    settings: dict = field(default_factory=dict)


def _is_call_to(names: tuple[str, ...]) -> Callable[[cst.Call], bool]:
    def match(call: cst.Call) -> bool:
        func = call.func
        last = func.attr.value if isinstance(func, cst.Attribute) else func.value if isinstance(func, cst.Name) else None
        return last in names
    return match


def _calls(module: cst.Module, match) -> tuple[list[tuple[cst.Call, int]], cst.Module]:
    """The calls ``match`` accepts, in source order, with their first line; and the module."""
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    found: list[tuple[cst.Call, int]] = []

    class Finder(cst.CSTVisitor):
        def visit_Call(self, node: cst.Call) -> None:
            if match(node):
                found.append((node, positions[node].start.line))

    wrapper.module.visit(Finder())
    return sorted(found, key=lambda c: c[1]), wrapper.module


def _parse(path: Path) -> cst.Module:
    try:
        return cst.parse_module(path.read_bytes())
    except (OSError, cst.ParserSyntaxError) as exc:
        raise NotApplicable(f"{path.name}: cannot be read ({exc})") from exc


def _rank_at(target: Target, site: Site, match) -> int:
    """The rank of the matching call at the site's line among the file's matching calls (in the
    analysed copy)."""
    calls, _ = _calls(_parse(target.analysed / site.path), match)
    lines = [line for _, line in calls]
    for rank, line in enumerate(lines):
        if line == site.line:
            return rank
    # a call whose arguments span lines: the nearest start above the site
    above = [rank for rank, line in enumerate(lines) if line <= site.line]
    if not above:
        raise NotApplicable(f"{site.path}:{site.line}: no matching call there")
    return above[-1]


def _edit_calls(target: Target, site: Site, match, edit: Callable[[cst.Call], cst.Call]) -> str:
    """Apply ``edit`` to the call at ``site`` in the source; the call's text before and after."""
    rank = _rank_at(target, site, match)
    path = target.source / site.path
    calls, module = _calls(_parse(path), match)
    if rank >= len(calls):
        raise NotApplicable(f"{site.path}: the source has {len(calls)} such calls, the analysed copy more")
    old, line = calls[rank]
    new = edit(old)
    if new.deep_equals(old):
        raise NotApplicable(f"{site.path}:{line}: already {module.code_for_node(old)}")

    class Replace(cst.CSTTransformer):
        def leave_Call(self, original: cst.Call, updated: cst.Call) -> cst.Call:
            return new if original is old else updated

    code = module.visit(Replace()).code
    _write_checked(path, code, target.source)
    return f"{site.path}:{line}: {_short(module.code_for_node(old))} -> {_short(module.code_for_node(new))}"


def _short(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _write_checked(path: Path, code: str, root: Path) -> None:
    try:
        compile(code, str(path), "exec")
    except SyntaxError as exc:  # pragma: no cover - libcst produced it: a bug here, never a broken file
        raise NotApplicable(f"{path.name}: the edit would not compile ({exc})") from exc
    atomic_write(path, code.encode("utf-8"), root)


def _literal(value) -> cst.BaseExpression:
    return cst.parse_expression(repr(value))


# ---------------------------------------------------------------- the codemods

#: the callables that build a DataLoader (the built-in knowledge's loader factories)
LOADERS = ("DataLoader",)
#: DataLoader's positional parameters, for a setting passed by position
_POSITIONS = {"num_workers": 5, "pin_memory": 7, "multiprocessing_context": 11}


def set_keywords(call: cst.Call, settings: dict) -> cst.Call:
    """``call`` with each setting given as ``key=value``: an existing keyword (or positional
    argument) replaced, a missing one added at the end."""
    args = list(call.args)
    for key, value in settings.items():
        done = False
        for i, arg in enumerate(args):
            if arg.keyword is not None and arg.keyword.value == key:
                args[i] = arg.with_changes(value=_literal(value))
                done = True
        position = _POSITIONS.get(key)
        if not done and position is not None and len(args) > position and all(
                a.keyword is None and not a.star for a in args[: position + 1]):
            args[position] = args[position].with_changes(value=_literal(value))
            done = True
        if not done:
            if args and args[-1].comma is cst.MaybeSentinel.DEFAULT:
                args[-1] = args[-1].with_changes(comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" ")))
            args.append(cst.Arg(keyword=cst.Name(key), value=_literal(value),
                                equal=cst.AssignEqual(cst.SimpleWhitespace(""), cst.SimpleWhitespace(""))))
    return call.with_changes(args=args)


def loader_keywords(target: Target) -> list[str]:
    """Set the proposal's settings as keywords of the DataLoader at each site."""
    if not target.settings:
        raise NotApplicable("the proposal has no settings to write")
    return [_edit_calls(target, site, _is_call_to(LOADERS), lambda c: set_keywords(c, target.settings))
            for site in target.sites]


def non_blocking(target: Target) -> list[str]:
    """``x.to(device)`` / ``x.cuda()`` at each site gets ``non_blocking=True``."""
    def edit(call: cst.Call) -> cst.Call:
        if any(a.keyword is not None and a.keyword.value == "non_blocking" for a in call.args):
            return call
        return set_keywords(call, {"non_blocking": True})
    return [_edit_calls(target, site, _is_call_to(("to", "cuda")), edit) for site in target.sites]


def cudnn_benchmark(target: Target) -> list[str]:
    """``torch.backends.cudnn.benchmark = True`` after the entry file's ``import torch``."""
    out = []
    for site in target.sites[:1]:
        path = target.source / site.path
        module = _parse(path)
        if "cudnn.benchmark" in module.code:
            raise NotApplicable(f"{site.path}: already sets torch.backends.cudnn.benchmark")
        body = list(module.body)
        at = next((i for i, stmt in enumerate(body) if isinstance(stmt, cst.SimpleStatementLine)
                   and any(isinstance(s, cst.Import) and any(
                       module.code_for_node(n.name) == "torch" and n.asname is None for n in s.names)
                       for s in stmt.body)), None)
        if at is None:
            raise NotApplicable(f"{site.path}: no top-level `import torch` to follow")
        body.insert(at + 1, cst.parse_statement("torch.backends.cudnn.benchmark = True\n"))
        _write_checked(path, module.with_changes(body=body).code, target.source)
        out.append(f"{site.path}: torch.backends.cudnn.benchmark = True after `import torch`")
    return out


#: codemod name -> function (catalogue.yaml names them)
CODEMODS: dict[str, Callable[[Target], list[str]]] = {
    "loader-keywords": loader_keywords,
    "non-blocking": non_blocking,
    "cudnn-benchmark": cudnn_benchmark,
}
