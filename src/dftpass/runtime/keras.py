"""The Keras callback's hooks (``dftpass.runtime.KerasCallback`` and ``TfKerasCallback``
derive from them and from the package's ``keras.callbacks.Callback``)."""

from __future__ import annotations

from dftpass.runtime import regions as r


class Hooks:
    """dftpass: dftracer regions for the loops ``model.fit`` runs: an epoch, each training
    batch as compute (with its step and epoch), the validation at the end of an epoch."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self._regions = r.Regions()
        self._epoch = 0
        self._step = 0

    def on_epoch_begin(self, epoch, logs=None):
        self._epoch = epoch
        self._regions.open(r.EPOCH)
        r.update(epoch=epoch)

    def on_train_batch_begin(self, batch, logs=None):
        r.update_compute(step=self._step, epoch=self._epoch)
        self._regions.open(r.COMPUTE)

    def on_train_batch_end(self, batch, logs=None):
        self._regions.close(r.COMPUTE)
        self._step += 1

    def on_test_begin(self, logs=None):
        self._regions.open(r.EVALUATE)

    def on_test_end(self, logs=None):
        self._regions.close(r.EVALUATE)

    def on_epoch_end(self, epoch, logs=None):
        self._regions.close(r.EPOCH)
