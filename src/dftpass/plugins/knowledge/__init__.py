"""What ML training code looks like: shared recognisers for the rules.

Several rules need the same facts ("is this call an optimizer step?", "does this function
train?"); they live here once, so that ML-R2 (phases), ML-R4 (optimizer step) and ML-R7
(backward) agree on them. One module per topic; this package re-exports every name:

- ``facts``: the library facts, merged from every plugin;
- ``steps``: optimizer steps, backward passes, what trains, evaluates and runs a step;
- ``models``: model classes, model calls, factories, the top-level model;
- ``statements``: where a ``with`` region can go, and what runs inside regions;
- ``data``: data sets, loaders, the functions that produce samples;
- ``handles``: what a name opened, and the reads through it;
- ``checkpoints``: the calls that save and load state, and the plan of checkpoint regions.
"""

from __future__ import annotations

from dftpass.plugins.knowledge.facts import (  # noqa: F401
    Facts, facts, resolution_hints,
)
from dftpass.plugins.knowledge.steps import (  # noqa: F401
    assigned_values, COMPUTE_STEP, does_io, does_step, evaluated_by_callers, evaluates, framework_phase,
    is_backward, is_compute_step, is_optimizer, is_optimizer_step, is_scaler, OPTIMIZER_NAME, PHASE_RECEIVER,
    SCALER_NAME, SCHEDULER_NAME, step_anchor, step_calls, step_consumers, trains,
)
from dftpass.plugins.knowledge.models import (  # noqa: F401
    built_by_factory, decoratable_wrapped_classes, deepspeed_init, is_library_layer, is_model_call, is_model_entry, is_top_level_model,
    LOSS_NAME, MAX_MODEL_CLASSES, model_classes, MODEL_NAME, MODEL_WRAPPERS, model_wrapper, wrapped_classes, wrapper_name,
)
from dftpass.plugins.knowledge.statements import (  # noqa: F401
    calls_at, in_compute_span, run_inside, sibling, torch_name, unwrappable,
)
from dftpass.plugins.knowledge.data import (  # noqa: F401
    classes_given_to_loaders, data_path, dataset_sample_readers, is_dataset_class, iterable_dataset_generators,
    loader_datasets_seen, protocol_datasets,
    iterable_sample_spans, LOADER_CALLABLES, LOADER_PROTOCOL, loop_generators, per_sample_functions,
    run_by_loaders, sample_readers, SampleSpan, TENSOR_MAKERS, TENSOR_METHODS,
)
from dftpass.plugins.knowledge.handles import (  # noqa: F401
    call_chain, HANDLE_NAME, Handles, OPENERS,
)
from dftpass.plugins.knowledge.checkpoints import (  # noqa: F401
    ACCELERATOR_NAME, checkpoint_call, checkpoint_function, CHECKPOINT_NODES, checkpoint_ops, checkpoint_plan,
    CheckpointOp, CheckpointPlan, CheckpointSpan, flow_reach, has_node_region, library_receiver, loads_state,
    MAX_CHECKPOINT_FUNCTION_STMTS, NOT_STATE_PRETRAINED, PRETRAINED_IO, project_function_names, saves_state,
    STATE_METHOD,
)
