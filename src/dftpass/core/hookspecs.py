"""The hooks a dftpass plugin can implement.

A plugin is any module or object with functions named like the specs below and marked
with :data:`hookimpl`. dftpass finds plugins in two places:

* the entry-point group ``dftpass`` (``[project.entry-points.dftpass]`` in the plugin's
  ``pyproject.toml``); dftpass's own built-in plugins are registered the same way;
* ``plugins.load`` in the configuration (a list of importable module names), for local
  plugins that are not packaged.

Auto-loading from entry points is switched off by ``DFTPASS_DISABLE_PLUGIN_AUTOLOAD=1``
(built-ins are still loaded); a single plugin is blocked by listing its entry-point name
in ``plugins.disable`` of the configuration.

pluggy calls implementations in last-registered-first order. dftpass does **not** rely
on that order for passes: the pass manager orders passes from their declared
``requires``/``after`` (see :mod:`dftpass.core.manager`).
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from dftpass.core.config import Config
    from dftpass.core.context import RunContext
    from dftpass.core.passes import Pass

PROJECT_NAME = "dftpass"

hookspec = pluggy.HookspecMarker(PROJECT_NAME)
#: Decorate a plugin's hook functions with this.
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


# --------------------------------------------------------------------------------------
# Discovery: what a plugin contributes
# --------------------------------------------------------------------------------------


@hookspec
def dftpass_passes() -> list[type[Pass]]:
    """Return the pass classes this plugin contributes.

    Each class subclasses :class:`dftpass.core.passes.Pass` and declares its ``id``,
    ``title``, ``kind``, ``requires``, ``after``, ``frameworks``, ``default_enabled`` and
    ``Options``. Ids are unique across all plugins; a duplicate is an error that names both
    plugins. Rule ids of third parties should use their own prefix (``ACME-1``), not ``ML-R``.

    Called once per run, before configuration is applied.
    """


@hookspec
def dftpass_framework_markers() -> dict[str, list[str]]:
    """Return ``{framework: [import prefix, ...]}`` to teach framework detection new names.

    A file that imports a module starting with one of the prefixes counts as using the
    framework; passes gated on that framework (``frameworks = ("myfw",)``) then run.
    Example: ``{"paddle": ["paddle"]}``.
    """


@hookspec
def dftpass_knowledge() -> dict[str, list[str]]:
    """Return library facts, by kind, that extend what the analyses recognise.

    Kinds (each a list of strings; every plugin's lists are added up):

    * ``module_bases``: base classes whose subclasses are models (``"keras.Model"``), matched
      on whole dotted components from the right;
    * ``module_base_prefixes``: qualified prefixes whose classes are models (``"torch.nn."``);
    * ``module_call_methods``: what calling a model runs (``"forward"``, ``"call"``);
    * ``process_launchers`` / ``process_keywords``: calls, and keywords of calls, that run a
      function in new processes (``"spawn"``, ``"worker_init_fn"``);
    * ``loader_factories``: calls (last component) whose result is a data loader;
    * ``loader_modules``: qualified prefixes of data pipelines whose objects iterate batches;
    * ``transparent_wrappers``: calls that iterate what they wrap (``"tqdm"``);
    * ``loader_names`` (a table): module -> regular expressions of names (last component)
      that hold a loader when value flow cannot tell, in files that import that module
      (``{"tensorflow": ["(^|_)ds$"]}``: ``train_ds`` in TensorFlow code, not in torch's);
    * ``dataset_bases``: base classes of map-style data sets, whose ``__getitem__`` a data
      loader calls once per sample (``"torch.utils.data.Dataset"``): ML-R9 times it, the
      cost model counts it per sample, and the programs analysis follows it from the loader;
    * ``iterable_dataset_bases``: base classes of data sets a loader iterates
      (``"IterableDataset"``);
    * ``compilers``: qualified decorators or calls that compile the function they get, so
      that its Python body does not run per call (``"jax.jit"``, ``"tensorflow.function"``):
      no rule places a region on or in such a function (the caller is timed instead);
    * ``gradient_calls``: calls that compute gradients, the backward pass of a framework
      without ``loss.backward()``: a qualified function (``"jax.value_and_grad"``) or
      ``".method"`` on any object that is not a module (``".gradient"``: ``tape.gradient``);
    * ``optimizer_calls``: calls that apply an optimizer update, in the same two forms
      (``"optax.apply_updates"``, ``".apply_gradients"``);
    * ``optimizer_methods``: methods of an optimizer object that take a step (``"step"``;
      flax's ``"update"``): the receiver must look like an optimizer;
    * ``loop_models``: base classes of the models a framework's own training loop calls
      (``"LightningModule"``): where the project has such models, the other modules are
      their parts, and only these get a forward region (ML-R7);
    * ``optimizer_classes``, ``model_factories``, ``io_calls``, ``log_methods``, ``no_grad``,
      ``identity_methods``, ``passthrough_calls``, ``load_state_methods``,
      ``checkpoint_waits``, ``load_result``: lists, explained in plugins/library.toml;
    * tables (a dict each; keys add up, and a key two plugins give different values is an
      error): ``framework_phases`` (method -> phase), ``checkpoint_functions`` (qualified
      call -> ``"save"`` | ``"load"``), ``checkpoint_methods`` and ``accelerator_methods``
      (method -> ``"save"`` | ``"load"``), ``checkpoint_objects`` (prefix of what builds the
      receiver -> method -> ``"save"`` | ``"load"``), ``checkpoint_hooks`` (a method that
      registers a function a save or load runs -> ``"save"`` | ``"load"``), ``save_object`` (qualified save ->
      ``[position, keyword]`` of the object saved), ``checkpoint_io_measure`` (qualified
      call -> how ML-R26 measures its object), ``collective_functions`` (module -> function
      -> ``ai.comm`` node; a module matches its submodules), ``collective_objects`` (prefix of
      what builds the receiver -> method -> node), ``mpi_methods`` (communicator method -> node); with the lists ``collective_nonblocking``, ``mpi_communicators``,
      ``mpi_derived_communicators`` and ``collective_waits``.

    dftpass's own facts are plugins/library.toml, served by the built-in plugin through this
    hook. An unknown kind is an error naming the plugin. Example:
    ``{"loader_factories": ["PaddleLoader"], "checkpoint_methods": {"save_sharded": "save"}}``.
    """


@hookspec
def dftpass_install_flags(detection: Any) -> dict[str, str]:
    """Return dftracer build flags this project needs, each with why: ``{flag: reason}``.

    ``detection`` is the ``frameworks`` analysis (``.names``, ``.evidence``, ``.hip_in_code``,
    ``.rocm_path``, ...). Any flag makes ``dftpass install`` a source build
    (``pip install --no-binary dftracer dftracer``) with ``FLAG=ON`` in its environment;
    ``detect`` shows it and ``plan`` says that the wheel will not do. Example, a site whose
    MPI must always be traced: ``{"DFTRACER_ENABLE_MPI": "the site's MPI"}``.
    """


# --------------------------------------------------------------------------------------
# Configuration
# --------------------------------------------------------------------------------------


@hookspec
def dftpass_add_options(parser: argparse.ArgumentParser) -> None:
    """Add command-line options to the annotation commands (``run``, ``plan``, ``validate``).

    Use long option names with the plugin's prefix (``--acme-level``); read the values in
    :func:`dftpass_configure` from ``config.cli_args``.
    """


@hookspec
def dftpass_configure(config: Config) -> None:
    """Called once the configuration is resolved (all layers merged), before any pass runs.

    A plugin may read its options here. The configuration must not be modified: its
    values and their sources are what ``dftpass config`` reports.
    """


# --------------------------------------------------------------------------------------
# Run lifecycle
# --------------------------------------------------------------------------------------


@hookspec
def dftpass_run_finished(ctx: RunContext, result: Any) -> None:
    """Called after all passes ran and the outputs were written (or the plan was made).

    ``result`` is the command's result object (:class:`dftpass.core.pipeline.AnnotateResult`
    for ``run``/``plan``/``validate``). Use it to export findings to another system.
    """
