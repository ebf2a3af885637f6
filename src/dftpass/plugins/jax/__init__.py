"""The JAX / Flax plugin: what a JAX training step looks like, and ML-R14.

It ships with dftpass but registers through the public hooks only (the ``dftpass`` entry
point ``jax``), as a third party's plugin would: ``plugins: {disable: [jax]}`` switches it
off. What it teaches the analyses:

* gradients: ``jax.grad``/``value_and_grad`` and their flax ``nnx`` and equinox forms, so a
  loop over a jitted ``train_step`` that takes them counts as training (ML-R2 phases, the
  program's role);
* optimizer updates: ``optax.apply_updates``, ``state.apply_gradients(...)`` (flax's
  ``TrainState``) and ``optimizer.update(model, grads)`` (``nnx.Optimizer``).

The compilers themselves (``jax.jit``, ``nnx.jit``, ``pmap``) are dftpass's own knowledge:
no rule ever places a region inside a jitted function, with this plugin or without it.
"""

from __future__ import annotations

from dftpass.api import hookimpl
from dftpass.plugins.jax.ml_r14_jax import JaxSteps

KNOWLEDGE = {
    "gradient_calls": ["jax.grad", "jax.value_and_grad", "flax.nnx.grad", "flax.nnx.value_and_grad",
                       "equinox.filter_grad", "equinox.filter_value_and_grad"],
    "optimizer_calls": ["optax.apply_updates", ".apply_gradients"],
    "optimizer_methods": ["update"],
    "transparent_wrappers": ["as_numpy_iterator", "prefetch_to_device"],
    # ``train_iter = create_input_iter(...)`` (flax's examples): an iterator of batches
    "loader_names": {prefix: [r"(?i)(^|_)(train|eval|test|val|valid|input)_?iter(ator)?$"]
                     for prefix in ("jax", "flax")},
}


@hookimpl
def dftpass_passes():
    return [JaxSteps]


@hookimpl
def dftpass_knowledge():
    return KNOWLEDGE
