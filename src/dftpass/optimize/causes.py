"""Why a change altered the program's output: the known mechanisms, named in the revert.

"stdout line 2: 'epoch 1 loss 1.353679' vs '... 1.355824'" is a symptom; a user needs the
reason to decide what to do. The catalogue lists, for each strategy, the ways it can change
what a program computes (``output_changes``: the mechanism, the source text that makes it
likely, and what would keep the output). The revert message names the mechanisms whose
evidence the program's source shows, or all of them when it shows none. What would keep
the output is advice only: dftpass never applies it.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass
from pathlib import Path

from dftpass.analysis.proposals import catalogue

#: the most source a scan reads (a large tree: the mechanisms are then all named)
MAX_FILES, MAX_BYTES = 2000, 2_000_000


@dataclass(frozen=True)
class Cause:
    mechanism: str
    advice: str
    #: where the source shows it (``path:line``), or None when the source was not evidence
    where: str | None = None

    def text(self) -> str:
        seen = f" (seen at {self.where})" if self.where else ""
        return f"{self.mechanism}{seen}. To keep the output (advice, not applied): {self.advice}"


#: where a data set makes its samples: evidence there comes before evidence elsewhere (a
#: data generator's ``np.random`` at set-up is not an augmentation)
SAMPLE_METHODS = ("__getitem__", "__getitems__", "__iter__", "__next__")


def _sample_lines(text: str) -> set[int]:
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return set()
    return {line for node in ast.walk(tree)
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in SAMPLE_METHODS
            for line in range(node.lineno, (node.end_lineno or node.lineno) + 1)}


def _evidence(pattern: str, source: Path, prefer: tuple[str, ...] = ()) -> str | None:
    """The first ``path:line`` of ``source`` matching ``pattern``: in the files the change
    edited (``prefer``), else inside a data set's sample methods, else anywhere."""
    regex = re.compile(pattern)
    elsewhere = None
    for rel in prefer:
        try:
            lines = (source / rel).read_text(encoding="utf-8", errors="replace")[:MAX_BYTES].splitlines()
        except OSError:
            continue
        hit = next((i for i, line in enumerate(lines, 1) if regex.search(line) and not line.lstrip().startswith("#")),
                   None)
        if hit:
            return f"{rel}:{hit}"
    for n, path in enumerate(sorted(source.rglob("*.py"))):
        if n >= MAX_FILES:
            break
        try:
            text = path.read_text(encoding="utf-8", errors="replace")[:MAX_BYTES]
        except OSError:
            continue
        hits = [i for i, line in enumerate(text.splitlines(), 1)
                if regex.search(line) and not line.lstrip().startswith("#")]
        if not hits:
            continue
        rel = path.relative_to(source).as_posix()
        in_samples = _sample_lines(text)
        inside = [i for i in hits if i in in_samples]
        if inside:
            return f"{rel}:{inside[0]}"
        elsewhere = elsewhere or f"{rel}:{hits[0]}"
    return elsewhere


def explain(proposal_id: str, source: Path, prefer: tuple[str, ...] = ()) -> list[Cause]:
    """The known ways ``proposal_id``'s change alters results: those whose evidence ``source``
    (the changed copy; ``prefer``: the files the change edited) shows; all of them when none is."""
    strategy = next((s for s in catalogue()["strategies"] if s["id"] == proposal_id), None)
    known = (strategy or {}).get("output_changes") or []
    shown, unshown = [], []
    for entry in known:
        where = _evidence(entry["evidence"], source, prefer) if entry.get("evidence") else None
        cause = Cause(entry["mechanism"], entry["advice"], where)
        (shown if where else unshown).append(cause)
    return shown or unshown


def message(proposal_id: str, source: Path, prefer: tuple[str, ...] = ()) -> str:
    """The cause part of a revert message ("" when the catalogue knows none)."""
    causes = explain(proposal_id, source, prefer)
    if not causes:
        return ""
    if len(causes) == 1:
        return f"known cause: {causes[0].text()}"
    return "known causes: " + " | ".join(f"({i}) {c.text()}" for i, c in enumerate(causes, 1))
