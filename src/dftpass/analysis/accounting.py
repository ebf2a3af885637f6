"""Where the wall time of a run went, in parts that add up to it.

A traced command's wall time (``run.json``) splits into:

* **inside the root**: the program's root region (``ai_root``, ML-R1), first start to last
  end over the processes that have one;
* **traced, outside the root**: the rest of the traced span, first to last event of any
  process (dftracer's initialization and finalization records, the regions a program
  opens before or after its root, worker processes that outlive it);
* **untraced, before**: from the command's start to the first event (interpreter start-up,
  imports, whatever runs before dftracer is initialized);
* **untraced, after**: from the last event to the command's end (finalize, interpreter
  shutdown, worker processes being joined).

The untraced split needs the run's start and end on the trace's clock (one host; ``dftpass
trace`` records them); otherwise only their total is known. The parts are figures, each
with its share of the wall time, so a root region that covers 105 µs of a 12 s run, or 8.6 s
of a 13.1 s run outside the trace, is a number in the summary and a finding (ML-R15).
"""

from __future__ import annotations

import datetime as dt

from dftpass.traces.summary import PHASE_CODES

#: a root region covering less than this share of the traced span is misplaced
ROOT_COVERAGE = 0.5


def _epoch_ns(stamp: str | None) -> int | None:
    try:
        return round(dt.datetime.fromisoformat(stamp).timestamp() * 1e9) if stamp else None
    except ValueError:
        return None


def root_interval(summary) -> tuple[int, int] | None:
    roots = [(start, end) for _, _, code, start, end in summary.intervals if code == PHASE_CODES["root"]]
    if not roots:
        return None
    return min(s for s, _ in roots), max(e for _, e in roots)


def account(record: dict, summary) -> dict | None:
    """The parts of the wall time (seconds and shares), or None without events."""
    if summary.first_ns is None:
        return None
    wall = record.get("wall_s")
    span = summary.span_s
    root = root_interval(summary)
    inside = (root[1] - root[0]) / 1e9 if root else 0.0
    out = {"wall_s": wall, "span_s": span, "root": root is not None, "inside_root_s": inside,
           "traced_outside_root_s": max(0.0, span - inside), "untraced_s": None,
           "untraced_before_s": None, "untraced_after_s": None, "root_share_of_span": inside / span if span else None}
    if wall:
        out["untraced_s"] = max(0.0, wall - span)
        start, end = _epoch_ns(record.get("start")), _epoch_ns(record.get("end"))
        if start is not None and end is not None and len(summary.hosts) <= 1:
            before, after = (summary.first_ns - start) / 1e9, (end - summary.last_ns) / 1e9
            if before >= -0.01 and after >= -0.01:  # one clock (ms-rounded stamps): the split means something
                out["untraced_before_s"], out["untraced_after_s"] = max(0.0, before), max(0.0, after)
        out["shares"] = {k: round(out[k] / wall, 4) for k in ("inside_root_s", "traced_outside_root_s", "untraced_s")}
    return out


def root_problem(acc: dict | None) -> str | None:
    """What is wrong with the root region, in words that name ML-R1, or None."""
    if acc is None:
        return None
    if not acc["root"]:
        return ("no root region (ai_root) in the trace: the program's time cannot be told from start-up and "
                "shutdown; ML-R1 places it around the entry's body (dftpass run), after initialize_log")
    share = acc["root_share_of_span"]
    if share is not None and share < ROOT_COVERAGE:
        return (f"the root region covers {acc['inside_root_s']:.3g} s of the {acc['span_s']:.3g} s traced "
                f"({share:.1%}): it does not enclose the program's work; ML-R1 places it around the whole run "
                "(the function a __main__ block runs, or from the initialization to the exit of a script), not "
                "around one call")
    return None
