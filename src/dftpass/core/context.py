"""The run context: what one ``dftpass`` run shares between its passes.

Passes receive a :class:`RunContext` and use four things from it:

* ``ctx.analysis(ID)``: the result of an analysis pass, computed on first use and cached
  for the run (LLVM's new pass manager does the same);
* ``ctx.names(relpath)``: the names dftpass's code uses in one file (from the emitter);
* ``ctx.add_edit(relpath, edit)``: queue an edit; ``ctx.report(finding)``: say something;
* ``ctx.project`` / ``ctx.config``: the files and the resolved configuration.

Edits and findings of a rule that the configuration switches off for a path
(``rules.per-path``) are dropped here, so rules never check the configuration themselves.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import attrs

from dftpass.core.config import Config
from dftpass.core.edits import Edit, EditSet, edit_target
from dftpass.core.emitter import FileNames
from dftpass.core.errors import PluginError
from dftpass.core.findings import Finding, Severity
from dftpass.core.nesting import RegionIndex, STOP_OF_REFUSED
from dftpass.core.project import Project

class Manager(Protocol):
    """What a run reads of its pass manager (:class:`dftpass.core.manager.PassManager`, which
    makes the run context): declared here so that this module does not import the manager."""

    registry: dict[str, Any]
    provider: dict[str, str]
    selection: Any

    def declared(self, pass_id: str) -> frozenset[str]: ...

    def instance(self, pass_id: str) -> Any: ...

    def runs_after(self, later: str, earlier: str) -> bool: ...

    def precedence(self, winner: str, loser: str) -> str: ...

    def run_guarded(self, pass_id: str, run) -> Any: ...


@attrs.define
class PassFailure:
    """A pass that raised and was skipped (``plugins.strict`` off): which, whose, and why."""

    #: the rule that was skipped
    rule: str
    #: the pass that raised: the rule itself, or an analysis it asked for
    failed: str
    plugin: str
    distribution: str
    error: str
    traceback: str

    def line(self) -> str:
        """The one line a command prints, after the rule's id."""
        if self.failed == self.rule:
            return (f"raised and was skipped, its edits dropped (plugin {self.plugin!r}, {self.distribution}): "
                    f"{self.error}")
        return (f"skipped: the analysis {self.failed} it needs (plugin {self.plugin!r}, {self.distribution}) "
                f"raised: {self.error}")


@attrs.define
class PassTiming:
    pass_id: str
    seconds: float
    status: str = "ran"  # ran | skipped: <why>


