"""Optimization proposals: what to change, when it fits the run, and how much it should give.

The strategies are data (``proposals/catalogue.yaml``). For one analysed run, a strategy is
proposed when:

* its ``when`` holds: a diagnosed cause (``cause: A.num_workers``) or a bottleneck's share
  of the wall time above a threshold (``metric: comm_time, above: 0.1``);
* every one of its ``needs`` holds on this run (:data:`PRECONDITIONS`): a GPU that was used,
  a DataLoader, worker processes, cores to spare, a persistent-workers setting that is not
  already on, several training processes on a host. A precondition that cannot be checked
  (the machine was not recorded) does not hold, and the checklist says what was missing.

Its **estimate** is derived from the run's measured figures by a named formula
(:data:`ESTIMATORS`): e.g. more workers remove ``wait x (1 - k/N)`` of the loop's wait for
data (k workers now, N proposed), persistent workers the first-batch waits of every epoch but
the first. The formula, with the numbers put in, is part of the proposal
(``estimate.formula``) so the estimate can be checked; ``dftpass compare`` then sets the
measured change beside it, and ``lessons.md`` keeps both.

``app_impact_pct`` = seconds saved / wall time (never more than the measured share of the
bottleneck); ``system_impact_pct`` follows from the effect (*throughput*: ``1/(1-a) - 1``
when a share ``a`` of the wall time goes; *bandwidth*: ``1/(1-reach) - 1`` on the traced I/O;
*utilization*: the share turned into useful work); ``weighted_score = 0.5 app + 0.5 system``.

Order: proposals that answer a cause explaining the bottleneck come first, in the order of
the causes (so the first proposal answers the top cause); the rest follow by weighted score.
Every checklist dimension gets a verdict: applied and measured / applicable, not measured /
not applicable (and why).
"""

from __future__ import annotations

import functools
from dataclasses import asdict, dataclass, field
from importlib import resources
from typing import Callable

import yaml

COMPONENT_ORDER = ("io", "communication", "memory", "compute")
PROPOSED, APPLIED, NOT_APPLIED = "proposed", "applied", "not applied"
#: wording that would mean doing less work; no strategy may say it (tests enforce it)
DOING_LESS = ("fewer epochs", "less data", "subsample", "skip ", "fewer checkpoints", "reduce the number of epochs",
              "smaller data set", "lower the tolerance", "evaluate less")
#: the most workers a proposal suggests per rank
MAX_WORKERS = 8


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
    #: each precondition and why it holds
    preconditions: list[str] = field(default_factory=list)
    #: how the estimate was made: {"formula": ..., "saved_s": ..., "wall_s": ...}
    estimate: dict = field(default_factory=dict)
    #: the cause it answers (an id), if any
    answers: str | None = None
    #: the concrete values it proposes (``{"num_workers": 4}``), for a script that applies it
    settings: dict = field(default_factory=dict)

    def to_dict(self) -> dict:
        return asdict(self)


@dataclass
class Verdict:
    component: str
    dimension: str
    title: str
    verdict: str  # "applied and measured" | "applicable, not measured" | "not applicable: ..."


@dataclass
class RunFacts:
    """What the proposals read about one run (all optional: unknown facts fail the
    preconditions that need them)."""

    wall_s: float | None = None
    #: bottleneck -> share of the wall time (:func:`dftpass.analysis.metrics.shares`)
    shares: dict[str, float] = field(default_factory=dict)
    #: the causes, ranked (:class:`dftpass.analysis.diagnosis.Cause`)
    causes: list = field(default_factory=list)
    #: :class:`dftpass.analysis.context.ProgramFacts`, None without the source
    program: object | None = None
    #: the run used a GPU (True), did not (False), unknown (None)
    gpu: bool | None = None
    #: training processes that ran at once on one host
    ranks_per_host: int = 1


@functools.lru_cache(maxsize=1)
def catalogue() -> dict:
    text = resources.files("dftpass.proposals").joinpath("catalogue.yaml").read_text(encoding="utf-8")
    return yaml.safe_load(text)


# ---------------------------------------------------------------- preconditions

def _usable_cpus(run: RunFacts) -> int | None:
    machine = getattr(run.program, "machine", None) or {}
    return machine.get("usable_cpus") or machine.get("cpus")


def suggested_workers(run: RunFacts, cause) -> int:
    """N for ``num_workers=N``: at least twice the workers there are (at least 2), at least
    the usable cores, at most :data:`MAX_WORKERS`."""
    have = int((cause.figures if cause is not None else {}).get("workers") or 0)
    return max(2 * have, 2, min(_usable_cpus(run) or 2, MAX_WORKERS))


def _loader(run: RunFacts, cause):
    program = run.program
    if program is None:
        return None
    return program.loader_for(cause.phase if cause is not None else None)


