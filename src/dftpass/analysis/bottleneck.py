"""Where one run's time goes: the bottleneck, the phase it is in, and whether the overlap of
loading and compute could be judged (and if not, the real reason).

The verdict is read from the per-phase figures of the overlap pass
(:class:`~dftpass.traces.overlap.PhaseOverlap`) and the facts of the program
(:class:`~dftpass.analysis.context.ProgramFacts`), in this order:

1. **the phase**: the one asked for (``dftpass analyze --phase evaluate``), else the loop
   phase (train, evaluate, test) whose regions cover the most time; an evaluation or test
   phase longer than training, not asked for, is itself the bottleneck (``evaluation`` /
   ``test``). Without phase regions the whole run is the phase (``all``).
2. **inside the phase**, the first that holds:

   * ``checkpoint``: checkpoint regions cover >= 30% of the phase and more than the wait for data;
   * a data stall (the batch loop waits >= 20% of its time): ``worker-startup`` when the loader
     has worker processes and the waits for each loop's first batch (in this phase) are >= half
     of all the waiting (workers starting, spawn imports, per-worker set-up), ``loading-preprocess`` when transforms/collate take more of
     the loading than the sample reads, else ``loading``;
   * ``compute`` when compute covers >= 30% of the phase, else ``other``.

3. **the overlap**, in words a user can act on: ``stalled`` (the loop waits >= 20%),
   ``serial`` (it waits less, but loads in the training process, between its steps: nothing
   runs beside compute), ``hidden`` (loading keeps up, seen beside compute), or
   ``cannot-judge:REASON`` where REASON
   is ``no-loader`` (the program has no DataLoader: its batches come from the training
   process, nothing can overlap; a wait for them is still a stall), ``spawn-untraced`` (spawn/forkserver workers with no
   ``worker_init_fn`` that starts tracing), ``few-events`` (workers ran but wrote no file:
   dftracer drops a process's file with fewer than 3 events), ``no-compute`` (no compute
   regions), or ``no-loading-events``.

Thresholds are named constants; tests/zoo checks them against programs whose bottleneck is
known by construction.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from dftpass.traces import names as N
from dftpass.traces.overlap import CANNOT_JUDGE, STALL_SHARE, Overlap, PhaseOverlap

#: checkpoint regions this share of a phase or more: checkpoint-bound
CHECKPOINT_SHARE = 0.3
#: the first-batch waits this share of all waiting or more: worker start-up
STARTUP_SHARE = 0.5
#: compute this share of a phase or more: compute-bound (when the loop does not stall)
COMPUTE_SHARE = 0.3
#: dftracer keeps no file for a process with fewer events than this (dftracer-api.md)
MIN_EVENTS_PER_FILE = 3

LOADING, PREPROCESS, STARTUP = "loading", "loading-preprocess", "worker-startup"
COMPUTE, CHECKPOINT, EVALUATION, TEST, OTHER = "compute", "checkpoint", "evaluation", "test", "other"
STALLED, HIDDEN, SERIAL, JUDGE_NOT = "stalled", "hidden", "serial", "cannot-judge"

#: what to do about each reason the overlap cannot be judged
REMEDIES = {
    "no-loader": "the program has no DataLoader: batches come from the training process itself, so no loading "
                 "can run beside compute; the loop's wait for each batch is still measured, and the phase table "
                 "shows it",
    "spawn-untraced": "let dftpass add its worker_init_fn (ML-R21, `dftpass run`), or start tracing in the "
                      "workers' own worker_init_fn",
    "few-events": "a process's trace is dropped when it records fewer than 3 events: give each worker more to "
                  "record (more samples per worker, persistent_workers=True) or trace the data set's reads "
                  "(--data-dir)",
    "no-compute": "annotate the model's forward and backward (ML-R7) and the optimizer step (ML-R4, "
                  "`dftpass run`)",
    "no-loading-events": "annotate the data set's __getitem__ (ML-R9) and the loop (ML-R6, `dftpass run`)",
}


@dataclass
class Bottleneck:
    kind: str
    #: the phase it is in: train, evaluate, test, outside, or all (no phase regions)
    phase: str
    #: stalled | hidden | cannot-judge:REASON
    overlap: str
    text: str
    #: the figures the verdict rests on (seconds and shares)
    figures: dict = field(default_factory=dict)
    #: the reason the overlap cannot be judged and what to do, when it cannot
    remedy: str | None = None

    def to_dict(self) -> dict:
        return {"kind": self.kind, "phase": self.phase, "overlap": self.overlap, "text": self.text,
                "figures": self.figures, "remedy": self.remedy}


def focus_phase(overlap: Overlap, wanted: str | None = None) -> PhaseOverlap | None:
    """The phase asked for (``dftpass analyze --phase``) when the trace has it, else the loop
    phase with the most time in it, else the whole run."""
    asked = (overlap.phases or {}).get(wanted) if wanted else None
    if asked is not None and asked.span_s:
        return asked
    loops = [p for name, p in (overlap.phases or {}).items() if name in ("train", "evaluate", "test") and p.span_s]
    if loops:
        return max(loops, key=lambda p: (p.span_s, p.phase == "train"))
    return overlap.whole


def sample_split(summary) -> tuple[float, float]:
    """Seconds in preprocessing events and in sample reads (all processes)."""
    pre = sum(s.total_s for key, s in summary.by_key.items() if key in N.PREPROCESS_EVENTS)
    reads = sum(s.total_s for key, s in summary.by_key.items() if key in N.SAMPLE_READ_EVENTS)
    return pre, reads


def has_workers(overlap: Overlap, facts, phase: str | None) -> bool:
    """Whether the phase's loader runs worker processes: traced ones, or a loader whose
    ``num_workers`` is not 0 (a literal > 0, or a value only the run knew)."""
    if overlap.loading_workers:
        return True
    loader = facts.loader_for(phase) if facts is not None else None
    return loader is not None and loader.workers != 0 and (loader.workers is not None or not phase_loads_in_main(
        overlap, phase))


def phase_loads_in_main(overlap: Overlap, phase: str | None) -> bool:
    p = (overlap.phases or {}).get(phase) if phase else overlap.whole
    return bool(p is not None and p.loading_main_s)


def judge_bottleneck(overlap: Overlap | None, summary, facts=None, phase: str | None = None) -> Bottleneck:
    """The bottleneck of the run, or of ``phase`` (train, evaluate, test, outside) when asked
    for and present in the trace."""
    if overlap is None or overlap.whole is None:
        return Bottleneck(OTHER, "all", f"{JUDGE_NOT}:no-compute", "the trace has no timeline to judge",
                          remedy=REMEDIES["no-compute"])
    wanted = phase
    phase = focus_phase(overlap, wanted)
    if wanted and phase.phase != wanted:
        missing = f"the trace has no {wanted} phase; "
    else:
        missing = ""
    span = phase.span_s or (phase.compute_s + phase.fetch_wait_s + phase.fetch_block_s)
    stall = phase.fetch_stall_share
    checkpoint = phase.categories.get(N.CHECKPOINT_CAT, 0.0)
    figures = {"phase_s": round(span, 6), "compute_s": round(phase.compute_s, 6),
               "fetch_wait_s": round(phase.fetch_wait_s, 6), "fetch_block_s": round(phase.fetch_block_s, 6),
               "stall_share": None if stall is None else round(stall, 4),
               "checkpoint_s": round(checkpoint, 6), "loading_main_s": round(phase.loading_main_s, 6),
               "loading_workers_s": round(phase.loading_workers_s, 6)}
    where = "the whole run" if phase.phase == "all" else f"the {phase.phase} phase"
    label, reason = _overlap_label(phase, stall, overlap, summary, facts)
    remedy = REMEDIES.get(reason) if reason else None
    neck = _judge_inside(phase, span, stall, checkpoint, figures, where, label, remedy, overlap, summary, facts,
                         asked=bool(wanted) and not missing)
    if missing:
        neck.text = missing + neck.text
    return neck


def _judge_inside(phase, span, stall, checkpoint, figures, where, label, remedy, overlap, summary, facts,
                  asked: bool) -> Bottleneck:
    train = (overlap.phases or {}).get("train")
    if phase.phase in ("evaluate", "test") and train is not None and not asked:
        kind = EVALUATION if phase.phase == "evaluate" else TEST
        share = phase.span_s / (phase.span_s + train.span_s)
        text = (f"{phase.phase} takes {share:.0%} of the loop phases ({phase.span_s:.3g} s against "
                f"{train.span_s:.3g} s of training)")
        if stall is not None:
            text += f"; its batch loop waits for data {stall:.0%} of its time"
        return Bottleneck(kind, phase.phase, label, text, figures, remedy)
    if span and checkpoint >= CHECKPOINT_SHARE * span and checkpoint > phase.fetch_wait_s:
        return Bottleneck(CHECKPOINT, phase.phase, label,
                          f"checkpoint regions take {checkpoint / span:.0%} of {where} ({checkpoint:.3g} s)",
                          figures, remedy)
    if stall is not None and stall >= STALL_SHARE:
        count, first = phase.first_fetches, phase.first_fetch_s
        pre, reads = sample_split(summary)
        figures.update(first_fetch_s=round(first, 6), first_fetches=count, preprocess_s=round(pre, 6),
                       sample_reads_s=round(reads, 6))
        base = f"the batch loop of {where} waits for data {stall:.0%} of its time ({phase.fetch_wait_s:.3g} s)"
        workers = has_workers(overlap, facts, phase.phase if phase.phase != "all" else None)
        if workers and phase.fetch_wait_s and first >= STARTUP_SHARE * phase.fetch_wait_s:
            return Bottleneck(STARTUP, phase.phase, label,
                              f"{base}, {first / phase.fetch_wait_s:.0%} of it for the first batch of a loop "
                              f"({count} loops): the loader's workers starting", figures, remedy)
        if pre > reads and pre > 0:
            return Bottleneck(PREPROCESS, phase.phase, label,
                              f"{base}; producing samples is mostly preprocessing ({pre:.3g} s against "
                              f"{reads:.3g} s of reads)", figures, remedy)
        return Bottleneck(LOADING, phase.phase, label, base, figures, remedy)
    if span and phase.compute_s >= COMPUTE_SHARE * span:
        text = f"compute takes {phase.compute_s / span:.0%} of {where}"
        if stall is not None:
            text += f"; the batch loop waits for data only {stall:.0%} of its time"
        return Bottleneck(COMPUTE, phase.phase, label, text, figures, remedy)
    return Bottleneck(OTHER, phase.phase, label,
                      f"neither compute ({phase.compute_s:.3g} s) nor the wait for data "
                      f"({phase.fetch_wait_s:.3g} s) fills {where} ({span:.3g} s)", figures, remedy)


def _overlap_label(phase: PhaseOverlap, stall: float | None, overlap: Overlap, summary, facts) -> tuple[str, str | None]:
    """(stalled | hidden | cannot-judge:REASON, REASON or None). A loop that waits is
    stalled whatever else is known (its wait is measured in the training process itself);
    otherwise the overlap needs loading events beside compute, and a program without a
    DataLoader has none to show."""
    if stall is not None and stall >= STALL_SHARE:
        return STALLED, None
    if phase.loading_main_s and not phase.loading_workers_s and (facts is None or facts.has_loader):
        return SERIAL, None  # loaded between the steps, in the training process: nothing can be hidden
    if phase.verdict != CANNOT_JUDGE and (phase.loading_workers_s or facts is None or facts.has_loader):
        return HIDDEN, None
    reason = why_not_judged(phase, overlap, summary, facts)
    return f"{JUDGE_NOT}:{reason}", reason


def why_not_judged(phase: PhaseOverlap, overlap: Overlap, summary, facts) -> str:
    """The real reason a phase's overlap cannot be judged (a key of :data:`REMEDIES`)."""
    if facts is not None and not facts.has_loader:
        return "no-loader"
    if not phase.compute_s:
        return "no-compute"
    if overlap.loading_workers:
        return "no-loading-events"  # workers are traced, but not in this phase
    loader = facts.loader_for(phase.phase if phase.phase != "all" else None) if facts is not None else None
    if loader is not None:
        method = (loader.setting("multiprocessing_context") or facts.start_method or "").strip("'\"")
        traced_init = loader.setting("worker_init_fn") is not None
        if any(m in method for m in ("spawn", "forkserver")) and not traced_init:
            return "spawn-untraced"
        if loader.workers != 0:
            return "few-events"
    return "no-loading-events"
