"""The Lightning plugin (``lightning`` and ``pytorch_lightning``): ML-R12.

It ships with dftpass but registers through the public hooks only (the ``dftpass`` entry
point ``lightning``), as a third party's plugin would: ``plugins: {disable: [lightning]}``
switches it off. What it teaches the analyses: a ``LightningModule`` is what Lightning's
loop calls, so in a project that has one, the networks it is given are its parts (ML-R7
times the module's ``forward``, not theirs as well).
"""

from __future__ import annotations

from dftpass.api import hookimpl
from dftpass.plugins.lightning.ml_r12_lightning import LightningLoops

KNOWLEDGE = {
    "loop_models": ["LightningModule"],
}


@hookimpl
def dftpass_passes():
    return [LightningLoops]


@hookimpl
def dftpass_knowledge():
    return KNOWLEDGE