def _need_gpu(run, cause):
    if run.gpu is None:
        return False, "the machine was not recorded (run.json has no \"machine\"): no GPU could be confirmed"
    return (True, "the run used a GPU") if run.gpu else (False, "the run used no GPU")


def _need_loader(run, cause):
    if run.program is None:
        return False, "the source was not read (no project): no DataLoader could be confirmed"
    return (True, "the program builds a DataLoader") if run.program.has_loader else \
        (False, "the program has no DataLoader")


def _need_workers(run, cause):
    loader = _loader(run, cause)
    if loader is None:
        return _need_loader(run, cause) if run.program is None or not run.program.has_loader else \
            (False, "no loader of this phase was found")
    if loader.workers == 0:
        return False, f"{loader.location()}: the loader has no worker processes"
    return True, f"{loader.location()}: num_workers={loader.setting('num_workers')}"


def _need_spare_cores(run, cause):
    cores = _usable_cpus(run)
    if cores is None:
        return True, "the machine's cores were not recorded: N assumes 2"
    have = int((cause.figures if cause is not None else {}).get("workers") or 0)
    if have and have >= cores * 2:
        return False, f"{have} workers already on {cores} usable cores"
    return True, f"{cores} usable cores (run.json), {have} workers now"


def _need_not_persistent(run, cause):
    loader = _loader(run, cause)
    if loader is not None and loader.persistent is True:
        return False, f"{loader.location()}: persistent_workers=True already"
    return True, "workers are not kept across epochs"


def _need_ranks(run, cause):
    if run.ranks_per_host > 1:
        return True, f"{run.ranks_per_host} training processes at once on one host"
    return False, "one training process per host (torch's default threads match its cores)"


def _need_fork(run, cause):
    platform = (getattr(run.program, "machine", None) or {}).get("platform", "linux")
    if platform.startswith(("win", "darwin")):
        return False, f"{platform}: fork is not available or not safe"
    return True, f"{platform}: fork and forkserver are available"


PRECONDITIONS: dict[str, Callable] = {
    "gpu": _need_gpu, "loader": _need_loader, "workers": _need_workers, "spare-cores": _need_spare_cores,
    "not-persistent": _need_not_persistent, "ranks-per-host": _need_ranks, "fork": _need_fork,
}


# ---------------------------------------------------------------- estimates

def _est_share(run, s, cause):
    share = run.shares.get(s["bottleneck"], 0.0)
    reach = float(s.get("reach", 1.0))
    wall = run.wall_s or 0.0
    return share * reach * wall, (f"{reach:g} (reach) x {share:.1%} ({s['bottleneck'].replace('_', ' ')}'s share "
                                  "of the wall time)")


def _est_workers(run, s, cause):
    wait = cause.figures.get("wait_s", 0.0)
    have = max(1, int(cause.figures.get("workers") or 0))
    n = suggested_workers(run, cause)
    who = "the training process" if not cause.figures.get("workers") else f"{have} worker(s)"
    saved = wait * max(0.0, 1.0 - have / n)
    return saved, (f"wait for data {wait:.3g} s x (1 - {have}/{n}): {n} workers load what {who} loaded, "
                   "in parallel")


def _est_first_batches(run, s, cause):
    first, count = cause.figures.get("first_fetch_s", 0.0), int(cause.figures.get("first_fetches") or 0)
    saved = first * (count - 1) / count if count else 0.0
    return saved, (f"first-batch waits {first:.3g} s x ({count} - 1)/{count}: workers start once instead of "
                   f"at each of {count} loops")


def _est_spawn(run, s, cause):
    first = cause.figures.get("first_fetch_s", 0.0)
    reach = float(s.get("reach", 0.8))
    return first * reach, (f"first-batch waits {first:.3g} s x {reach:g}: a forked worker inherits the imports "
                           "a spawned one repeats (assumed share of its start-up)")


def _est_sample_part(part: str):
    def estimate(run, s, cause):
        wait = cause.figures.get("wait_s", 0.0)
        pre, reads = cause.figures.get("preprocess_s", 0.0), cause.figures.get("reads_s", 0.0)
        share = (pre if part == "preprocess" else reads) / (pre + reads) if pre + reads else 0.0
        reach = float(s.get("reach", 0.5))
        label = "transforms" if part == "preprocess" else "reads"
        return wait * share * reach, (f"wait for data {wait:.3g} s x {share:.0%} ({label}' share of producing "
                                      f"samples) x {reach:g} (reach)")
    return estimate


def _est_checkpoint(run, s, cause):
    seconds = cause.figures.get("checkpoint_s", 0.0)
    reach = float(s.get("reach", 0.8))
    return seconds * reach, (f"checkpoint time {seconds:.3g} s x {reach:g}: the write leaves the loop, the copy of "
                             "the state stays (assumed share)")


