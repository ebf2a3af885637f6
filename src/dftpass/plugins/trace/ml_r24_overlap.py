"""ML-R24: data loading overlaps compute; when it does not, why, from the source."""

from __future__ import annotations

from dftpass.api import (
    BELOW_TARGET, CANNOT_JUDGE, Finding, JUDGE_NOT, NO_OVERLAP, Pass, PassKind, REMEDIES, Severity, STALLED,
    waits_materially, why_not_judged,
)


#: a part of the run outside every phase with less than this share of the loops' time is not reported
MINOR = 0.1


class ComputeLoaderOverlap(Pass):
    """Measure how much of compute time has data loading running beside it, and diagnose.

    What it does:
        From the run's traces, DataLoader workers included, computes per phase (train,
        evaluate, test, and outside every phase) the share of compute time during which data
        loading ran in some process (the bucketed lower bound of analysis.md), and the
        loop's own wait for batches (``fetch.iter``). Below 10% is "no overlap", the target
        is 50%. One finding per phase, named by it; then the run's bottleneck (where the
        time goes: loading, worker start-up, preprocessing, compute, checkpoint, evaluation)
        with its overlap label (stalled, hidden, cannot-judge:REASON), and its causes read
        from the source, each linked to its line: no or few workers, shallow prefetch,
        workers re-created every epoch, spawn workers, transforms or reads, checkpoints (A,
        E, G), blocking host-to-device copies on a GPU run (B), barriers in the batch loop
        (C), batch loops the trace cannot see (D). A "no overlap" fails the exit code only
        where it matters: in the bottleneck's phase, with the loop waiting materially for
        data, and not where the bottleneck says the overlap cannot be judged (a program with
        no DataLoader whose compute is the bottleneck: a warning).

    Why:
        A training loop is serial inside one process; loading hides behind compute only in
        other processes. Without overlap every step waits for its batch (a data stall).
        Training and evaluation often load differently (workers for one, the training
        process for the other): one figure over both says neither.

    Example:
        ``evaluate: no overlap: loading runs in the training process, between its steps``,
        ``bottleneck: loading in train (stalled): the batch loop of the train phase waits for
        data 48% of its time (1.1 s)`` with ``train.py:41: DataLoader(num_workers not set
        (defaults to 0)) ...``

    Fix safety:
        Report only; ``dftpass analyze`` turns causes into proposals with citations.
        "Cannot judge" gives its reason (no DataLoader; spawn workers untraced; workers that
        recorded fewer than 3 events and so wrote no file) and what to do, never a 0.

    Options:
        None (``dftpass analyze --phase`` chooses the phase judged, ``--bucket-width`` the
        bucket width).
    """

    id = "ML-R24"
    title = "Compute/loader overlap"
    kind = PassKind.RUNTIME
    requires = ("traces", "diagnosis")
    tags = ("trace", "dataloader")

    def run(self, ctx) -> None:
        run = ctx.analysis("traces")
        overlap = run.primary.analysis.overlap
        where = run.run.label
        if overlap is None or not run.primary.analysis.summary.events:
            return  # nothing to judge; ML-R15 says why the trace is empty
        diagnosis = ctx.analysis("diagnosis")
        neck = diagnosis.bottleneck
        severity = {NO_OVERLAP: Severity.ERROR, BELOW_TARGET: Severity.WARNING,
                    CANNOT_JUDGE: Severity.WARNING}
        phases = overlap.phases or {"all": overlap.whole}
        loop_s = sum(p.fetch_wait_s + p.fetch_block_s + p.compute_s for p in phases.values() if p is not None)
        for name, phase in phases.items():
            if phase is None:
                continue
            if name == "outside" and phase.fetch_wait_s + phase.fetch_block_s + phase.compute_s < MINOR * loop_s:
                continue  # the edges of the phases (a loop's first wait just before its region opens)
            level = severity.get(phase.verdict, Severity.INFO)
            if name == neck.phase and level is Severity.ERROR and not waits_materially(phase, overlap):
                # no overlap, but the loop hardly waits for data (a compute-bound step): worth
                # saying, not failing a gate on (char-rnn waited 2% of its training)
                level = Severity.WARNING
            if name == neck.phase and level is Severity.ERROR and neck.overlap.startswith(JUDGE_NOT):
                # the bottleneck says this overlap cannot be judged (no DataLoader: loading can
                # never run beside compute); failing a gate on a verdict the diagnosis withholds
                # would contradict it (char-rnn's serial get-batch loop)
                level = Severity.WARNING
            if name != neck.phase and level is Severity.ERROR:
                # the verdict is about the bottleneck's phase; another phase's is a warning when
                # its wait matters to the run, else information
                level = Severity.WARNING if waits_materially(phase, overlap) else Severity.INFO
            text = phase.reason
            if phase.verdict == CANNOT_JUDGE:
                reason = why_not_judged(phase, overlap, run.primary.analysis.summary, diagnosis.facts)
                text = f"{reason}: {phase.reason}; {REMEDIES[reason]}"
                if name != neck.phase:
                    level = Severity.INFO  # not the phase the verdict is about
            label = "" if name == "all" else f"{name}: "
            ctx.report(Finding(self.id, f"{label}{phase.verdict}: {text}", where, severity=level))
        stalled = neck.overlap == STALLED
        ctx.report(Finding(self.id, f"bottleneck: {neck.kind} in {neck.phase} ({neck.overlap}): {neck.text}", where,
                           severity=Severity.WARNING if stalled or neck.overlap.startswith(JUDGE_NOT) else Severity.INFO))
        for cause in diagnosis.causes:
            ctx.report(Finding(self.id, f"{cause.id}: {cause.message}", cause.path, cause.line,
                               severity=Severity.WARNING if cause.explains else Severity.INFO))
