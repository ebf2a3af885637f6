"""The built-in plugin: registers dftpass's own passes through the public hooks.

It is loaded like any third-party plugin (entry point ``dftpass = builtin``), and always,
even when entry-point auto-loading is switched off.
"""

from __future__ import annotations

from dftpass.core.hookspecs import hookimpl
from dftpass.plugins.analyses.callgraph import CallGraphAnalysis
from dftpass.plugins.analyses.frameworks import FrameworksAnalysis
from dftpass.plugins.analyses.loops import LoopsAnalysis
from dftpass.plugins.analyses.programs import ProgramsAnalysis
from dftpass.plugins.analyses.traces import TracesAnalysis
from dftpass.plugins.compute.ml_r4_optimizer_step import OptimizerStep
from dftpass.plugins.compute.ml_r7_forward_backward import ForwardBackward
from dftpass.plugins.data.ml_r9_dataset_items import DatasetItems
from dftpass.plugins.lifecycle.ml_r1_program_lifecycle import ProgramLifecycle
from dftpass.plugins.pipeline.ml_r2_pipeline_phases import PipelinePhases
from dftpass.plugins.pipeline.ml_r3_epoch_loop import EpochLoop
from dftpass.plugins.pipeline.ml_r6_batch_loop import BatchLoop
from dftpass.plugins.pipeline.ml_r8_step_metadata import StepMetadata
from dftpass.plugins.trace.ml_r15_trace_categories import TraceCategories
from dftpass.plugins.trace.ml_r16_hip_events import HipEvents
from dftpass.plugins.knowledge import BUILTIN_KNOWLEDGE
from dftpass.plugins.trace.ml_r24_overlap import ComputeLoaderOverlap

PASSES = [
    # analyses
    CallGraphAnalysis,
    FrameworksAnalysis,
    LoopsAnalysis,
    ProgramsAnalysis,
    TracesAnalysis,
    # rules
    ProgramLifecycle,
    PipelinePhases,
    EpochLoop,
    OptimizerStep,
    BatchLoop,
    ForwardBackward,
    StepMetadata,
    DatasetItems,
    # runtime rules (dftpass analyze)
    TraceCategories,
    HipEvents,
    ComputeLoaderOverlap,
]


@hookimpl
def dftpass_passes():
    return PASSES


@hookimpl
def dftpass_knowledge():
    return BUILTIN_KNOWLEDGE
