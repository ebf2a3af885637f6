"""The built-in plugin: registers dftpass's own passes through the public hooks.

It is loaded like any third-party plugin (entry point ``dftpass = builtin``), and always,
even when entry-point auto-loading is switched off.
"""

from __future__ import annotations

from dftpass.core.hookspecs import hookimpl
from dftpass.plugins.analyses.callgraph import CallGraphAnalysis
from dftpass.plugins.analyses.compiled import CompiledAnalysis
from dftpass.plugins.analyses.cost import CostAnalysis
from dftpass.plugins.analyses.diagnosis import DiagnosisAnalysis
from dftpass.plugins.analyses.frameworks import FrameworksAnalysis
from dftpass.plugins.analyses.install import InstallAnalysis
from dftpass.plugins.analyses.loops import LoopsAnalysis
from dftpass.plugins.analyses.programs import ProgramsAnalysis
from dftpass.plugins.analyses.traces import TracesAnalysis
from dftpass.plugins.checks.ml_r22_safe_placement import SafePlacement
from dftpass.plugins.checks.ml_r23_compiled_functions import CompiledFunctions
from dftpass.plugins.compute.ml_r4_optimizer_step import OptimizerStep
from dftpass.plugins.compute.ml_r7_forward_backward import ForwardBackward
from dftpass.plugins.compute.ml_r17_device_transfer import DeviceTransfer
from dftpass.plugins.compute.ml_r28_profiler import PyTorchProfiler
from dftpass.plugins.compute.ml_r29_dynamo_backend import DynamoBackend
from dftpass.plugins.checkpoint.ml_r18_checkpoints import CheckpointRegions
from dftpass.plugins.checkpoint.ml_r26_checkpoint_io import CheckpointIO
from dftpass.plugins.data.ml_r9_dataset_items import DatasetItems
from dftpass.plugins.data.ml_r25_data_io import DataIO
from dftpass.plugins.other.ml_r27_other_io import OtherIO
from dftpass.plugins.data.ml_r21_worker_init import WorkerInit
from dftpass.plugins.data.ml_r10_preprocess_collate import PreprocessCollate
from dftpass.plugins.generic.ml_r19_generic_regions import GenericRegions
from dftpass.plugins.distributed.ml_r11_ddp_inner_forward import DdpInnerForward
from dftpass.plugins.distributed.ml_r5_collectives import Collectives
from dftpass.plugins.lifecycle.ml_r1_program_lifecycle import ProgramLifecycle
from dftpass.plugins.lifecycle.ml_r20_app_metadata import AppMetadata
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
    CompiledAnalysis,
    FrameworksAnalysis,
    InstallAnalysis,
    LoopsAnalysis,
    ProgramsAnalysis,
    TracesAnalysis,
    DiagnosisAnalysis,
    CostAnalysis,
    # rules
    ProgramLifecycle,
    PipelinePhases,
    EpochLoop,
    OptimizerStep,
    Collectives,
    BatchLoop,
    ForwardBackward,
    DeviceTransfer,
    DdpInnerForward,
    StepMetadata,
    DatasetItems,
    CheckpointRegions,
    CheckpointIO,
    DataIO,
    OtherIO,
    PreprocessCollate,
    AppMetadata,
    WorkerInit,
    PyTorchProfiler,
    DynamoBackend,
    GenericRegions,  # takes what the other rules leave: keep it last
    SafePlacement,
    CompiledFunctions,
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
