"""Optimization proposals from measured bottlenecks, with citations and bounded impact.

The strategies are data (``proposals/catalogue.yaml``). For one analysed run:

* a strategy applies when its ``when`` holds: a diagnosed cause (``cause: A.num_workers``),
  or a bottleneck's share of wall time above a threshold (``metric: data_stall, above: 0.1``),
  and, with ``needs: gpu``, only on a run that used a GPU;
* ``app_impact_pct`` = share of the bottleneck x ``reach`` (the part of it the change can
  remove at most): an estimate, never more than the measured share;
* ``system_impact_pct`` follows from the effect: *throughput* (iterations/s) gains
  ``1/(1-a) - 1`` when a share ``a`` of the wall time goes away; *bandwidth* gains
  ``1/(1-reach) - 1`` on the traced I/O (0 when no I/O was traced: not measured);
  *utilization* is the share of time turned into useful work; 0 otherwise;
* ``weighted_score = 0.5 app + 0.5 system``; rows sort by it; the order of work
  (I/O, communication, memory, compute) is each row's ``order``;
* every checklist dimension gets a verdict: applied and measured / applicable, not measured /
  not applicable (and why).

After a second run that applied a proposal (``dftpass trace --applies ID``), the comparison
fills ``actual_app_pct`` from the measured wall-time change.
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, field
from importlib import resources

import yaml

COMPONENT_ORDER = ("io", "communication", "memory", "compute")
PROPOSED, APPLIED, NOT_APPLIED = "proposed", "applied", "not applied"
#: wording that would mean doing less work; no strategy may say it (tests enforce it)
DOING_LESS = ("fewer epochs", "less data", "subsample", "skip ", "fewer checkpoints", "reduce the number of epochs",
              "smaller data set", "lower the tolerance")


@dataclass
class Proposal:
    id: str
    level: str
    component: str
    dimension: str
    bottleneck: str
    title: str
    change: str
    why: str
    citations: list[str]
    app_impact_pct: float
    system_impact_pct: float
    weighted_score: float
    order: int
    status: str = PROPOSED
    actual_app_pct: float | None = None
    evidence: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Verdict:
    component: str
    dimension: str
    title: str
    verdict: str  # "applied and measured" | "applicable, not measured" | "not applicable: ..."


@functools.lru_cache(maxsize=1)
def catalogue() -> dict:
    text = resources.files("dftpass.proposals").joinpath("catalogue.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


def _system_impact(effect: str, app: float, reach: float, shares: dict[str, float]) -> float:
    if effect == "throughput":
        return 100.0 * (1.0 / (1.0 - min(app, 0.95)) - 1.0)
    if effect == "bandwidth":
        if not shares.get("io_time", 0.0):
            return 0.0  # no traced I/O (DFTRACER_DATA_DIR unset): the bandwidth effect is not measured
        # the change removes up to `reach` of the time the traced I/O takes
        return 100.0 * (1.0 / (1.0 - min(reach, 0.95)) - 1.0)
    if effect == "utilization":
        return 100.0 * app
    return 0.0


def _applies(when: dict, shares: dict[str, float], causes: dict[str, list[str]], gpu: bool) -> tuple[bool, str]:
    """(applies, why or why not)."""
    if when.get("needs") == "gpu" and not gpu:
        return False, "the run used no GPU"
    if "cause" in when:
        found = causes.get(when["cause"], [])
        if found:
            return True, f"diagnosed in the source: {found[0]}" + (f" (+{len(found) - 1} more)" if len(found) > 1 else "")
        return False, f"no {when['cause']} cause in the source"
    if "metric" in when:
        share = shares.get(when["metric"], 0.0)
        limit = when.get("above", 0.0)
        label = when["metric"].replace("_", " ")
        if share > limit:
            return True, f"{label} is {share:.1%} of the wall time (> {limit:.0%})"
        return False, f"{label} is {share:.1%} of the wall time (<= {limit:.0%})"
    return False, "no condition"


def propose(shares: dict[str, float], causes: dict[str, list[str]], gpu: bool = False,
            applied: dict[str, float | None] | None = None) -> tuple[list[Proposal], list[Verdict]]:
    """Proposals that apply to a run, sorted by weighted score, and the checklist.

    ``causes`` maps a cause id to where it was seen ("engine.py:12 ..."); ``applied`` maps the
    ids of proposals a later run applied to their measured app impact (% of wall time)."""
    cat = catalogue()
    cites = cat["citations"]
    applied = applied or {}
    rows: list[Proposal] = []
    considered: dict[tuple[str, str], list[str]] = {}
    for s in cat["strategies"]:
        citations = [cites[c] for c in s.get("cite", []) if c in cites]
        if not citations:
            continue  # a proposal without a citation is dropped
        ok, why = _applies(s["when"], shares, causes, gpu)
        considered.setdefault((s["component"], s["dimension"]), []).append(why if not ok else "")
        if not ok and s["id"] not in applied:
            continue
        share = shares.get(s["bottleneck"], 0.0)
        reach = float(s.get("reach", 1.0))
        app = share * reach
        system = _system_impact(s.get("system_effect", "none"), app, reach, shares)
        app_pct = round(100.0 * app, 2)
        system_pct = round(system, 2)
        row = Proposal(
            id=s["id"], level=s["level"], component=s["component"], dimension=s["dimension"],
            bottleneck=s["bottleneck"], title=s["title"], change=s["change"], why=why, citations=citations,
            app_impact_pct=app_pct, system_impact_pct=system_pct,
            weighted_score=round(0.5 * app_pct + 0.5 * system_pct, 2),
            order=COMPONENT_ORDER.index(s["component"]) + 1,
            evidence=causes.get(s["when"].get("cause", ""), []),
        )
        if s["id"] in applied:
            row.status, row.actual_app_pct = APPLIED, applied[s["id"]]
        rows.append(row)
    rows.sort(key=lambda r: (-r.weighted_score, r.order, r.id))

    checklist: list[Verdict] = []
    for component in COMPONENT_ORDER:
        for dimension, title in cat["dimensions"][component].items():
            mine = [r for r in rows if r.component == component and r.dimension == dimension]
            if any(r.status == APPLIED for r in mine):
                verdict = "applied and measured"
            elif mine:
                verdict = "applicable, not measured"
            elif (component, dimension) in considered:
                reasons = [w for w in considered[(component, dimension)] if w]
                verdict = "not applicable: " + "; ".join(reasons)
            else:
                verdict = "not applicable: dftpass measures nothing that maps to it in this run"
            checklist.append(Verdict(component, dimension, title, verdict))
    return rows, checklist
