"""The ``programs`` analysis: which entries start a training (or evaluation) program, and
whether the project is a program at all or a library.

Every entry the call graph finds (``__main__`` blocks, module-level scripts, console
scripts, process targets) is a way a process starts. Its *role* comes from what that
process can run (:meth:`CallGraph.program_reach`, plus what it spawns):

* ``train``: a backward pass, an optimizer step, a framework's ``fit``, or a batch loop
  over the training split that runs a step;
* ``evaluate``: a batch loop, or a framework's ``validate``/``test``;
* ``other``: nothing of the kind (data preparation, a smoke test that builds a model,
  a configuration query).

(Importing a module runs its top level, which only defines things in nearly every project:
the role counts what the entry calls, not what it imports.) The entries that train or
evaluate are the ones dftpass instruments (``project.entries``
chooses them by hand). A project where no entry trains or evaluates is a *library*
(keras, transformers): it gets no AI regions on its internals unless ``project.kind``
says ``program``.
"""

from __future__ import annotations

import attrs

from dftpass.core.callgraph import CallGraph, Entry
from dftpass.core.loops import LoopAnalysis
from dftpass.core.passes import Pass, PassKind
from dftpass.core.project import glob_match
from dftpass.plugins.knowledge import framework_phase, is_backward, is_optimizer_step, run_by_loaders

ROLES = ("train", "evaluate", "other")


@attrs.define
class Program:
    entry: Entry
    role: str
    #: what in the program's reach decided the role (a function id), or why none
    evidence: str
    instrumented: bool = False


@attrs.define
class Programs:
    programs: list[Program]
    #: "program" | "library"
    kind: str
    reason: str
    _reach: dict[str, set[str]] = attrs.field(factory=dict)
    #: why the instrumented programs' reach is not complete (they build objects by name:
    #: ``hydra.utils.instantiate`` at a line), or None when it is
    open_reach: str | None = None
    #: the methods of the project's classes (what dynamic construction may run), when the reach is open
    _methods: frozenset[str] = frozenset()

    def instrumented(self) -> list[Program]:
        return [p for p in self.programs if p.instrumented]

    def reach(self, entry: Entry) -> set[str]:
        return self._reach.get(entry.key, set())

    def untraced(self) -> set[str]:
        """The functions that only programs training nothing run (an export, a conversion, a
        plotting script): dftpass puts no region there, since nothing traces them. Empty when
        no program is instrumented (a library, a snippet: the rules decide alone). When what
        the instrumented programs run is not known in full (:attr:`open_reach`), absence from
        their reach is no evidence for a class's methods (issue 39: a LightningModule that
        ``hydra.utils.instantiate`` builds, whose file's smoke-test block builds it too): only
        plain functions stay out."""
        traced: set[str] = set()
        others: set[str] = set()
        for p in self.programs:
            (traced if p.instrumented else others).update(self.reach(p.entry))
        if not traced:
            return set()
        if self.open_reach:
            # objects built by name run their classes' methods, whoever else builds them; a
            # sampling script's own functions are still only its own
            return others - traced - self._methods
        return others - traced

    def to_dict(self) -> dict:
        return {"kind": self.kind, "reason": self.reason, "entries": [
            {"kind": p.entry.kind, "path": p.entry.relpath, "line": p.entry.line, "function": p.entry.function,
             "name": p.entry.name, "role": p.role, "evidence": p.evidence, "instrumented": p.instrumented}
            for p in self.programs]}


def _evidence(graph: CallGraph, loops: LoopAnalysis, function_id: str) -> str | None:
    """"train" / "evaluate" if the function itself shows that role, else None."""
    fs, fn = graph.functions[function_id]
    role = None
    for call in fn.calls:
        phase = framework_phase(call, graph)
        if is_backward(call, graph, fs) or is_optimizer_step(graph, fs, fn, call) or phase == "train":
            return "train"
        if phase:
            role = "evaluate"
    for facts in loops.loops_of(function_id):
        if facts.kind == "batch":
            inside = loops.loop_and_descendants(function_id, facts.loop.index)
            steps = loops.does_step(function_id, inside)
            if facts.split == "train" and steps:
                return "train"
            # a loop over a loader whose body runs nothing of the project's (a script comparing
            # two loaders batch by batch, dlrm's ``_test_bin``) says nothing of the program's role
            runs_project = any(set(call.loops) & inside and any(not t.endswith(".__init__") for t in targets)
                               for call, targets in graph.calls_with_targets(function_id))
            if steps or runs_project or facts.by_flow or facts.anchored:
                role = "evaluate"
    return role


