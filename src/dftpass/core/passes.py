"""The pass contract: what every pass (analysis, rule, runtime step) declares and does.

A pass is a small class. The manager instantiates it once per run with its options and
calls ``run(ctx)``. Everything a pass needs from the project comes through ``ctx``
(:class:`dftpass.core.context.RunContext`): cached analyses, the per-file edit sets,
the findings list. Nothing in a pass should read files or parse code itself.
"""

from __future__ import annotations

import enum
import inspect
import re
from typing import Any, ClassVar

import attrs


class PassKind(str, enum.Enum):
    ANALYSIS = "analysis"  # computes a cached result other passes ask for (ctx.analysis(id))
    TRANSFORM = "transform"  # queues edits; also reports, in `validate`, what is still missing
    CHECK = "check"  # only reports findings
    RUNTIME = "runtime"  # acts on a traced run
    REPORT = "report"  # renders results


@attrs.define
class NoOptions:
    """A pass without options."""


@attrs.frozen
class Expect:
    """A finding a :class:`Case` must produce: its severity (``"error"``, ``"warning"``,
    ``"info"``), a fragment of its message, and optionally the rule (default: the case's own
    rule) and the line of ``before`` it is reported on."""

    severity: str
    message: str
    rule: str | None = None
    line: int | None = None


@attrs.frozen
class Case:
    """One example of a rule, used as documentation (``dftpass explain``) and as a test.

    ``before`` is a small program. For a VALID case the rule must leave it unchanged; for an
    INVALID case the rule alone must turn it into ``after`` (the import block included),
    and running the rule again on ``after`` must change nothing. ``files`` adds more files
    to the throwaway project (path -> source); ``path`` is where ``before`` goes.

    ``findings`` are the warnings and errors the rule must report on the case (each an
    :class:`Expect`); a warning or error of the rule that is not listed fails the case, and
    so do the notes (``info``) listed but not reported.
    """

    before: str
    after: str | None = None
    path: str = "train.py"
    files: dict[str, str] = attrs.field(factory=dict)
    options: dict[str, Any] = attrs.field(factory=dict)
    findings: tuple[Expect, ...] = ()


class Pass:
    """Base class of every pass. Subclasses set the class attributes and implement ``run``.

    The docstring of a rule is its user documentation, in the sections
    ``What it does``, ``Why``, ``Example``, ``Fix safety`` and ``Options``.
    """

    id: ClassVar[str] = ""
    title: ClassVar[str] = ""
    kind: ClassVar[PassKind] = PassKind.CHECK
    #: ids of passes that must be in the pipeline and run first (an error if absent)
    requires: ClassVar[tuple[str, ...]] = ()
    #: ids of passes that, when present, run first (no error if absent)
    after: ClassVar[tuple[str, ...]] = ()
    #: run only when one of these was detected ("pytorch", "distributed", ...); empty = always
    frameworks: ClassVar[tuple[str, ...]] = ()
    default_enabled: ClassVar[bool] = True
    #: a transform pass that also runs on a library (its own logic decides what to touch);
    #: others do not run when the project has no training or evaluation entry
    runs_on_libraries: ClassVar[bool] = False
    #: free-form tags users can select rules by (``--select tag:compute``)
    tags: ClassVar[tuple[str, ...]] = ()
    #: an attrs class whose fields are the pass's options
    Options: ClassVar[type] = NoOptions
    VALID: ClassVar[list[Case | str]] = []
    INVALID: ClassVar[list[Case]] = []

    def __init__(self, options: Any = None) -> None:
        self.options = options if options is not None else self.Options()

    def run(self, ctx: Any) -> Any:  # pragma: no cover - abstract
        raise NotImplementedError(f"{type(self).__name__}.run")

    # -- documentation -------------------------------------------------------------
    @classmethod
    def doc(cls) -> str:
        return inspect.cleandoc(cls.__doc__ or "")

    @classmethod
    def summary(cls) -> str:
        return cls.doc().split("\n\n", 1)[0].replace("\n", " ")

    @classmethod
    def doc_sections(cls) -> dict[str, str]:
        """The docstring split at its section headers (``What it does:`` ...)."""
        sections: dict[str, str] = {}
        current = "summary"
        for line in cls.doc().splitlines():
            m = re.match(r"^(What it does|Why|Example|Fix safety|Options):\s*$", line)
            if m:
                current = m.group(1)
                sections[current] = ""
                continue
            sections[current] = (sections.get(current, "") + line + "\n").lstrip("\n")
        return {k: v.rstrip() for k, v in sections.items()}

    @classmethod
    def is_rule(cls) -> bool:
        """Rules are the passes users select and switch off: transforms and checks on the
        source, runtime checks on a traced run."""
        return cls.kind in (PassKind.TRANSFORM, PassKind.CHECK, PassKind.RUNTIME)

    @classmethod
    def valid_cases(cls) -> list[Case]:
        return [c if isinstance(c, Case) else Case(before=c) for c in cls.VALID]


def option_fields(options_cls: type) -> dict[str, attrs.Attribute]:
    if not attrs.has(options_cls):
        return {}
    return {a.name: a for a in attrs.fields(options_cls)}
