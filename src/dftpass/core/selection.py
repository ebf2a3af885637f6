"""Rule selection: the one place that decides whether a rule is on.

The configuration gives three inputs: ``rules.select`` (``None`` when nobody wrote it),
``rules.ignore`` and ``rules.per-path`` (overrides for files matching globs). A pattern is an
id (``ML-R6``), a glob (``ML-R2*``), ``ALL`` or ``tag:NAME``. Opt-in rules (off by default)
are switched on only by their exact id, so ``--select ALL`` never turns on a rule that rewrites
more than its users asked for.

:class:`Selection` answers the three questions the rest of dftpass asks: is a rule on
(``dftpass rules``), is it in the pipeline at all (on somewhere), and is it on for one file.
"""

from __future__ import annotations

import fnmatch
from typing import Iterable

from dftpass.core.project import glob_match


def matches(pattern: str, rule_id: str, tags: Iterable[str]) -> bool:
    """``pattern`` is an id (``ML-R6``), a glob (``ML-R2*``), ``ALL`` or ``tag:NAME``."""
    if pattern == "ALL":
        return True
    if pattern.startswith("tag:"):
        return pattern[4:] in tags
    return fnmatch.fnmatchcase(rule_id, pattern)


def rule_selected(rule_id: str, tags: Iterable[str], default_enabled: bool,
                  select: list[str] | None, ignore: list[str]) -> bool:
    """Whether a rule is on. Opt-in rules (off by default) are turned on only by their exact id."""
    tags = tuple(tags)
    if any(matches(p, rule_id, tags) for p in ignore):
        return False
    if select is None:
        return default_enabled
    if rule_id in select:
        return True
    return default_enabled and any(matches(p, rule_id, tags) for p in select)


def is_pattern(text: str) -> bool:
    """A selection entry that names no single rule (so it cannot be an unknown id)."""
    return text.startswith("tag:") or text == "ALL" or "*" in text or "?" in text


class Selection:
    """The configuration's rule selection, asked about rule classes (``id``, ``tags``,
    ``default_enabled``)."""

    def __init__(self, config, registry: dict) -> None:
        self.select = config.get("rules.select")
        self.ignore = config.get("rules.ignore") or []
        self.per_path = config.get("rules.per-path") or []
        self.registry = registry

    def _facts(self, rule_id: str):
        cls = self.registry.get(rule_id)
        return (cls.tags, cls.default_enabled) if cls else ((), True)

    def enabled(self, rule_id: str) -> bool:
        """On for the project as a whole (``rules.select``/``rules.ignore``)."""
        tags, default = self._facts(rule_id)
        return rule_selected(rule_id, tags, default, self.select, self.ignore)

    def in_pipeline(self, rule_id: str) -> bool:
        """On anywhere: globally, or for the paths of some ``rules.per-path`` entry."""
        tags, default = self._facts(rule_id)
        return self.enabled(rule_id) or any(
            rule_selected(rule_id, tags, default, o.get("select") or [], [])
            for o in self.per_path if o.get("select"))

    def enabled_for(self, rule_id: str, relpath: str) -> bool:
        """On for one file: the global answer, adjusted by every matching per-path entry."""
        tags, default = self._facts(rule_id)
        enabled = self.enabled(rule_id)
        for override in self.per_path:
            if not relpath or not glob_match(relpath, override["paths"]):
                continue
            if rule_selected(rule_id, tags, default, override.get("select") or [], []):
                enabled = True
            if any(matches(p, rule_id, tags) for p in override.get("ignore") or ()):
                enabled = False
        return enabled
