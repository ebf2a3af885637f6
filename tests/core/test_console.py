"""Text for people (``core.console``): tables as plain aligned lines, colour on a terminal only,
the progress bar shown in a terminal for multi-item work and silent otherwise."""

from __future__ import annotations

import io

from dftpass.core.console import Col, Progress, emit, table


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_table_aligns_plain_lines():
    lines = table(["event", Col("count", right=True), Col("name", max_width=8)],
                  [["compute/forward", 8, "short"], ["data/[item]", 1234, "a-very-long-name"]])
    assert lines == ["  event            count  name",
                     "  compute/forward      8  short",
                     "  data/[item]       1234  a-very-…"]  # "[item]" stays text, not markup
    assert all("\x1b" not in line for line in lines)


def test_emit_is_plain_when_piped_and_coloured_on_a_terminal(monkeypatch):
    monkeypatch.delenv("NO_COLOR", raising=False)
    monkeypatch.delenv("TERM", raising=False)
    text = "run base: bottleneck loading (stalled); ML-R9 warning; wall_s 1.0 s -12.0% (better)"
    piped = io.StringIO()
    emit(text, piped)
    assert piped.getvalue() == text + "\n"
    tty = Terminal()
    emit(text, tty)
    shown = tty.getvalue()
    assert "\x1b[" in shown  # coloured
    assert "\x1b[1;31mstalled" in shown and "\x1b[36mML-R9" in shown and "\x1b[32m(better)" in shown


def test_emit_honours_no_color(monkeypatch):
    monkeypatch.setenv("NO_COLOR", "1")
    tty = Terminal()
    emit("stalled", tty)
    assert "\x1b[1;31m" not in tty.getvalue() and "stalled" in tty.getvalue()


def test_progress_draws_and_clears_when_enabled():
    out = io.StringIO()
    p = Progress("reading", stream=out, enabled=True)
    p.start(3)
    for name in ("a.py", "b.py", "c.py"):
        p(name)
    p.close()
    text = out.getvalue()
    assert "reading" in text and "3/3" in text and "c.py" in text
    assert text.endswith("\x1b[2K")  # the bar is erased when done


def test_progress_is_silent_outside_a_terminal_and_for_one_item():
    out = io.StringIO()  # not a tty
    p = Progress("reading", stream=out)
    p.start(10)
    p("a.py")
    p.close()
    one = io.StringIO()
    q = Progress("reading", stream=one, enabled=True)
    q.start(1)
    q("a.py")
    q.close()
    assert out.getvalue() == "" and one.getvalue() == ""
