"""The clock of untraced runs: the program's own time without tracing or annotations.

A traced run knows the program's time from its root region. An untraced run of the user's
unannotated source (what ``dftpass optimize`` times, docs/decisions.md) has no region, and
its wall time carries the interpreter's start-up and ``import torch`` (3-4 s here), which no
change touches and whose noise hides a small gain. So dftpass puts ``clock_site/`` first on
the run's ``PYTHONPATH``: its ``sitecustomize`` notes when the main script's top-level imports
end and when each Python process exits (one JSON line each in ``DFTPASS_CLOCK_FILE``).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

CLOCK_FILE_ENV = "DFTPASS_CLOCK_FILE"
SITE = Path(__file__).resolve().parent / "clock_site"


def clock_env(env: dict[str, str], path: Path) -> dict[str, str]:
    """``env`` with the clock on, writing to ``path``."""
    paths = [str(SITE)] + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p]
    return {**env, "PYTHONPATH": os.pathsep.join(paths), CLOCK_FILE_ENV: str(path)}


def read_clock(path: Path) -> dict | None:
    """The program's time and its start-up, in seconds, from the process that started first
    (the one whose parent wrote no line: ``python train.py``'s only process, a launcher's
    own); with several such processes (``mpiexec`` starting ranks), the longest. None when
    no Python process wrote a line (the command was not Python, or it was killed)."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None
    records = []
    for line in lines:
        try:
            records.append(json.loads(line))
        except ValueError:
            continue  # a process killed while writing
    pids = {r.get("pid") for r in records}
    tops = [r for r in records if r.get("ppid") not in pids and isinstance(r.get("program_s"), (int, float))]
    if not tops:
        return None
    top = max(tops, key=lambda r: r["program_s"])
    return {"program_s": top["program_s"], "startup_s": top.get("startup_s"), "processes": len(records)}
