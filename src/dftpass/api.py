"""The public API for rule authors: everything a rule needs, and nothing else.

A rule (dftpass's own, or a third party's: docs/plugins.md walks through one) imports from
this module only; tests/plugins/test_public_api.py holds every bundled rule and framework
plugin to it, so what is here is what the rules shipped with dftpass use. Names not listed
here are the engine's and may change without notice.

The groups, in the order a rule meets them:

* **declaring a rule**: :class:`Pass`, :class:`PassKind`, :class:`Case` and :class:`Expect`
  (its examples are its tests), :data:`hookimpl` (registering it), :class:`Finding` and
  :class:`Severity` (what it reports);
* **what the project looks like**: the summaries the analyses read (:class:`FileSummary`,
  :class:`FunctionSummary`, :class:`CallSite`: one call, with ``callee``, ``receiver``,
  ``method``, ``args``, ``keywords``, ``stmt`` (its :data:`StmtPath`), ``stmt_kind``,
  ``withs``, ``loops``...), the call graph's ids (:func:`fid`, :class:`Entry`), value origins
  (``graph.values.of(function_id, "x")`` gives origins like ``"ext:mpi4py.MPI.COMM_WORLD"`` or
  ``"inst:model.py::Net"``: :func:`origin_kind` and :func:`origin_subject` take them apart),
  loop facts (:class:`LoopFacts`, :func:`split_of`);
* **what the code does** (library knowledge and recognisers): the collectives (the
  ``collectives`` analysis: :class:`CollectiveSites` of :class:`Collective`), the checkpoint
  sites (the ``checkpoints`` analysis: a :class:`CheckpointPlan`), optimizer steps, backward
  passes, model calls, I/O, data sets, checkpoints, the statements next to a call
  (:func:`calls_at`, :func:`sibling`) and whether a ``with`` can go around one
  (:func:`unwrappable`);
* **what dftracer code looks like**: :mod:`emitter` (every spelling of dftracer's API: node
  paths, environment variables, event categories), :func:`recognize` (what a dftracer construct in a file
  is: a rule calls it so as not to wrap what is wrapped already), :func:`is_node`, the
  regions on a function (:func:`regions_on`), :class:`FileNames` (``ctx.names(relpath)``:
  every spelling of the API in the file's own names, ``image_size`` of a read among them);
* **edits**: :class:`WrapStmt`, :class:`WrapBody`, :class:`WrapIter`, :class:`Decorate`,
  :class:`Enumerate`, :class:`InsertBefore`, :class:`InsertAfter`, :class:`AddArgument`,
  queued with ``ctx.add_edit(relpath, edit)``; placement helpers
  (:func:`function_region`, :func:`has_region`, :func:`top_level_line`);
* **runtime rules** (on a traced run): the overlap labels and the accounting of a run;
* **what the analyses return**: :data:`ANALYSIS_RESULTS` maps each analysis id to the type
  ``ctx.analysis(id)`` gives (:class:`LoopAnalysis`, :class:`Provenance`, :class:`Granularity`,
  :class:`ComputeSpans` of :class:`StepSpan`...), each importable from here.
"""

from __future__ import annotations

# -- declaring a rule ---------------------------------------------------------------------
from dftpass.core.findings import Finding, Severity
from dftpass.core.hookspecs import hookimpl
from dftpass.core.passes import Case, Expect, Pass, PassKind

# -- what the project looks like ----------------------------------------------------------
from dftpass.core.callgraph import Entry, fid
from dftpass.core.loops import LoopFacts, split_of
from dftpass.core.summary import MODULE_SCOPE, CallSite, FileSummary, FunctionSummary, StmtPath
from dftpass.core.values import kind as origin_kind, subject as origin_subject

# -- what the code does: library knowledge and recognisers ---------------------------------
# the collectives of torch.distributed, Horovod and mpi4py (``requires = ("collectives",)``,
# then ``ctx.analysis("collectives")``: a CollectiveSites)
from dftpass.plugins.analyses.collectives import Collective, CollectiveSites
from dftpass.plugins.analyses.compiled import PYTHON_BRIDGES, normalize as normalize_compiler
from dftpass.plugins.analyses.transfers import moves_to_device
from dftpass.plugins.knowledge import (
    CheckpointPlan, HANDLE_NAME, LOSS_NAME, MODEL_NAME, OPENERS, Handles, facts,
    built_by_factory,
    call_chain, calls_at, data_path, dataset_sample_readers, does_io, does_step, evaluated_by_callers, in_compute_span,
    is_dataset_class, loader_datasets_seen,
    evaluates, is_backward, iterable_sample_spans, is_compute_step, is_library_layer, is_model_call, is_optimizer, is_optimizer_step,
    is_top_level_model, MAX_MODEL_CLASSES, model_classes, decoratable_wrapped_classes, per_sample_functions, run_by_loaders, run_inside, sample_readers, sibling,
    step_calls,
    torch_name, trains, unwrappable, model_wrapper, wrapper_name,
)

