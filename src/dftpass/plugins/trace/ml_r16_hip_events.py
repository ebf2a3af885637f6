"""ML-R16: HIP events are in the trace when the project needs HIP tracing."""

from __future__ import annotations

from dftpass.api import emitter as E, Finding, Pass, PassKind, Severity


class HipEvents(Pass):
    """When the project runs HIP code, check that the trace holds ``hip`` events.

    What it does:
        If framework detection found HIP use in the project's own code (``torch.version.hip``,
        HIP kernels), the run's trace must hold events of the HIP layer; if it does not,
        says what to do, in order.

    Why:
        dftracer traces HIP only when it was built with ``DFTRACER_ENABLE_HIP_TRACING=ON``;
        the binary wheel is not. Without it the GPU side of a ROCm run is invisible.

    Example:
        ``no hip events: reinstall dftracer with DFTRACER_ENABLE_HIP_TRACING=ON ...``

    Fix safety:
        Report only.

    Options:
        None.
    """

    id = "ML-R16"
    title = "HIP events"
    kind = PassKind.RUNTIME
    requires = ("traces", "install")
    tags = ("trace", "rocm")

    def run(self, ctx) -> None:
        if not ctx.analysis("install").hip:
            return
        summary = ctx.analysis("traces").primary.analysis.summary
        if any(cat.lower() == "hip" for cat, _ in summary.by_key):
            return
        ctx.report(Finding(self.id, (
            "the project runs HIP code but the trace has no hip events. In order: 1) reinstall dftracer from "
            f"source with {E.BUILD_FLAG_HIP}=ON (`dftpass install`); 2) rerun with {E.ENV_INIT}=FUNCTION; "
            "3) if still absent, run with LD_PRELOAD of dftracer's libdftracer_preload.so"),
            ctx.run.label, severity=Severity.WARNING))
