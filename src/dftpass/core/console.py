"""Text for people, through rich: aligned tables, a progress bar on long work, and colour only
where a person is looking (a terminal); plain text when the output is piped or saved.

Every command prints through here, so the rules hold everywhere:

* :func:`table` renders a table to plain lines (no colour, no box: the same text in a terminal,
  a pipe, a file and a test's captured output);
* :func:`emit` prints a text; on a terminal it colours what a reader scans for (verdicts,
  severities, rule ids, better/worse), with ``NO_COLOR`` honoured by rich itself;
* :class:`Progress` draws a bar on stderr for multi-item work, only on a terminal, and leaves
  no trace when done.

docs/decisions.md says why rich.
"""

from __future__ import annotations

import io
import sys
from typing import Iterable, Sequence, TextIO

from rich.console import Console
from rich.highlighter import RegexHighlighter
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as _RichProgress
from rich.table import Table
from rich.text import Text
from rich.theme import Theme

#: wide enough that no table of ours wraps when piped (a terminal uses its own width)
_PLAIN_WIDTH = 200


class Col:
    """A column of :func:`table`: its header, alignment, and the widest it may grow (longer
    cells end in an ellipsis)."""

    def __init__(self, header: str, right: bool = False, max_width: int | None = None) -> None:
        self.header, self.right, self.max_width = header, right, max_width


def table(columns: Sequence[Col | str], rows: Iterable[Sequence[object]], indent: int = 2) -> list[str]:
    """The rows under their headers, columns aligned, as plain lines (trailing spaces cut).
    A plain ``str`` column is a left-aligned one."""
    t = Table(box=None, show_edge=False, pad_edge=False, padding=(0, 1), show_header=True,
              header_style="", highlight=False)
    for c in columns:
        c = Col(c) if isinstance(c, str) else c
        t.add_column(c.header, justify="right" if c.right else "left", max_width=c.max_width, no_wrap=True,
                     overflow="ellipsis")
    for row in rows:
        t.add_row(*(Text(str(cell)) for cell in row))  # Text: a "[x]" in a cell is text, not markup
    out = io.StringIO()
    Console(file=out, width=_PLAIN_WIDTH, color_system=None, force_terminal=False, highlight=False,
            emoji=False, markup=False).print(t)
    pad = " " * indent
    return [pad + line.rstrip() for line in out.getvalue().splitlines() if line.strip()]


class _Highlighter(RegexHighlighter):
    """What a reader scans for in dftpass's text, by style name (the theme below)."""

    base_style = "dftpass."
    highlights = [
        r"\b(?P<rule>(ML|EX|DFT)-R\d+)\b",
        r"(?P<bad>\b(stalled|serial|worse|regressed|differs|error|failed|reverted)\b|\(worse\)|\(-~?\))",
        r"(?P<warn>\b(warning|below target|cannot judge|noise)\b)",
        r"(?P<good>\b(hidden|better|improved|kept|same work|same output)\b|\(better\)|\(\+~?\))",
        r"^(?P<head>(run|traces) \S+:)",
        r"(?P<head>^(proposals|bottleneck|cause)\b)",
    ]


_HIGHLIGHT = _Highlighter()
_THEME = Theme({"dftpass.rule": "cyan", "dftpass.bad": "bold red", "dftpass.warn": "yellow",
                "dftpass.good": "green", "dftpass.head": "bold"})


def is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # a closed or replaced stream
        return False


def emit(text: str, stream: TextIO | None = None) -> None:
    """Print ``text`` (and a newline) to ``stream`` (stdout); coloured on a terminal only."""
    stream = stream if stream is not None else sys.stdout
    if not is_terminal(stream):
        print(text, file=stream)
        return
    console = Console(file=stream, theme=_THEME, markup=False, emoji=False, soft_wrap=True)
    console.print(_HIGHLIGHT(Text(text)))


class Progress:
    """A progress bar on stderr for work over many items: ``start(total)``, one call per item
    done (with the item's name), ``close()``. Shown only on a terminal and for more than one
    item; gone from the screen when closed."""

    def __init__(self, label: str, stream: TextIO | None = None, enabled: bool | None = None) -> None:
        self.label, self.total, self.done = label, 0, 0
        self.stream = stream or sys.stderr
        self._want = is_terminal(self.stream) if enabled is None else enabled
        self.enabled = False
        self._bar: _RichProgress | None = None
        self._task = None

    def start(self, total: int) -> None:
        self.total, self.done = total, 0
        self.enabled = self._want and total > 1
        if self.enabled:
            console = Console(file=self.stream, force_terminal=True if self._want else None, markup=False)
            self._bar = _RichProgress(TextColumn(self.label), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                      TextColumn("{task.fields[item]}"), console=console, transient=True)
            self._task = self._bar.add_task(self.label, total=total, item="")
            self._bar.start()

    def __call__(self, item: str = "") -> None:
        self.done += 1
        if self._bar is not None:
            self._bar.update(self._task, advance=1, item=item[-40:])

    def close(self) -> None:
        if self._bar is not None:
            self._bar.stop()
            self._bar = None