# -- what dftracer code looks like --------------------------------------------------------
# the module that spells dftracer's API (node paths, environment variables, event
# categories): for what the names below do not cover
from dftpass.core import emitter
from dftpass.core.emitter import (
    GENERIC_DECORATORS, FileNames, aliases, is_derived, is_initialize,
    is_metadata_call, is_node, nesting_rank, recognize, runtime_call,
)
from dftpass.plugins.checks.regions import RULES_THAT_PLACE, module_loggers, region_of, regions_on

# -- edits and placement ------------------------------------------------------------------
from dftpass.core.edits import (
    AddArgument, Decorate, Edit, Enumerate, InsertAfter, InsertBefore, WrapBody, WrapIter, WrapStmt, WrapValue,
)
from dftpass.core.placement import function_region, has_region, needs_body_region, top_level_line

# -- runtime rules (on a traced run) -------------------------------------------------------
from dftpass.analysis.accounting import account, root_problem
from dftpass.analysis.bottleneck import JUDGE_NOT, REMEDIES, STALLED, why_not_judged
from dftpass.analysis.diagnosis import waits_materially
from dftpass.traces.overlap import BELOW_TARGET, CANNOT_JUDGE, NO_OVERLAP

# -- what the analyses return (``ctx.analysis(ID)``; docs/plugins.md, "Analyses") -------------
from dftpass.core.callgraph import CallGraph
from dftpass.core.loops import LoopAnalysis
from dftpass.plugins.analyses.batch_provenance import BatchChain, Provenance
from dftpass.plugins.analyses.compiled import Compiled
from dftpass.plugins.analyses.compute_spans import ComputeSpans, StepSpan
from dftpass.plugins.analyses.cost import Costs
from dftpass.plugins.analyses.diagnosis import Diagnosis
from dftpass.plugins.analyses.frameworks import Detection
from dftpass.plugins.analyses.install import InstallPlan
from dftpass.plugins.analyses.log_safety import LogSafety
from dftpass.plugins.analyses.overhead import Granularity
from dftpass.plugins.analyses.programs import Programs
from dftpass.plugins.analyses.traces import RunAnalysis
from dftpass.plugins.analyses.transfers import Transfers

#: analysis id -> the type ``ctx.analysis(id)`` returns (tests/plugins/test_docs.py holds the
#: docs' table to it)
ANALYSIS_RESULTS = {
    "batch_provenance": Provenance, "callgraph": CallGraph, "checkpoints": CheckpointPlan,
    "collectives": CollectiveSites, "compiled": Compiled, "compute_spans": ComputeSpans, "cost": Costs,
    "diagnosis": Diagnosis, "frameworks": Detection, "install": InstallPlan, "log_safety": LogSafety,
    "loops": LoopAnalysis, "overhead": Granularity, "programs": Programs, "traces": RunAnalysis,
    "transfers": Transfers,
}

__all__ = [
    # what the analyses return
    "ANALYSIS_RESULTS", "BatchChain", "CallGraph", "Compiled", "ComputeSpans", "Costs", "Detection", "Diagnosis",
    "Granularity", "InstallPlan", "LogSafety", "LoopAnalysis", "Programs", "Provenance", "RunAnalysis", "StepSpan",
    "Transfers",
    # declaring a rule
    "Case", "Expect", "Finding", "Pass", "PassKind", "Severity", "hookimpl",
    # the project
    "CallSite", "Entry", "FileSummary", "FunctionSummary", "LoopFacts", "MODULE_SCOPE", "StmtPath", "fid",
    "origin_kind", "origin_subject", "split_of",
    # library knowledge and recognisers
    "CheckpointPlan", "Collective", "CollectiveSites", "HANDLE_NAME", "Handles",
    "LOSS_NAME", "MODEL_NAME", "OPENERS", "facts",
    "PYTHON_BRIDGES", "built_by_factory", "call_chain", "calls_at", "data_path",
    "dataset_sample_readers", "is_dataset_class", "loader_datasets_seen", "does_io", "does_step", "evaluated_by_callers", "evaluates", "in_compute_span", "is_backward", "iterable_sample_spans",
    "is_compute_step", "moves_to_device",
    "is_library_layer", "is_model_call", "is_optimizer", "is_optimizer_step", "is_top_level_model",
    "MAX_MODEL_CLASSES", "model_classes", "decoratable_wrapped_classes", "normalize_compiler", "per_sample_functions", "run_by_loaders", "run_inside", "sample_readers",
    "sibling",
    "step_calls", "torch_name", "trains", "unwrappable", "model_wrapper", "wrapper_name",
    # dftracer code
    "FileNames", "emitter", "GENERIC_DECORATORS", "RULES_THAT_PLACE", "aliases",
    "is_derived", "is_initialize", "is_metadata_call", "is_node", "module_loggers", "nesting_rank", "recognize", "runtime_call",
    "region_of", "regions_on",
    # edits and placement
    "AddArgument", "Decorate", "Edit", "Enumerate", "InsertAfter", "InsertBefore", "WrapBody", "WrapIter", "WrapValue",
    "WrapStmt", "function_region", "has_region", "needs_body_region", "top_level_line",
    # runtime rules
    "BELOW_TARGET", "CANNOT_JUDGE", "JUDGE_NOT", "NO_OVERLAP", "REMEDIES", "STALLED", "account", "root_problem",
    "waits_materially", "why_not_judged",
]
