"""ML-R24: data loading overlaps compute; when it does not, why, from the source."""

from __future__ import annotations

from dftpass.core.findings import Finding, Severity
from dftpass.core.passes import Pass, PassKind


class ComputeLoaderOverlap(Pass):
    """Measure how much of compute time has data loading running beside it, and diagnose.

    What it does:
        From the run's traces, DataLoader workers included, computes the share of compute
        time during which data loading ran in some process (the bucketed lower bound of
        analysis.md), and the loop's own wait for batches (``fetch.iter``). Below 10% is
        "no overlap", the target is 50%. When the target is missed, reads the project's
        source and links each cause to its line: no or few workers, shallow prefetch,
        workers re-created every epoch (A), blocking host-to-device copies (B), barriers in
        the batch loop (C), batch loops the trace cannot see (D).

    Why:
        A training loop is serial inside one process; loading hides behind compute only in
        other processes. Without overlap every step waits for its batch (a data stall).

    Example:
        ``loading overlaps 3.2% of compute (< 10%)`` with
        ``train.py:41: DataLoader(num_workers not set (defaults to 0)) ...``

    Fix safety:
        Report only; ``dftpass analyze`` turns causes into proposals with citations.
        A run whose workers left no traces (spawn start method) is "cannot judge", never 0.

    Options:
        None (the bucket width is ``dftpass analyze --bucket-width``).
    """

    id = "ML-R24"
    title = "Compute/loader overlap"
    kind = PassKind.RUNTIME
    requires = ("traces", "loops")
    tags = ("trace", "dataloader")

    def run(self, ctx) -> None:
        from dftpass.traces.overlap import BELOW_TARGET, CANNOT_JUDGE, NO_OVERLAP

        run = ctx.analysis("traces")
        overlap = run.primary.analysis.overlap
        where = run.run.label
        if overlap is None or not run.primary.analysis.summary.events:
            return  # nothing to judge; ML-R15 says why the trace is empty
        severity = {NO_OVERLAP: Severity.ERROR, BELOW_TARGET: Severity.WARNING,
                    CANNOT_JUDGE: Severity.WARNING}.get(overlap.verdict, Severity.INFO)
        stall = overlap.fetch_stall_share
        stall_text = f"; the batch loop waited for data {stall:.1%} of its time" if stall is not None else ""
        ctx.report(Finding(self.id, f"{overlap.verdict}: {overlap.reason}{stall_text}", where, severity=severity))
        if overlap.verdict in (NO_OVERLAP, BELOW_TARGET, CANNOT_JUDGE):
            from dftpass.analysis.diagnosis import trace_causes

            causes = trace_causes(run.primary.analysis.summary, where)
            causes += self.causes(ctx, overlap) if ctx.project.files else []
            for cause in causes:
                ctx.report(Finding(self.id, f"{cause.id}: {cause.message}", cause.path, cause.line,
                                   severity=Severity.WARNING))

    @staticmethod
    def causes(ctx, overlap):
        from dftpass.analysis.diagnosis import find_causes

        loops = ctx.analysis("loops")
        factories = loops.options.loader_factories
        return find_causes(ctx.analysis("callgraph"), loops, factories,
                           workers_traced=bool(overlap.loading_workers) if overlap else None)
