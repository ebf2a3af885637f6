"""What each loop iterates: batches from a data loader, epochs, or something else.

A *batch loop* iterates a DataLoader or something derived from one: a variable assigned
from ``DataLoader(...)`` (or from a project function that returns one), a parameter that
call sites fill with a loader, a ``self`` attribute assigned a loader, ``iter(loader)``
consumed by ``next()``; seen through ``enumerate``, ``tqdm``, ``zip`` and the like. Names
that read like loaders (``train_loader``, ``val_dl``) count too, because a loader is often
built far from where it is consumed (a config object, another package).

An *epoch loop* is the innermost ``for`` loop that contains a batch loop, directly or
through the functions it calls. "The loop over epochs" is a role, not a name: ``for epoch
in ...`` over a list of files is not one, ``for it in range(n_iters)`` around the batch
loop is.
"""

from __future__ import annotations

import re
from typing import Iterable

import attrs

from dftpass.core.callgraph import CallGraph
from dftpass.core.summary import FileSummary, FunctionSummary, LoopSummary


@attrs.define
class LoopOptions:
    #: names that read like a data loader (matched on the last dotted component)
    loader_name_pattern: str = r"(?i)(^|_)(data_?)?loaders?$|(^|_)dls?$|(^|_)dataloader"
    #: classes/functions whose call returns a loader (matched on the last dotted component)
    loader_factories: list[str] = attrs.field(factory=lambda: [
        "DataLoader", "StatefulDataLoader", "WebLoader", "DALIGenericIterator",
        "DALIClassificationIterator", "MpDeviceLoader", "ParallelLoader",
    ])
    #: calls that pass iteration through unchanged (the loop still iterates what they wrap)
    transparent_wrappers: list[str] = attrs.field(factory=lambda: [
        "enumerate", "tqdm", "iter", "islice", "track", "prefetch", "cycle",
    ])


@attrs.define
class LoopFacts:
    function: str
    loop: LoopSummary
    kind: str  # "batch" | "epoch" | "other"
    subject: str
    reason: str
    #: how many leading ``enumerate(...)`` layers stay outside a wrapper
    wrap_depth: int = 0
    #: an int loop variable usable as ``step`` (the index of an outer ``enumerate``)
    step_var: str | None = None
    #: an int loop variable usable as ``epoch`` (a ``range`` target or an enumerate index)
    int_var: str | None = None
    #: the dftracer node already wrapping the loop's iterable ("dataloader.fetch"), if any
    wrapped_by: str | None = None
    #: "iter": the loop iterates the loader; "next": its body takes ``next(it)`` from one
    style: str = "iter"


def _last(text: str) -> str:
    return text.rstrip("()").rsplit(".", 1)[-1]


