"""The ``log_safety`` analysis: whether ``dft_fn.log`` can decorate a function without raising.

With tracing on, ``dft_fn.log`` converts the function's arguments named ``epoch``, ``step``,
``image_idx`` and ``image_size`` to numbers on every call, and the same attributes of
``self`` (dftracer-api.md, hazards): ``None``, a string or a method there raises in the
user's code. One question, one answer: ML-R19 asks it before it places ``@dlp.log``, ML-R22
asks it of every ``dft_fn`` decorator in the project, written by hand or by dftpass, so a
region dftpass places is never one its check rejects.

A function is safe when, for each such parameter, its default (if any) is a number and no
call in the project passes ``None``, a string or a container; and when its class (with its
bases and subclasses) has no method of such a name, assigns such an attribute only numbers,
and is not one of the library classes whose ``step``/``epoch`` is a method or a state
(:data:`MAGIC_BASES`). A value dftpass cannot see (a name, an expression) counts as a number:
the program computes it.
"""

from __future__ import annotations

import attrs

from dftpass.core.callgraph import CallGraph
from dftpass.core.emitter import DFT_FN_MAGIC_NAMES
from dftpass.core.passes import Pass, PassKind
from dftpass.core.summary import FunctionSummary

#: library bases whose instances have a ``step`` or ``epoch`` that is not a number
MAGIC_BASES = ("Optimizer", "LRScheduler", "_LRScheduler", "ReduceLROnPlateau", "GradScaler")
#: values that are never numbers: ``int()`` of them raises inside ``dft_fn.log``
NOT_NUMBERS = ("<none>", "<str>", "<list>", "<tuple>", "<dict>", "<set>", "<lambda>", "<generator>")
#: calls whose result is a number
NUMBER_CALLS = ("int()", "len()", "round()", "float()", "abs()", "min()", "max()", "sum()")


def numeric(value: str | None) -> bool:
    """Whether ``dft_fn.log`` can take this value (the text of an expression) as a number:
    a numeric literal, a name or attribute the program computes (a counter, a parameter), a
    compound expression (arithmetic: its text is None), a call known to give a number. Not
    ``None``, a string or a container literal, nor another call's result."""
    if value is None:
        return True
    if value in NOT_NUMBERS or value[:1] in "'\"":
        return False
    if value.endswith("()"):
        return value.rsplit(".", 1)[-1] in NUMBER_CALLS or value.startswith("math.")
    return True


def _number_text(text: str | None) -> bool:
    return bool(text) and text.lstrip("-").replace(".", "", 1).isdigit()


def _shown(value: str) -> str:
    return {"<none>": "None", "<str>": "a string"}.get(value, value.strip("<>") if value.startswith("<") else value)


@attrs.define
class LogSafety:
    """function id -> why ``dft_fn.log`` would raise there (None: it is safe)."""

    graph: CallGraph
    _cache: dict[str, str | None] = attrs.field(factory=dict)

    def unsafe(self, function_id: str) -> str | None:
        """Why ``dft_fn.log`` on this function would raise with tracing on, or None."""
        if function_id not in self._cache:
            self._cache[function_id] = self._parameters(function_id) or self._instance(function_id)
        return self._cache[function_id]

    def safe(self, function_id: str) -> bool:
        return self.unsafe(function_id) is None

    def _parameters(self, function_id: str) -> str | None:
        """A default or an argument of a call in the project that is not a number. A default
        replaces the value a caller leaves out, so it must be a number too."""
        graph = self.graph
        fn: FunctionSummary = graph.fn(function_id)
        magic = sorted(set(fn.params) & set(DFT_FN_MAGIC_NAMES))
        for name in magic:
            default = fn.defaults.get(name)
            if name in fn.defaults and default != "<number>" and not _number_text(default):
                return f"its parameter {name} defaults to {_shown(default or 'a value that is not a number')}"
        bound = graph.is_bound_method(function_id)
        for caller, call in graph.call_sites_of(function_id):
            for name in magic:
                position = fn.positional.index(name) - (1 if bound else 0) if name in fn.positional else None
                passed = dict(call.keywords).get(name, call.args[position] if position is not None and
                                                 0 <= position < len(call.args) else "")
                if name in call.nones or position in call.nones or not numeric(passed):
                    what = "None" if name in call.nones or position in call.nones else _shown(passed or "")
                    where = f"{graph.fn(caller).qualname} (line {call.line})"
                    return f"{where} passes {what or 'a value that is not a number'} as its parameter {name}"
        return None

    def _instance(self, function_id: str) -> str | None:
        """A ``self`` whose ``step``/``epoch``/... is a method, not a number, or a state."""
        graph = self.graph
        fn = graph.fn(function_id)
        if not fn.cls:
            return None
        class_id = f"{graph.file_of(function_id).relpath}::{fn.cls}"
        if class_id not in graph.classes:
            return None
        for cid in sorted({*graph.mro(class_id), *graph.subclasses(class_id)}):
            if cid not in graph.classes:
                continue
            _, cs = graph.classes[cid]
            methods = sorted(set(cs.methods) & set(DFT_FN_MAGIC_NAMES))
            if methods:
                return f"{cs.qualname}.{methods[0]} is a method, and dft_fn.log reads self.{methods[0]} as a number"
            for name in sorted(set(cs.attr_values) & set(DFT_FN_MAGIC_NAMES)):
                wrong = [v for v in cs.attr_values[name] if not numeric(v)]
                if wrong:
                    return f"{cs.qualname} sets self.{name} to {_shown(wrong[0])}, which dft_fn.log reads as a number"
        base = next((b for b in graph.external_bases(class_id) if b.rsplit(".", 1)[-1] in MAGIC_BASES), None)
        if base is not None:
            return f"its class is a {base.rsplit('.', 1)[-1]}, whose step/epoch dft_fn.log cannot read as a number"
        return None


class LogSafetyAnalysis(Pass):
    """Whether ``dft_fn.log`` is safe on each function (``ctx.analysis("log_safety")``)."""

    id = "log_safety"
    title = "dft_fn.log safety"
    kind = PassKind.ANALYSIS
    requires = ("callgraph",)

    def run(self, ctx) -> LogSafety:
        return LogSafety(ctx.analysis("callgraph"))
