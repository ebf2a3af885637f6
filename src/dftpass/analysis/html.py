"""The report's HTML page: its Markdown rendered by markdown-it-py into a jinja2 template.

The report is written once, as Markdown (``report.md``); the page is the same text, so the
two never disagree. markdown-it-py renders CommonMark plus pipe tables, with raw HTML off:
text from traces and source (event names, messages) is escaped, never interpreted. The
template (``templates/report.html.j2``, autoescaped) holds the page's head, style and the
list of runs; the pictures are data-URI images in the Markdown, so the page is one file.
docs/decisions.md says why these two packages.
"""

from __future__ import annotations

import functools
import html
import re

import jinja2
from markdown_it import MarkdownIt
from markupsafe import Markup

from dftpass import __version__

_RUN_HEADING = re.compile(r'<h2>Run <code>([^<]+)</code></h2>')


@functools.lru_cache(maxsize=1)
def _markdown() -> MarkdownIt:
    return MarkdownIt("commonmark", {"html": False, "linkify": False, "typographer": False}).enable("table")


@functools.lru_cache(maxsize=1)
def _template() -> jinja2.Template:
    env = jinja2.Environment(loader=jinja2.PackageLoader("dftpass.analysis", "templates"),
                             autoescape=jinja2.select_autoescape(["html", "j2"]), undefined=jinja2.StrictUndefined)
    return env.get_template("report.html.j2")


def markdown_to_html(text: str) -> str:
    """The HTML of a Markdown text (no page around it)."""
    return _markdown().render(text)


def to_html(markdown: str, title: str) -> str:
    """A self-contained page of the Markdown; every ``## Run `label``` heading gets an anchor
    and an entry in the page's list of runs."""
    body = markdown_to_html(markdown)
    toc = []

    def anchor(match: re.Match) -> str:
        label = match.group(1)
        slug = "run-" + re.sub(r"[^A-Za-z0-9_-]+", "-", label)
        toc.append((html.unescape(label), slug))  # the template escapes it again
        return f'<h2 id="{slug}">Run <code>{label}</code></h2>'

    body = _RUN_HEADING.sub(anchor, body)
    return _template().render(title=title, body=Markup(body), toc=toc, version=__version__)