ESTIMATORS: dict[str, Callable] = {
    "share": _est_share, "workers": _est_workers, "first-batches": _est_first_batches, "spawn": _est_spawn,
    "preprocess": _est_sample_part("preprocess"), "reads": _est_sample_part("reads"), "checkpoint": _est_checkpoint,
}


def _system_impact(effect: str, app: float, reach: float, shares: dict[str, float]) -> float:
    if effect == "throughput":
        return 100.0 * (1.0 / (1.0 - min(app, 0.95)) - 1.0)
    if effect == "bandwidth":
        if not shares.get("io_time", 0.0):
            return 0.0  # no traced I/O (DFTRACER_DATA_DIR unset): the bandwidth effect is not measured
        return 100.0 * (1.0 / (1.0 - min(reach, 0.95)) - 1.0)
    if effect == "utilization":
        return 100.0 * app
    return 0.0


def _condition(when: dict, run: RunFacts) -> tuple[object | None, bool, str]:
    """(the cause it answers, holds, why or why not)."""
    if "cause" in when:
        found = [c for c in run.causes if c.id == when["cause"]]
        if found:
            more = f" (+{len(found) - 1} more)" if len(found) > 1 else ""
            return found[0], True, f"diagnosed: {found[0].location()} {found[0].message}{more}"
        return None, False, f"no {when['cause']} cause in this run"
    if "metric" in when:
        share = run.shares.get(when["metric"], 0.0)
        limit = when.get("above", 0.0)
        label = when["metric"].replace("_", " ")
        if share > limit:
            return None, True, f"{label} is {share:.1%} of the wall time (> {limit:.0%})"
        return None, False, f"{label} is {share:.1%} of the wall time (<= {limit:.0%})"
    return None, False, "no condition"


def propose(run: RunFacts, applied: dict[str, float | None] | None = None) -> tuple[list[Proposal], list[Verdict]]:
    """Proposals that fit the run, the first answering the top cause, and the checklist.

    ``applied`` maps the ids of proposals a later run applied to their measured app impact."""
    cat = catalogue()
    cites = cat["citations"]
    applied = applied or {}
    rows: list[Proposal] = []
    considered: dict[tuple[str, str], list[str]] = {}
    explaining = [c.id for c in run.causes if getattr(c, "explains", False)]
    for s in cat["strategies"]:
        citations = [cites[c] for c in s.get("cite", []) if c in cites]
        if not citations:
            continue  # a proposal without a citation is dropped
        cause, ok, why = _condition(s["when"], run)
        preconditions = []
        if ok:
            for need in s.get("needs", []):
                holds, text = PRECONDITIONS[need](run, cause)
                if not holds:
                    ok, why = False, text
                    break
                preconditions.append(f"{need}: {text}")
        considered.setdefault((s["component"], s["dimension"]), []).append("" if ok else why)
        if not ok and s["id"] not in applied:
            continue
        wall = run.wall_s or 0.0
        saved, formula = ESTIMATORS[s.get("estimate", "share")](run, s, cause) if (cause or "cause" not in s["when"]) \
            else (0.0, "not diagnosed in this run")
        ceiling = run.shares.get(s["bottleneck"], 1.0)
        app = min(saved / wall, ceiling) if wall else 0.0
        app_pct = round(100.0 * app, 2)
        system_pct = round(_system_impact(s.get("system_effect", "none"), app, float(s.get("reach", 1.0)),
                                          run.shares), 2)
        values = {"workers": suggested_workers(run, cause)}
        change = s["change"].replace("{workers}", str(values["workers"]))
        settings = {k: values[v[1:-1]] if isinstance(v, str) and v[1:-1] in values else v
                    for k, v in s.get("settings", {}).items()}
        row = Proposal(
            id=s["id"], level=s["level"], component=s["component"], dimension=s["dimension"],
            bottleneck=s["bottleneck"], title=s["title"], change=change, why=why, citations=citations,
            app_impact_pct=app_pct, system_impact_pct=system_pct,
            weighted_score=round(0.5 * app_pct + 0.5 * system_pct, 2),
            order=COMPONENT_ORDER.index(s["component"]) + 1,
            evidence=[f"{c.location()} {c.message}" for c in run.causes if c.id == s["when"].get("cause")],
            preconditions=preconditions,
            estimate={"formula": formula, "saved_s": round(saved, 6), "wall_s": wall,
                      "app_pct": f"{saved:.3g} s / {wall:.3g} s wall = {app_pct:.1f}%"},
            answers=cause.id if cause is not None else None, settings=settings,
        )
        if s["id"] in applied:
            row.status, row.actual_app_pct = APPLIED, applied[s["id"]]
        rows.append(row)

    def rank(r: Proposal) -> tuple:
        first = explaining.index(r.answers) if r.answers in explaining else len(explaining)
        return first, -r.weighted_score, r.order, r.id

    rows.sort(key=rank)
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
