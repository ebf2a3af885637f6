"""From a proposal of the analysis to a change of a copy of the program.

The catalogue says how a strategy is applied (``apply:``, see
:mod:`dftpass.proposals.codemods`); the analysis says where: the DataLoader of the phase the
proposal's cause acts in, the copies a cause points at, the entry file. The values come from
the proposal's own settings (``{"num_workers": 2}``), so what is applied is exactly what
``analyze`` proposed.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from dftpass.analysis.diagnosis import NON_BLOCKING
from dftpass.analysis.proposals import catalogue
from dftpass.proposals.codemods import CODEMODS, NotApplicable, Site, Target


@dataclass
class Change:
    """A proposal made concrete: the codemods and their sites, or the environment it sets."""

    proposal: str
    codemods: list[str] = field(default_factory=list)
    sites: dict[str, list[Site]] = field(default_factory=dict)
    settings: dict = field(default_factory=dict)
    env: dict[str, str] = field(default_factory=dict)
    #: the strategy changes results by design (lower precision): never kept without a person
    changes_results: bool = False


def strategy(proposal_id: str) -> dict:
    return next(s for s in catalogue()["strategies"] if s["id"] == proposal_id)


def mechanical(proposal_id: str) -> str | None:
    """None when the strategy can be applied by dftpass, else why not."""
    how = strategy(proposal_id).get("apply") or {}
    if "manual" in how:
        return f"no mechanical form: {how['manual']}"
    if not how:
        return "the catalogue says nothing of how to apply it"
    return None


def _loader_site(result, proposal) -> Site:
    facts = result.diagnosis.facts if result.diagnosis is not None else None
    if facts is None:
        raise NotApplicable("the program's source was not read: no DataLoader to change")
    cause = next((c for c in result.causes if c.id == proposal.answers), None)
    phase = cause.phase if cause is not None else "train"
    loader = facts.loader_for(phase)
    if loader is None:
        raise NotApplicable(f"no DataLoader of the {phase} phase was found in the source")
    return Site(loader.path, loader.line)


def _sites(name: str, result, proposal) -> list[Site]:
    if name == "loader-keywords":
        return [_loader_site(result, proposal)]
    if name == "non-blocking":
        sites = [Site(c.path, c.line) for c in result.causes if c.id == NON_BLOCKING and c.line]
        if not sites:
            raise NotApplicable("no blocking host-to-device copy was diagnosed")
        return sites
    if name == "cudnn-benchmark":
        entry = result.diagnosis.facts.entry if result.diagnosis is not None and result.diagnosis.facts else None
        if not entry:
            raise NotApplicable("the traced command's entry file is not known")
        return [Site(entry.rsplit(":", 1)[0], 0)]
    raise NotApplicable(f"unknown codemod {name!r}")


def _env(how: dict, result) -> dict[str, str]:
    facts = result.diagnosis.facts if result.diagnosis is not None else None
    machine = getattr(facts, "machine", None) or {}
    ranks = max(1, getattr(result.diagnosis, "ranks_per_host", 1) or 1)
    cores = machine.get("physical_cores") or machine.get("usable_cpus") or machine.get("cpus")
    if not cores:
        raise NotApplicable("the machine's cores were not recorded")
    values = {"threads": str(max(1, cores // ranks))}
    return {k: str(v).format(**values) for k, v in how["env"].items()}


def plan(proposal, result) -> Change:
    """The change ``proposal`` (a :class:`~dftpass.analysis.proposals.Proposal` of ``result``,
    an :class:`~dftpass.analysis.run.AnalyzeResult`) makes; :class:`NotApplicable` if none."""
    s = strategy(proposal.id)
    why = mechanical(proposal.id)
    if why:
        raise NotApplicable(why)
    how = s["apply"]
    change = Change(proposal.id, settings=dict(proposal.settings), changes_results=bool(s.get("changes_results")))
    if "env" in how:
        change.env = _env(how, result)
    names = how.get("codemod") or []
    for name in [names] if isinstance(names, str) else names:
        change.codemods.append(name)
        change.sites[name] = _sites(name, result, proposal)
    return change


def apply(change: Change, analysed: Path, source: Path) -> list[str]:
    """Edit ``source`` (a copy of the program) as ``change`` says; what was done, in words."""
    done = []
    for name in change.codemods:
        done += CODEMODS[name](Target(analysed, source, change.sites[name], change.settings))
    done += [f"environment: {k}={v}" for k, v in change.env.items()]
    return done