@attrs.define
class RunContext:
    config: Config
    project: Project
    manager: Manager
    #: "plan" | "run" | "validate" | "analyze"
    mode: str = "plan"
    #: for ``analyze``: the run being analysed (:class:`dftpass.runs.layout.RunDir`) and how
    #: to read its traces (engine, jobs, scheduler address, bucket width)
    run: Any = None
    trace_options: dict[str, Any] = attrs.field(factory=dict)
    findings: list[Finding] = attrs.field(factory=list)
    edit_sets: dict[str, EditSet] = attrs.field(factory=dict)
    timings: list[PassTiming] = attrs.field(factory=list)
    _names: dict[str, FileNames] = attrs.field(factory=dict)
    _cache: dict[str, Any] = attrs.field(factory=dict)
    _computing: list[str] = attrs.field(factory=list)
    #: the rule running now (None outside a rule: the manager's gates, the commands)
    running: str | None = None
    #: the passes that raised and were skipped (:meth:`fail`)
    failures: list[PassFailure] = attrs.field(factory=list)
    #: analyses that raised: asked again, they raise again at once (each rule that needs one fails)
    _failed: dict[str, Exception] = attrs.field(factory=dict)
    #: per file, the regions the queued edits open (no node opens inside itself: core/nesting.py)
    _regions: dict[str, RegionIndex] = attrs.field(factory=dict)

    # -- analyses ------------------------------------------------------------------------
    def analysis(self, pass_id: str) -> Any:
        """The cached result of analysis ``pass_id``, computed now if needed. A pass may ask
        only for what it declares in ``requires`` (directly or through the analyses it
        requires): what a rule reads is then visible in its declaration, and the pipeline
        computes it first."""
        asking = self._computing[-1] if self._computing else self.running
        if asking is not None and pass_id not in self.manager.declared(asking):
            raise PluginError(f"pass {asking} (plugin {self.manager.provider.get(asking, '?')!r}) asked for "
                              f"analysis {pass_id!r}, which it does not declare: add it to `requires`")
        return self._compute(pass_id)

    def cached(self, pass_id: str) -> Any:
        """The result of analysis ``pass_id`` if a pass asked for it in this run, else None."""
        return self._cache.get(pass_id)

    def _compute(self, pass_id: str) -> Any:
        """The analysis, for the engine itself (edits and gates ask without a declaration)."""
        if pass_id in self._cache:
            return self._cache[pass_id]
        if pass_id in self._failed:
            raise self._failed[pass_id]
        if pass_id in self._computing:
            chain = " -> ".join([*self._computing, pass_id])
            raise RuntimeError(f"analysis cycle: {chain}")
        instance = self.manager.instance(pass_id)
        self._computing.append(pass_id)
        start = time.perf_counter()
        try:
            result = self.manager.run_guarded(pass_id, lambda: instance.run(self))
        except Exception as exc:
            self._failed[pass_id] = exc
            raise
        finally:
            self._computing.pop()
        self.timings.append(PassTiming(pass_id, time.perf_counter() - start))
        self._cache[pass_id] = result
        return result

    def fail(self, rule: str, exc: Exception, distribution: str) -> None:
        """Rule ``rule`` raised (or an analysis it asked for did): drop the edits it queued and
        record why, for the one line the command prints and ``--format json``."""
        import traceback

        for edit_set in self.edit_sets.values():
            edit_set.discard_rule(rule)
        for index in self._regions.values():
            index.forget_rule(rule)
        failed = getattr(exc, "pass_id", None) or rule
        cause = exc.__cause__ or exc
        plugin = getattr(exc, "plugin", None) or "?"
        self.failures.append(PassFailure(rule, failed, plugin, distribution, f"{type(cause).__name__}: {cause}",
                                         "".join(traceback.format_exception(cause))))

    def covered(self, relpath: str, stmt, node: str) -> str | None:
        """The rule whose queued region of ``node`` (``"checkpoint.capture"``) already holds the
        statement ``stmt`` of file ``relpath``, in any form (a decorator on its function, a
        ``with`` or ``start()``/``stop()`` around it, a loop wrapped in ``.iter``); None if no
        rule's does. The public way for a rule to coordinate with the rules before it (declare
        ``after`` on them): ask before placing, rather than be refused."""
        index = self._regions.get(relpath)
        found = index.covering(node, stmt) if index is not None else None
        return found.rule if found is not None else None

    def _fit_statements(self, relpath: str, stmt) -> list:
        """The statement that hands a callback over, and the later statements of its block
        that call a framework's ``fit``: where the callback's regions open."""
        block, (field, index) = stmt[:-1], stmt[-1]
        out = [stmt]
        for fn in self.summary(relpath).functions:
            for call in fn.calls:
                at = call.stmt
                if call.method in ("fit", "fit_generator") and len(at) > len(block) and at[:len(block)] == block \
                        and at[len(block)][0] == field and at[len(block)][1] > index:
                    out.append(at[:len(block) + 1])
        return list(dict.fromkeys(out))

    # -- per-file --------------------------------------------------------------------------
    def summary(self, relpath: str):
        return self.project.files[relpath].summary

    def names(self, relpath: str) -> FileNames:
        if relpath not in self._names:
            self._names[relpath] = FileNames(self.summary(relpath))
        return self._names[relpath]

    def rule_enabled_for(self, rule_id: str, relpath: str) -> bool:
        """The global selection, adjusted by every ``rules.per-path`` override matching ``relpath``."""
        return self.manager.selection.enabled_for(rule_id, relpath)

    def add_edit(self, relpath: str, edit: Edit) -> bool:
        """Queue ``edit``; False when it is dropped: its rule is off for the path, or it
        would put a region on or inside a function that a compiler runs instead of Python
        (the ``compiled`` analysis: ``jax.jit``, ``tf.function``, numba, ...), which would
        time the tracing, not the runs (a note says so; the caller is the place)."""
        if not self.rule_enabled_for(edit.rule, relpath):
            return False
        if self.mode != "analyze" and "programs" in self.manager.registry and self._untraced(relpath, edit):
            self.report(Finding(edit.rule, f"not placed: {edit.why}: only programs that train and evaluate nothing "
                                "run this code (an export, a conversion, a plot), and nothing traces them",
                                relpath, edit.line, severity=Severity.INFO))
            return False
        if self.mode != "analyze" and "compiled" in self.manager.registry:
            compiler = self._compute("compiled").enclosing(relpath, edit_target(edit))
            if compiler is not None:
                self.report(Finding(edit.rule, f"not placed: {edit.why}: the code is compiled by {compiler}, which "
                                    "runs its Python body only while tracing; the region belongs around the "
                                    "Python call of the compiled function", relpath, edit.line,
                                    severity=Severity.INFO))
                return False
        edit_set = self.edit_sets.setdefault(relpath, EditSet(relpath))
        if edit not in edit_set and edit_set.holder(edit) is None:
            outer = self._regions.setdefault(relpath, RegionIndex()).refuse(
                edit, self.names(relpath).alias("ai"), lambda stmt: self._fit_statements(relpath, stmt))
            if outer is not None:
                # the same node inside itself keeps only the inner event: whatever the forms
                if self.mode != "validate" and outer.form != STOP_OF_REFUSED:
                    self.report(Finding(edit.rule, f"not placed: {edit.why}: it would open {outer.node} inside "
                                        f"(or around) the {outer.form} region {outer.rule} places at line "
                                        f"{outer.line} (the node is not re-entrant)", relpath, edit.line,
                                        severity=Severity.WARNING if edit.rule != outer.rule else Severity.INFO))
                return False
        if edit_set.add(edit):
            return True
        winner = edit_set.holder(edit)
        if winner is not None and self.mode != "validate":
            # an order that only the ids decide is a rule writer's to fix: said at default verbosity
            declared = self.manager.runs_after(edit.rule, winner)
            self.report(Finding(edit.rule, f"not placed: {edit.why}: {winner} places the same region there "
                                f"({self.manager.precedence(winner, edit.rule)})", relpath, edit.line,
                                severity=Severity.INFO if declared else Severity.WARNING))
        return False

    def _untraced(self, relpath: str, edit: Edit) -> bool:
        """Whether the edit lands in code only untraced programs run (the programs analysis)."""
        if "untraced" not in self._cache:
            graph = self._compute("callgraph")
            untraced = self._compute("programs").untraced()
            index: dict[str, list[tuple[tuple, bool]]] = {}
            for function_id, (fs, fn) in graph.functions.items():
                index.setdefault(fs.relpath, []).append((fn.stmt, function_id in untraced))
            self._cache["untraced"] = index
        target = edit_target(edit)
        # the innermost function holding the edit decides (a module's scope holds every
        # statement of its file, its classes' methods included: those have their own say)
        holders = [(len(stmt), dropped) for stmt, dropped in self._cache["untraced"].get(relpath, ())
                   if target[:len(stmt)] == stmt]
        return max(holders)[1] if holders else False

    def starts_tracing(self, relpath: str) -> None:
        """Say that the file starts tracing: the edits planned for it initialize dftracer, so
        it runs first in its process (an entry). It gets the import prelude; no other file
        does."""
        self.edit_sets.setdefault(relpath, EditSet(relpath)).starts_tracing = True

    def report(self, finding: Finding) -> None:
        if finding.path and not self.rule_enabled_for(finding.rule, finding.path) \
                and finding.rule in self.manager.registry:
            return
        self.findings.append(finding)
