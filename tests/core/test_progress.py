"""The progress line: shown in a terminal for multi-file work, silent otherwise."""

from __future__ import annotations

import io

from dftpass.core.progress import Progress


def test_progress_draws_and_clears_when_enabled():
    out = io.StringIO()
    p = Progress("reading", stream=out, enabled=True)
    p.start(3)
    for name in ("a.py", "b.py", "c.py"):
        p(name)
    p.close()
    text = out.getvalue()
    assert "reading [" in text and "3/3" in text and text.endswith("\r")


def test_progress_is_silent_outside_a_terminal_and_for_one_file():
    out = io.StringIO()  # not a tty
    p = Progress("reading", stream=out)
    p.start(10)
    p("a.py")
    p.close()
    one = io.StringIO()
    q = Progress("reading", stream=one, enabled=True)
    q.start(1)
    q("a.py")
    assert out.getvalue() == "" and one.getvalue() == ""