@attrs.define
class LoopAnalysis:
    graph: CallGraph
    options: LoopOptions
    recognize: object  # callable(fs, callee) -> node path | None (from the emitter)
    facts: dict[tuple[str, int], LoopFacts] = attrs.field(factory=dict)
    loader_params: dict[str, set[str]] = attrs.field(factory=dict)
    _returns_loader: dict[str, bool] = attrs.field(factory=dict)
    _pattern: re.Pattern | None = None

    # -- loader-ness ----------------------------------------------------------------------
    def _name_looks_like_loader(self, text: str) -> bool:
        if self._pattern is None:
            self._pattern = re.compile(self.options.loader_name_pattern)
        return bool(self._pattern.search(_last(text)))

    def loader_like(self, fs: FileSummary, fn: FunctionSummary, text: str | None,
                    call_args: tuple = (), depth: int = 0) -> bool:
        if not text or depth > 6 or "?" in text:
            return False
        g = self.graph
        if text.endswith("()"):
            callee = text[:-2]
            last = _last(callee)
            if last in self.options.transparent_wrappers:
                return bool(call_args) and self.loader_like(fs, fn, call_args[0], (), depth + 1)
            if _last(g.qualify(fs, callee)) in self.options.loader_factories:
                return True
            target = g._resolve_name(fs, callee)
            if target is None and callee.startswith("self.") and fn.cls:
                target = g.method(f"{fs.relpath}::{fn.cls}", callee[5:]) if callee.count(".") == 1 else None
            if target and target in g.functions and self.returns_loader(target, depth + 1):
                return True
            return "dataloader" in last.lower() or last.lower().endswith("_loader")
        if text.startswith("self.") and fn.cls and text.count(".") == 1:
            for cid in g.mro(f"{fs.relpath}::{fn.cls}"):
                for value in g.classes[cid][1].attr_values.get(text[5:], ()):
                    if value and self.loader_like(fs, fn, value, (), depth + 1):
                        return True
        elif "." not in text:
            for a in fn.assigns:
                if a.target == text and self.loader_like(fs, fn, a.value, a.call_args, depth + 1):
                    return True
            fid = f"{fs.relpath}::{fn.qualname}"
            if text in self.loader_params.get(fid, ()):
                return True
            if not fn.is_module and text not in fn.params:
                for a in fs.module_scope.assigns:
                    if a.target == text and self.loader_like(fs, fs.module_scope, a.value, a.call_args, depth + 1):
                        return True
        return self._name_looks_like_loader(text)

    def returns_loader(self, function_id: str, depth: int = 0) -> bool:
        if function_id in self._returns_loader:
            return self._returns_loader[function_id]
        self._returns_loader[function_id] = False  # cycle guard
        fs, fn = self.graph.functions[function_id]
        result = any(self.loader_like(fs, fn, r, (), depth + 1) for r in fn.returns)
        self._returns_loader[function_id] = result
        return result

    def _propagate_params(self) -> None:
        """Parameters that call sites fill with loaders, to a fixed point (bounded)."""
        g = self.graph
        for _ in range(4):
            changed = False
            for (caller, i), callee in g.resolved.items():
                fs, fn = g.functions[caller]
                call = fn.calls[i]
                target_fn = g.fn(callee)
                offset = 1 if target_fn.cls and target_fn.positional[:1] in (("self",), ("cls",)) \
                    and "staticmethod" not in target_fn.decorators else 0
                params = self.loader_params.setdefault(callee, set())
                for j, arg in enumerate(call.args):
                    k = j + offset
                    if k < len(target_fn.positional) and target_fn.positional[k] not in params \
                            and self.loader_like(fs, fn, arg):
                        params.add(target_fn.positional[k])
                        changed = True
                for name, arg in call.keywords:
                    if name in target_fn.params and name not in params and self.loader_like(fs, fn, arg):
                        params.add(name)
                        changed = True
            if not changed:
                break

    # -- classification -----------------------------------------------------------------
    def _classify(self, function_id: str, fs: FileSummary, fn: FunctionSummary, loop: LoopSummary) -> LoopFacts:
        facts = LoopFacts(function_id, loop, "other", loop.iter_text, "")
        for _, arg in loop.next_calls:
            if self.loader_like(fs, fn, arg):
                facts.kind, facts.style = "batch", "next"
                facts.subject, facts.reason = arg or "", f"takes next({arg}) from a data loader"
        if loop.kind == "while" or facts.kind == "batch":
            return facts
        layers = loop.layers
        wrapped = None
        depth = 0
        while depth < len(layers) and _last(layers[depth].callee) == "enumerate":
            depth += 1
        facts.wrap_depth = depth
        if depth and loop.first_target:
            facts.step_var = loop.first_target
        k = depth
        while k < len(layers):
            node = self.recognize(fs, layers[k].callee)
            if node:
                wrapped = wrapped or node.rsplit(".", 1)[0]
            elif _last(layers[k].callee) not in self.options.transparent_wrappers:
                break
            k += 1
        facts.wrapped_by = wrapped
        if k < len(layers):
            layer = layers[k]
            if _last(layer.callee) == "zip":
                loader = any(self.loader_like(fs, fn, a) for a in layer.args)
                facts.subject = f"zip({', '.join(a or '?' for a in layer.args)})"
            else:
                loader = self.loader_like(fs, fn, layer.callee + "()", layer.args)
                facts.subject = layer.callee + "(...)"
        else:
            loader = self.loader_like(fs, fn, loop.core)
            facts.subject = loop.core or loop.iter_text
        if wrapped == "dataloader.fetch":
            loader = True
        if loader:
            facts.kind, facts.reason = "batch", f"iterates {facts.subject}, a data loader"
        callees = [_last(layer.callee) for layer in layers]
        if "range" in callees or "trange" in callees:
            facts.int_var = loop.first_target if depth else loop.single_target
        elif depth:
            facts.int_var = loop.first_target
        return facts

    def run(self) -> "LoopAnalysis":
        self._propagate_params()
        g = self.graph
        for function_id, (fs, fn) in g.functions.items():
            for loop in fn.loops:
                self.facts[(function_id, loop.index)] = self._classify(function_id, fs, fn, loop)
        self._mark_epochs()
        return self

    # -- epochs ----------------------------------------------------------------------------
    def _loop_descendants(self, fn: FunctionSummary, index: int) -> list[int]:
        out = []
        for loop in fn.loops:
            p = loop.parent
            while p is not None:
                if p == index:
                    out.append(loop.index)
                    break
                p = fn.loops[p].parent
        return out

    def _calls_in_loop(self, function_id: str, index: int) -> Iterable[str]:
        for call, target in self.graph.calls_with_targets(function_id):
            if target and index in call.loops:
                yield target

    def _functions_reaching(self, targets: set[str]) -> set[str]:
        """``targets`` and every function that calls one of them, directly or not."""
        reach = set(targets)
        frontier = list(targets)
        while frontier:
            node = frontier.pop()
            for caller in self.graph.callers(node):
                if caller not in reach:
                    reach.add(caller)
                    frontier.append(caller)
        return reach

    def _loop_reaches(self, function_id: str, index: int, loops: set[tuple[str, int]],
                      functions: set[str]) -> bool:
        """Whether loop ``index`` contains one of ``loops``, or calls into ``functions``."""
        fn = self.graph.fn(function_id)
        if any((function_id, d) in loops for d in self._loop_descendants(fn, index)):
            return True
        return any(t in functions for t in self._calls_in_loop(function_id, index))

    def _mark_epochs(self) -> None:
        batch = {k for k, f in self.facts.items() if f.kind == "batch"}
        reach_batch = self._functions_reaching({fid for fid, _ in batch})
        candidates = {
            (function_id, index) for (function_id, index), f in self.facts.items()
            if f.kind == "other" and f.loop.kind == "for"
            and self._loop_reaches(function_id, index, batch, reach_batch)
        }
        # innermost only: a loop that reaches another candidate is around the epoch loop
        for key in sorted(candidates):
            function_id, index = key
            others = candidates - {key}
            reach_others = self._functions_reaching({fid for fid, _ in others})
            if not self._loop_reaches(function_id, index, others, reach_others):
                facts = self.facts[key]
                facts.kind = "epoch"
                facts.reason = "the innermost loop around a batch loop"

    # -- queries -----------------------------------------------------------------------------
    def loops_of(self, function_id: str) -> list[LoopFacts]:
        fn = self.graph.fn(function_id)
        return [self.facts[(function_id, lp.index)] for lp in fn.loops]

    def of_kind(self, kind: str) -> list[LoopFacts]:
        return [f for f in self.facts.values() if f.kind == kind]

    def enclosing(self, facts: LoopFacts, kind: str) -> LoopFacts | None:
        """The nearest enclosing loop of ``kind`` in the same function."""
        fn = self.graph.fn(facts.function)
        p = facts.loop.parent
        while p is not None:
            f = self.facts[(facts.function, p)]
            if f.kind == kind:
                return f
            p = fn.loops[p].parent
        return None
