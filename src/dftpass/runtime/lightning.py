"""The Lightning callback's hooks (``dftpass.runtime.LightningCallback`` and
``PytorchLightningCallback`` derive from them and from the package's ``Callback``)."""

from __future__ import annotations

from dftpass.runtime import regions as r


def tensor_bytes(obj) -> int:
    """The bytes of the tensors anywhere in nested dicts, lists and tuples (a checkpoint)."""
    import torch

    return sum(t.element_size() * t.nelement() for t in torch.utils._pytree.tree_flatten(obj)[0]
               if torch.is_tensor(t))


class Hooks:
    """dftpass: dftracer regions for the loops Lightning runs: an epoch, the wait for each
    batch, backward passes, optimizer steps, the validation inside ``fit`` (not the sanity
    check), checkpoint writes (with the bytes of their tensors), and the epoch and
    ``trainer.global_step`` on the events."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._regions = r.Regions()

    # The hooks take ``*args`` where Lightning's signatures changed between releases
    # (pytorch-lightning 1.5 passes ``optimizer_idx`` and ``dataloader_idx`` too): an
    # annotated program must run with the Lightning it was written for.

    def setup(self, trainer, pl_module, stage=None):
        # ModelCheckpoint and trainer.save_checkpoint both write through the strategy's
        # CheckpointIO (1.5: the training type plugin's): its save_checkpoint, called inside
        # the region, times them all
        owner = getattr(trainer, "strategy", None) or getattr(trainer, "training_type_plugin", None)
        io = getattr(owner, "checkpoint_io", None)
        save = getattr(io, "save_checkpoint", None)
        if save is None or getattr(save, "_dft", False):
            return

        def save_checkpoint(checkpoint, *args, **kwargs):
            with r.CHECKPOINT_WRITE:
                result = save(checkpoint, *args, **kwargs)
                r.CHECKPOINT_WRITE.update(image_size=tensor_bytes(checkpoint))
            return result

        save_checkpoint._dft = True
        io.save_checkpoint = save_checkpoint

    def on_train_epoch_start(self, trainer, pl_module):
        self._regions.open(r.EPOCH)
        r.update(epoch=trainer.current_epoch)
        self._regions.open(r.FETCH)

    def on_train_batch_start(self, trainer, pl_module, batch, batch_idx, *args):
        self._regions.close(r.FETCH)
        r.update_compute_and_loader(step=trainer.global_step, epoch=trainer.current_epoch)

    def on_before_backward(self, trainer, pl_module, loss):
        self._regions.open(r.BACKWARD)

    def on_after_backward(self, trainer, pl_module):
        self._regions.close(r.BACKWARD)

    def on_before_optimizer_step(self, trainer, pl_module, optimizer, *args):
        self._regions.open(r.STEP)

    def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx, *args):
        self._regions.close(r.STEP)
        self._regions.open(r.FETCH)

    def on_validation_start(self, trainer, pl_module):
        self._regions.close(r.FETCH)
        if getattr(trainer.state.fn, "value", trainer.state.fn) == "fit" and not trainer.sanity_checking:
            self._regions.open(r.EVALUATE)

    def on_validation_end(self, trainer, pl_module):
        if self._regions.is_open(r.EVALUATE):
            self._regions.close(r.EVALUATE)
            self._regions.set(r.FETCH, self._regions.is_open(r.EPOCH))

    def on_train_epoch_end(self, trainer, pl_module):
        self._regions.close(r.FETCH)
        self._regions.close(r.EPOCH)
