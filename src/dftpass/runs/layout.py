"""The canonical layout of a workspace: runs of one project side by side, comparable.

```
<workspace>/
  <label>/                      baseline, annotated, opt1, ...
    run.json                    what ran: command, environment, revision, times, exit codes, files
    traces/raw/rep-<k>/         DFTRACER_LOG_FILE points here (one folder per repeat)
    traces/compact/rep-<k>/     gzip chunks of bounded size, made after the run
    outputs/rep-<k>/            the program's standard output (as printed, and masked)
  patches/                      unified diffs (the annotation, each iteration)
  report.md, report.html, lessons.md
```

Repeats of one label (``dftpass trace --repeat N``) are separate runs under one label, so a
comparison can tell noise from change.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import attrs

from dftpass.core.errors import UserError

RUN_FILE = "run.json"
TRACE_PREFIX = "trace"  # DFTRACER_LOG_FILE = <raw>/rep-<k>/trace -> trace-<hash>-<app|fork>.pfw.gz
_LABEL = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


class LayoutError(UserError):
    """A path that is not a run or a workspace."""


def check_label(label: str) -> str:
    if not _LABEL.match(label) or label in ("patches",):
        raise LayoutError(f"label {label!r}: use letters, digits, '.', '_' and '-' (e.g. baseline, opt1)")
    return label


@attrs.frozen
class RunDir:
    """One label's folder in a workspace."""

    path: Path

    @property
    def label(self) -> str:
        return self.path.name

    @property
    def workspace(self) -> Path:
        return self.path.parent

    @property
    def run_file(self) -> Path:
        return self.path / RUN_FILE

    def raw(self, repeat: int | None = None) -> Path:
        base = self.path / "traces" / "raw"
        return base if repeat is None else base / f"rep-{repeat}"

    def compact(self, repeat: int | None = None) -> Path:
        base = self.path / "traces" / "compact"
        return base if repeat is None else base / f"rep-{repeat}"

    def outputs(self, repeat: int) -> Path:
        """What the repeat printed and wrote (:mod:`dftpass.runs.outputs`)."""
        return self.path / "outputs" / f"rep-{repeat}"

    def log_prefix(self, repeat: int) -> Path:
        return self.raw(repeat) / TRACE_PREFIX

    def exists(self) -> bool:
        return self.run_file.is_file()

    def record(self) -> dict:
        if not self.exists():
            raise LayoutError(f"{self.path} is not a run of dftpass trace (no {RUN_FILE})")
        return json.loads(self.run_file.read_text(encoding="utf-8"))

    def trace_dirs(self, repeat: int | None = None) -> list[Path]:
        """Where the traces of a repeat (or of every repeat) are: compact if made, else raw."""
        reps = [repeat] if repeat is not None else [r["repeat"] for r in self.record()["repeats"]]
        out = []
        for k in reps:
            compact = self.compact(k)
            out.append(compact if compact.is_dir() and any(compact.iterdir()) else self.raw(k))
        return out


def run_dir(workspace: Path, label: str) -> RunDir:
    return RunDir(Path(workspace) / check_label(label))


def runs_in(workspace: Path) -> list[RunDir]:
    """Every run of a workspace, in the order they were first made."""
    runs = [RunDir(p) for p in Path(workspace).iterdir() if (p / RUN_FILE).is_file()]
    return sorted(runs, key=lambda r: r.record().get("created", ""))


@attrs.frozen
class TraceDir:
    """A folder (or file) of traces that no ``dftpass trace`` made: one repeat, wall time unknown."""

    path: Path

    @property
    def label(self) -> str:
        return self.path.name.split(".")[0] if self.path.is_file() else self.path.name

    @property
    def workspace(self) -> Path:
        return self.path.parent

    def exists(self) -> bool:
        return self.path.exists()

    def record(self) -> dict:
        return {"label": self.label, "repeats": [{"repeat": 1, "wall_s": None, "command": [], "cwd": None}]}

    def trace_dirs(self, repeat: int | None = None) -> list[Path]:
        return [self.path]


def open_run(path: Path) -> RunDir | TraceDir:
    """A run folder of ``dftpass trace``, or else any folder or file of traces."""
    path = Path(path).resolve()
    if (path / RUN_FILE).is_file():
        return RunDir(path)
    if not path.exists():
        raise LayoutError(f"{path}: no such run or trace folder")
    return TraceDir(path)
