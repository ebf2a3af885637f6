"""The work a run did, read from its traces: what two runs must share before their times compare.

Per phase (train, evaluate, test): the batches its loops received and the regions it had
(one per call of the function that trains or evaluates: an epoch, in most programs). And the
**steady state**: the time of the training regions after the first, so that a change is not
credited with what the first epoch's warm-up (worker start-up, caches filling, allocator and
kernel warm-up) costs or saves. And the **program's time**, the root region: the wall time
without the interpreter's start-up and imports, which a change of the program does not touch
but whose noise (tenths of a second) hides a small gain.
"""

from __future__ import annotations

from dftpass.traces import names as N
from dftpass.traces.summary import PHASE_CODES, PHASES


def batches_received(summary) -> int:
    """The batches the training processes' loops received, counted event by event (a
    ``fetch.iter`` per batch, or a fetch region around ``next(it)``; in a sampled run, the
    loop's own counter, :mod:`dftpass.runtime.sampling`): exact, where the per-phase
    figures come from the overlap's buckets and may put a batch at a phase's edge into the
    next phase."""
    from dftpass.analysis.metrics import in_training_processes

    if summary.sampling is not None and summary.sampling.sampled:
        return summary.sampling.steps  # the loop's own counter: every batch, traced or not
    keys = {(N.DATALOADER_CAT, N.FETCH_ITER), (N.DATALOADER_CAT, N.FETCH)}
    return sum(cell.count for cell in in_training_processes(summary, keys))


def work_of(analysis) -> dict:
    """``{"phases": {phase: {"batches": n, "regions": k}}, "batches": total, "steady_s": s | None,
    "program_s": s | None}``
    of one repeat (``analysis``: a :class:`dftpass.traces.Analysis`); ``program_s`` is the root
    region's length: the program's own time, without the interpreter's start-up and imports."""
    summary, overlap = analysis.summary, analysis.overlap
    by_phase = (overlap.phases or {}) if overlap is not None else {}
    regions = {p: 0 for p in PHASES}
    train: dict[tuple, list[tuple[int, int]]] = {}
    root_ns = 0
    for interval in summary.intervals:
        *process, code, start, end = interval
        if code == PHASE_CODES["root"]:
            root_ns = max(root_ns, end - start)
        elif code < len(PHASES):
            regions[PHASES[code]] += 1
            if code == PHASE_CODES["train"]:
                train.setdefault(tuple(process), []).append((start, end))
    phases = {}
    for phase in PHASES:
        batches = by_phase[phase].batches if phase in by_phase else 0
        if batches or regions[phase]:
            phases[phase] = {"batches": int(batches), "regions": regions[phase]}
    steady = [sum(e - s for s, e in sorted(ivs)[1:]) / 1e9 for ivs in train.values() if len(ivs) > 1]
    return {"phases": phases, "batches": batches_received(summary),
            "steady_s": round(max(steady), 6) if steady else None,
            "program_s": round(root_ns / 1e9, 6) if root_ns else None}


def describe(work: dict | None) -> str:
    """``train 40 batches in 2 regions, evaluate 10 batches``."""
    phases = (work or {}).get("phases") or {}
    if not phases:
        return "no phase in the trace"
    def regions(n: int) -> str:
        return "1 region" if n == 1 else f"{n} regions"
    return ", ".join(f"{p} {w['batches']} batches in {regions(w['regions'])}" for p, w in phases.items())
