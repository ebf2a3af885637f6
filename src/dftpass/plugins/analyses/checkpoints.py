"""The ``checkpoints`` analysis: where the project saves and loads checkpoints, and where
their regions go (a :class:`~dftpass.plugins.knowledge.CheckpointPlan`).

ML-R18 places the checkpoint regions from it, ML-R26 the I/O regions inside them, and the
diagnosis of a traced run names the saves it found; a third party's rule
``requires = ("checkpoints",)`` and reads ``ctx.analysis("checkpoints")``. Computed once.
"""

from __future__ import annotations

from dftpass.core.passes import Pass, PassKind
from dftpass.plugins.knowledge import CheckpointPlan, checkpoint_plan


class CheckpointsAnalysis(Pass):
    """Find the checkpoint saves, loads and checkpointing classes (``ctx.analysis("checkpoints")``)."""

    id = "checkpoints"
    title = "Checkpoint sites"
    kind = PassKind.ANALYSIS
    requires = ("callgraph",)

    def run(self, ctx) -> CheckpointPlan:
        return checkpoint_plan(ctx.analysis("callgraph"))