def classify(graph: CallGraph, loops: LoopAnalysis, entry_globs: list[str], kind_setting: str) -> Programs:
    reach: dict[str, set[str]] = {}
    spawned: dict[str, set[str]] = {}
    for caller, _, target in graph.spawns:
        spawned.setdefault(caller, set()).add(target)
    by_function = {e.function: e for e in graph.entries if e.kind == "process-target"}
    # what a program *runs*: not the top levels of the modules it imports (in a library such
    # as torch, importing the package reaches nearly everything), which only define things
    runs = {}
    for entry in graph.entries:
        reach[entry.key] = graph.program_reach(entry)
        runs[entry.key] = graph.program_reach(entry, imports=False)
    evidence_cache: dict[str, str | None] = {}

    def role_of(entry: Entry, seen: set[str]) -> tuple[str, str]:
        best, why = "other", "no batch loop, backward pass or optimizer step in what it runs"
        for function_id in sorted(runs[entry.key]):
            if function_id not in evidence_cache:
                evidence_cache[function_id] = _evidence(graph, loops, function_id)
            found = evidence_cache[function_id]
            if found and ROLES.index(found) < ROLES.index(best):
                best, why = found, function_id
            for target in spawned.get(function_id, ()):  # a launcher is what it launches
                child = by_function.get(target)
                if child is not None and child.key not in seen:
                    role, child_why = role_of(child, seen | {child.key})
                    if ROLES.index(role) < ROLES.index(best):
                        best, why = role, child_why
        return best, why

    programs = []
    for entry in graph.entries:
        role, why = role_of(entry, {entry.key})
        programs.append(Program(entry, role, why))
    for p in programs:
        if entry_globs:
            e = p.entry
            names = {e.relpath, e.name, e.function or "", (e.function or "").rsplit("::", 1)[-1]}
            p.instrumented = any(n and glob_match(n, entry_globs) for n in names)
        else:
            p.instrumented = p.role != "other"
    if kind_setting in ("program", "library"):
        kind, reason = kind_setting, "set by project.kind"
    elif any(p.role != "other" for p in programs) or (entry_globs and any(p.instrumented for p in programs)):
        kind, reason = "program", "an entry runs training or evaluation"
    elif programs:
        kind, reason = "library", (f"none of its {len(programs)} entries runs a training or evaluation loop")
    else:
        kind, reason = "library", ("no program entry (no `if __name__ == \"__main__\":` block, module-level "
                                   "script, console script or process target)")
    traced = [p for p in programs if p.instrumented]
    for p in traced:
        # what loaders run on the program's behalf (its data sets' protocol methods, the
        # collate functions it hands them, also through a variable) is the program's too
        reach[p.entry.key] = reach[p.entry.key] | run_by_loaders(graph, reach[p.entry.key])
    open_reach = next((why for p in traced for why in [_dynamic_construction(graph, runs[p.entry.key])] if why),
                      None)
    methods = frozenset(f for f in graph.functions if graph.class_of_method(f) is not None) if open_reach \
        else frozenset()
    return Programs(programs, kind, reason, reach, open_reach, methods)


#: calls that build or look up code by a name the call graph cannot see (qualified, or last name)
DYNAMIC_CALLS = ("hydra.utils.instantiate", "hydra.utils.call", "hydra.utils.get_class", "hydra.utils.get_method",
                 "hydra.utils.get_object", "importlib.import_module", "__import__", "importlib.metadata.entry_points",
                 "pkg_resources.iter_entry_points", "pkg_resources.load_entry_point", "instantiate",
                 "import_module", "locate", "pydoc.locate")


def _dynamic_construction(graph: CallGraph, functions: set[str]) -> str | None:
    """The first call in ``functions`` that builds objects by name (``hydra.utils.instantiate``,
    ``importlib.import_module``, ``getattr(module, name)``, a registry ``MODELS[name](...)``),
    as "<call> at <file>:<line>"; None when there is none."""
    for function_id in sorted(functions):
        if function_id not in graph.functions:
            continue
        fs, fn = graph.functions[function_id]
        for index, call in enumerate(fn.calls):
            qualified = graph.qualify(fs, call.callee)
            last = qualified.rsplit(".", 1)[-1]
            dynamic = qualified in DYNAMIC_CALLS or last in DYNAMIC_CALLS and not graph.targets(function_id, index)
            if call.callee == "getattr" and len(call.args) >= 2 and not (call.args[1] or "").startswith(("'", '"')):
                dynamic = True
            if call.callee.endswith("[]"):
                dynamic = True  # ``MODELS[name](...)``: a registry of classes
            if dynamic:
                return f"{call.callee}() at {fs.relpath}:{call.line}"
    return None


class ProgramsAnalysis(Pass):
    """Program entries, what each runs (train / evaluate / other), and program vs library."""

    id = "programs"
    title = "Programs and entries"
    kind = PassKind.ANALYSIS
    requires = ("callgraph", "loops")

    def run(self, ctx) -> Programs:
        return classify(ctx.analysis("callgraph"), ctx.analysis("loops"), list(ctx.config.get("project.entries")),
                        ctx.config.get("project.kind"))
