"""Findings: what passes report, and the three ways they are rendered (text, JSON, SARIF)."""

from __future__ import annotations

import enum
import json
from typing import Iterable

import attrs


class Severity(str, enum.Enum):
    ERROR = "error"
    WARNING = "warning"
    INFO = "info"


@attrs.frozen
class Finding:
    """One thing a pass has to say about one place in the project.

    ``rule`` is the pass id (``ML-R6``) or ``dftpass`` for the tool itself (a file that
    does not parse, a file left untouched). ``fix`` describes the change that was or would
    be made, if any.
    """

    rule: str
    message: str
    path: str = ""
    line: int = 0
    column: int = 0
    severity: Severity = Severity.WARNING
    fix: str | None = None

    def location(self) -> str:
        if not self.path:
            return "<project>"
        if self.line:
            return f"{self.path}:{self.line}:{self.column + 1}"
        return self.path

    def to_dict(self) -> dict:
        return {
            "rule": self.rule,
            "severity": self.severity.value,
            "path": self.path,
            "line": self.line,
            "column": self.column,
            "message": self.message,
            "fix": self.fix,
        }


def sort_key(f: Finding) -> tuple:
    return (f.path, f.line, f.column, f.rule, f.message)


def render_text(findings: Iterable[Finding]) -> str:
    lines = []
    for f in sorted(findings, key=sort_key):
        lines.append(f"{f.location()}: {f.severity.value}: {f.rule} {f.message}")
        if f.fix:
            lines.append(f"    fix: {f.fix}")
    return "\n".join(lines)


def render_json(findings: Iterable[Finding]) -> str:
    return json.dumps([f.to_dict() for f in sorted(findings, key=sort_key)], indent=2)


_SARIF_LEVEL = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.INFO: "note"}


def render_sarif(findings: Iterable[Finding], rules: dict[str, str], version: str) -> str:
    """SARIF 2.1.0, the format code-scanning UIs read. ``rules`` maps rule id to title."""
    findings = sorted(findings, key=sort_key)
    used = sorted({f.rule for f in findings} | set(rules))
    results = []
    for f in findings:
        result = {
            "ruleId": f.rule,
            "level": _SARIF_LEVEL[f.severity],
            "message": {"text": f.message + (f" Fix: {f.fix}" if f.fix else "")},
        }
        if f.path:
            location = {"artifactLocation": {"uri": f.path}}
            if f.line:
                location["region"] = {"startLine": f.line, "startColumn": f.column + 1}
            result["locations"] = [{"physicalLocation": location}]
        results.append(result)
    doc = {
        "$schema": "https://json.schemastore.org/sarif-2.1.0.json",
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "dftpass",
                        "version": version,
                        "rules": [
                            {"id": r, "shortDescription": {"text": rules.get(r, r)}} for r in used
                        ],
                    }
                },
                "results": results,
            }
        ],
    }
    return json.dumps(doc, indent=2)
