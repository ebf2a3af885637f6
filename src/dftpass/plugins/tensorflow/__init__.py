"""The TensorFlow / Keras plugin: what a TensorFlow training step looks like, and ML-R13.

It ships with dftpass but registers through the public hooks only (the ``dftpass`` entry
point ``tensorflow``), as a third party's plugin would: ``plugins: {disable: [tensorflow]}``
switches it off. What it teaches the analyses: ``tape.gradient(...)`` is a backward pass
and ``optimizer.apply_gradients(...)`` an optimizer step, so a custom training loop counts
as training (ML-R2 phases, the program's role). ``tf.function`` and ``tf.data``'s traced map
functions are dftpass's own knowledge (the ``compiled`` analysis): no rule places a region
inside them, with this plugin or without it.
"""

from __future__ import annotations

from dftpass.api import hookimpl
from dftpass.plugins.tensorflow.ml_r13_tensorflow import TensorFlowLoops

KNOWLEDGE = {
    "gradient_calls": [".gradient"],
    "optimizer_calls": [".apply_gradients"],
    # tfds.load returns tf.data datasets; ``train_ds, test_ds = get_datasets(config)`` (flax's
    # and TensorFlow's examples) hands them on in a tuple value flow does not follow
    "loader_modules": ["tensorflow_datasets."],
    # ``train_ds`` holds a dataset in a file that uses TensorFlow or Keras; elsewhere (torch's
    # own sources) a ``ds`` is anything
    "loader_names": {prefix: [r"(?i)(^|_)ds$"] for prefix in ("tensorflow", "tensorflow_datasets", "keras",
                                                               "tf_keras")},
}


@hookimpl
def dftpass_passes():
    return [TensorFlowLoops]


@hookimpl
def dftpass_knowledge():
    return KNOWLEDGE
