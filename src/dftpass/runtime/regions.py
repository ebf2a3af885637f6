"""The dftracer regions the callbacks open: each opened once and closed once, whatever order
a framework calls its hooks in (a validation inside an epoch, a sanity check before it).

The node paths here are the ones :data:`dftpass.core.emitter.NODES` spells for annotated
code; tests/core/test_runtime.py holds them to it.
"""

from __future__ import annotations

from dftracer.python import ai

#: the nodes the callbacks use, by their path under ``ai``
EPOCH = ai.pipeline.epoch
EVALUATE = ai.pipeline.evaluate
FETCH = ai.dataloader.fetch
COMPUTE = ai.compute
BACKWARD = ai.compute.backward
STEP = ai.compute.step
CHECKPOINT_WRITE = ai.checkpoint.io.write
PATHS = {"pipeline.epoch": EPOCH, "pipeline.evaluate": EVALUATE, "dataloader.fetch": FETCH, "compute": COMPUTE,
         "compute.backward": BACKWARD, "compute.step": STEP, "checkpoint.io.write": CHECKPOINT_WRITE}


def update(**values) -> None:
    """Values (``epoch=``) on the events of every node from here on."""
    ai.update(**values)


def update_compute(**values) -> None:
    """Values (``step=``, ``epoch=``) on the compute events only (a step's updates touch the
    subtrees its events are in: ``ai.update`` walks every node, ~8x the cost)."""
    ai.compute.update(**values)


def update_compute_and_loader(**values) -> None:
    """Values (``step=``, ``epoch=``) on the compute and data loader events."""
    ai.compute.update(**values)
    ai.dataloader.update(**values)


class Regions:
    """The regions one callback has open."""

    def __init__(self) -> None:
        self._open: dict[int, object] = {}

    def open(self, node) -> None:
        if id(node) not in self._open:
            self._open[id(node)] = node
            node.start()

    def close(self, node) -> None:
        if id(node) in self._open:
            self._open.pop(id(node)).stop()

    def set(self, node, on: bool) -> None:
        (self.open if on else self.close)(node)

    def is_open(self, node) -> bool:
        return id(node) in self._open
