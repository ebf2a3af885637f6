"""Markdown -> a self-contained HTML page, for the subset dftpass's reports use.

The report is written once, as Markdown; the HTML page is the same text converted here
(headings, paragraphs, lists, pipe tables, inline code, bold, links and data-URI images), so
the two never disagree and no Markdown package is needed.
"""

from __future__ import annotations

import html
import re

STYLE = """
body { font-family: system-ui, -apple-system, Segoe UI, sans-serif; max-width: 1100px; margin: 2em auto;
       padding: 0 1em; color: #1f2328; line-height: 1.45; }
h1, h2, h3 { border-bottom: 1px solid #d0d7de; padding-bottom: .2em; }
table { border-collapse: collapse; margin: 1em 0; font-size: 0.9em; }
th, td { border: 1px solid #d0d7de; padding: 4px 8px; vertical-align: top; }
th { background: #f6f8fa; } td.num { text-align: right; font-variant-numeric: tabular-nums; }
code { background: #f6f8fa; padding: 0 .25em; border-radius: 3px; }
img { max-width: 100%; border: 1px solid #d0d7de; }
"""


_BULLET = re.compile(r"^\s*[-*]\s+")


def _inline(text: str) -> str:
    out = html.escape(text, quote=False)
    out = re.sub(r"!\[([^\]]*)\]\((data:image/[^)]+)\)", r'<img alt="\1" src="\2">', out)
    out = re.sub(r"\[([^\]]+)\]\(([^)]+)\)", r'<a href="\2">\1</a>', out)
    out = re.sub(r"`([^`]+)`", r"<code>\1</code>", out)
    out = re.sub(r"\*\*([^*]+)\*\*", r"<strong>\1</strong>", out)
    return out


_PIPE = re.compile(r"(?<!\\)\|")


def _row(line: str) -> list[str]:
    """The cells of a table line; a backslash-escaped pipe is a pipe inside a cell."""
    inner = line.strip()
    inner = inner[1:] if inner.startswith("|") else inner
    inner = inner[:-1] if inner.endswith("|") and not inner.endswith("\\|") else inner
    return [c.strip().replace("\\|", "|") for c in _PIPE.split(inner)]


def to_html(markdown: str, title: str) -> str:
    body: list[str] = []
    lines = markdown.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            i += 1
            continue
        heading = re.match(r"^(#{1,4})\s+(.*)$", line)
        if heading:
            level = len(heading.group(1))
            body.append(f"<h{level}>{_inline(heading.group(2))}</h{level}>")
            i += 1
        elif line.lstrip().startswith("|") and i + 1 < len(lines) and re.match(r"^\s*\|[\s:|-]+\|\s*$", lines[i + 1]):
            align = ["num" if c.endswith(":") else "" for c in _row(lines[i + 1])]
            head = "".join(f"<th>{_inline(c)}</th>" for c in _row(line))
            rows = []
            i += 2
            while i < len(lines) and lines[i].lstrip().startswith("|"):
                cells = _row(lines[i])
                rows.append("<tr>" + "".join(
                    f'<td class="{align[k] if k < len(align) else ""}">{_inline(c)}</td>'
                    for k, c in enumerate(cells)) + "</tr>")
                i += 1
            body.append(f"<table><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>")
        elif re.match(r"^\s*[-*]\s+", line):
            items = []
            while i < len(lines) and re.match(r"^\s*[-*]\s+", lines[i]):
                item = _inline(_BULLET.sub("", lines[i]))
                items.append(f"<li>{item}</li>")
                i += 1
            body.append(f"<ul>{''.join(items)}</ul>")
        else:
            para = [line]  # at least this line: a '|' line that starts no table would loop forever
            i += 1
            while i < len(lines) and lines[i].strip() and not re.match(r"^(#{1,4}\s|\s*\||\s*[-*]\s)", lines[i]):
                para.append(lines[i])
                i += 1
            body.append(f"<p>{_inline(' '.join(para))}</p>")
    return (f"<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>{html.escape(title)}</title>"
            f"<style>{STYLE}</style></head><body>\n" + "\n".join(body) + "\n</body></html>\n")
