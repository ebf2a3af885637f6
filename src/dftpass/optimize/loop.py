"""The optimization loop: one change at a time, on copies, measured side by side, kept only when
the program does the same work, computes the same output, and is faster beyond the noise.

```
<workspace>/
  optimize/stack-0/source      the original source (a copy: the user's tree is never touched)
  optimize/stack-0/annotated   ... annotated, traced as the baseline
  optimize/attempt-<k>/source  the current stack plus attempt k's change
  optimize/attempt-<k>/annotated
  opt-warmup/, opt-baseline/   runs: one untimed warm-up, then the diagnosed baseline (traced)
  attempt-<k>-traced-before/, attempt-<k>-traced-after/   one traced run a side: the work, the output
  attempt-<k>-before/, attempt-<k>-after/   the untraced, alternating pairs that time attempt k
  confirm-original/, confirm-optimized/      the untraced pairs that time the kept changes together
  optimized/                   the original source plus the kept changes, no annotations
  patches/optimize.patch       the kept changes as a unified diff
  optimize.json                the baseline, every attempt, and the decisions
```

An attempt is judged in two parts. The work and the output come from traced runs of the
annotated copies (one a side by default: the analysis counts the batches, the outputs are
compared file by file). The time comes from untraced runs of the unannotated copies, what the
user runs, in alternating pairs, added one pair at a time until the interval of the paired
ratios decides (:mod:`dftpass.optimize.measure`). After the last attempt, the kept changes
together are timed against the original the same way: the command's headline.

Order: the analysis's proposals, I/O first, then communication, memory, compute (the
catalogue's order of work), each answering the current bottleneck. After a kept change
the candidate's own analysis is the next diagnosis (the bottleneck moves); after a reverted
one, the freshest measurement of the current stack (its ``before`` runs) is.
"""

from __future__ import annotations

import difflib
import json
import os
import shutil
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Sequence

from dftpass.analysis import judge
from dftpass.analysis.proposals import COMPONENT_ORDER
from dftpass.core.errors import UserError
from dftpass.core.findings import Severity
from dftpass.core.writer import atomic_write, copy_project
from dftpass.optimize import causes
from dftpass.optimize import change as changes
from dftpass.optimize import measure
from dftpass.proposals.codemods import NotApplicable
from dftpass.runs.tracer import OutputOptions, trace

OPTIMIZE_FILE = "optimize.json"
PATCH = Path("patches") / "optimize.patch"
#: the fewest timed pairs a decision reads (below it nothing is measured)
MIN_PAIRS = 3
#: what one run costs beyond the program's own time (start-up, compaction, analysis), s
RUN_OVERHEAD_S = 1.0


@dataclass
class Options:
    source: Path
    workspace: Path
    command: list[str]
    #: traced runs of the baseline (the diagnosis, and whether the program reproduces itself)
    repeats: int = 3
    #: traced runs a side of each attempt: what establishes the work and the output
    traced: int = 1
    #: untimed pairs of each decision: at least, and at most (added while undecided)
    min_pairs: int = MIN_PAIRS
    max_pairs: int = 16
    #: the most proposals attempted (None: every one the analyses make)
    max_attempts: int | None = None
    #: untimed runs before the baseline (generated data, caches, the page cache)
    warmups: int = 1
    budget_s: float | None = None
    min_gain_pct: float = 2.0
    #: how much a ratio moves between sessions (% sd), widening every interval; None: measure.SESSION_SD
    session_noise_pct: float | None = None
    data_dir: str | None = None
    #: dftracer's selective aggregation in the traced runs (off by default: every event)
    aggregate: bool = False
    outputs: OutputOptions = field(default_factory=lambda: OutputOptions(echo=False))
    #: analysis options (engine, jobs, cache)
    analysis: dict = field(default_factory=dict)


@dataclass
class Attempt:
    proposal: str
    change: str = ""
    kept: bool = False
    outputs_same: bool | None = None
    same_work: bool | None = None
    #: the geometric-mean change of the untraced times, after vs before, in % (negative: faster)
    measured_change_pct: float | None = None
    program_change_pct: float | None = None
    estimate_pct: float | None = None
    #: the timed pairs, and the decision they gave ("faster", "no gain", "slower", "undecided")
    repeats: int = 0
    decision: str = ""
    traced_runs: int = 0
    why: str = ""
    evidence: list[str] = field(default_factory=list)
    timing: dict = field(default_factory=dict)
    env: dict = field(default_factory=dict)
    runs: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return dict(self.__dict__)


class Progress:
    """One line per step on stderr: which attempt, which repeat, the budget left."""

    def __init__(self, budget_s: float | None, stream=None, clock: Callable[[], float] = time.monotonic):
        self.start, self.budget_s, self.clock = clock(), budget_s, clock
        self.stream = stream if stream is not None else sys.stderr

    @property
    def elapsed_s(self) -> float:
        return self.clock() - self.start

    @property
    def left_s(self) -> float | None:
        return None if self.budget_s is None else self.budget_s - self.elapsed_s

    def say(self, text: str) -> None:
        left = self.left_s
        tail = "" if left is None else f" [{max(0.0, left) / 60:.1f} min of the budget left]"
        print(f"optimize: {text}{tail}", file=self.stream, flush=True)


class Optimizer:
    def __init__(self, options: Options, config, manager, progress: Progress | None = None):
        self.o = options
        self.config, self.manager = config, manager
        self.progress = progress or Progress(options.budget_s)
        self.ws = options.workspace.resolve()
        self.root = self.ws / "optimize"
        self.attempts: list[Attempt] = []
        self.baseline: dict = {}
        self.stopped: str | None = None
        self.stack_source: Path | None = None
        self.stack_annotated: Path | None = None
        self.stack_env: dict[str, str] = {}
        self.overhead = {"runs_s": 0.0, "runs": 0}
        self.confirmation: dict | None = None

    # ------------------------------------------------------------ copies and runs

    def _copy(self, src: Path, dst: Path) -> None:
        if dst.exists():
            shutil.rmtree(dst)
        problems = copy_project(src, dst)
        for p in problems:
            self.progress.say(f"warning: {p.message} ({p.path})")

    def _annotate(self, source: Path, out: Path) -> Path:
        from dftpass.core.pipeline import annotate
        from dftpass.core.writer import write_copy

        result = annotate(source, self.config, "run", manager=self.manager)
        write_copy(result, out)
        errors = [f for f in result.findings if f.severity == Severity.ERROR]
        for f in errors:
            self.progress.say(f"annotation: {f.path}: {f.message}")
        return out

    def _run(self, label: str, cwd: Path, env: dict[str, str], *, append: bool, applies: Sequence[str] = ()) -> dict:
        t0 = time.monotonic()
        run_env = {**os.environ, **env}
        run = trace(self.ws, label, self.o.command, cwd=cwd, data_dir=self.o.data_dir, repeats=1, append=append,
                    env=run_env, applies=applies, keep=self.o.outputs, aggregate=self.o.aggregate)
        self.overhead["runs_s"] += time.monotonic() - t0
        self.overhead["runs"] += 1
        rep = run.record()["repeats"][-1]
        return rep

    def _analyze(self, label: str, project: Path):
        from dftpass.analysis.run import analyze_path, save

        result = analyze_path(self.ws / label, self.config, self.manager, project=project, **self.o.analysis)
        save(result)
        return result, json.loads(json.dumps(result.to_dict(), default=str))

    # ------------------------------------------------------------ the steps

    def run_baseline(self):
        original = self.o.source.resolve()
        if self.ws == original or original in self.ws.parents:
            raise UserError(f"the workspace {self.ws} is inside the project {original}: every copy would copy it "
                            "again; choose a workspace outside the project")
        stack = self.root / "stack-0"
        self._copy(original, stack / "source")
        self.stack_source = stack / "source"
        annotated = self.stack_annotated = self._annotate(self.stack_source, stack / "annotated")
        for k in range(self.o.warmups):
            self.progress.say(f"baseline: warm-up run {k + 1}/{self.o.warmups} (not measured: caches, generated "
                              "data, the page cache)")
            warm = self._run("opt-warmup", annotated, {}, append=k > 0)
            if warm.get("exit_code") != 0:
                self.stopped = f"the program failed on its warm-up run (exit code {warm.get('exit_code')})"
                return None
        for k in range(self.o.repeats):
            rep = self._run("opt-baseline", annotated, {}, append=k > 0)
            self.progress.say(f"baseline: repeat {k + 1}/{self.o.repeats}: {rep['wall_s']:.2f} s, "
                              f"exit code {rep['exit_code']}")
        result, data = self._analyze("opt-baseline", annotated)
        self.baseline = {"run": "opt-baseline", "wall_s": data["metrics"].get("wall_s"),
                         "repeats": len(data["repeats"]),
                         "bottleneck": ((data.get("diagnosis") or {}).get("bottleneck") or {}).get("text"),
                         "proposals": [p["id"] for p in data["proposals"]],
                         "work": data["repeats"][0].get("work") if data["repeats"] else None,
                         # a program annotated for short steps samples them: its diagnosis reads estimates
                         "sampling": (data.get("sampling") or {}).get("text") or None}
        if self.baseline["sampling"]:
            self.progress.say(f"baseline trace: {self.baseline['sampling']}")
        failed = [r["exit_code"] for r in data["repeats"] if r.get("exit_code") != 0]
        if failed:
            self.stopped = f"the baseline failed (exit code {failed[0]}): nothing can be measured against it"
            return None
        work = judge.repeats_agree_on_work(data)
        if work.same is False:
            self.stopped = work.reason
            return None
        output = judge.repeats_agree_on_output(data)
        if output.same is False:
            self.stopped = output.reason + ": " + "; ".join(output.evidence[:2])
            return None
        self.baseline["output"] = output.to_dict()
        return result

    def _ordered(self, result) -> list:
        return sorted(result.proposals, key=lambda p: (COMPONENT_ORDER.index(p.component), result.proposals.index(p)))

    def _fits(self, runs: int, wall_s: float) -> str:
        """"" when ``runs`` more runs of ``wall_s`` fit the budget, else why not."""
        left = self.progress.left_s
        need = runs * (wall_s + RUN_OVERHEAD_S)
        if left is None or left >= need:
            return ""
        return f"the budget is spent: {runs} more runs need ~{need:.0f} s, {max(0.0, left):.0f} s are left"

    def _time(self, label: str, cwd: Path, env: dict[str, str], append: bool) -> dict:
        """One untraced run of an unannotated copy, timed from outside and by the clock."""
        t0 = time.monotonic()
        run = trace(self.ws, label, self.o.command, cwd=cwd, data_dir=self.o.data_dir, repeats=1, append=append,
                    env={**os.environ, **env}, keep=self.o.outputs, baseline=True, clock=True, compact=False)
        self.overhead["runs_s"] += time.monotonic() - t0
        self.overhead["runs"] += 1
        return run.record()["repeats"][-1]

    def timed_pairs(self, name: str, before: tuple[str, Path, dict], after: tuple[str, Path, dict],
                    wall_s: float) -> tuple[measure.Timing | None, measure.Decision, str]:
        """Alternate untraced runs of ``before`` and ``after`` (label, folder, environment), a pair
        at a time, until the interval decides, ``max_pairs`` are run or the budget is spent.
        The timing, the decision and what cut it short ("" when nothing did)."""
        reps: dict[str, list[dict]] = {before[0]: [], after[0]: []}
        timing, decision, cut = None, measure.Decision("unmeasured", "no pair was timed"), ""
        for i in range(self.o.max_pairs):
            if i >= self.o.min_pairs:
                cut = self._fits(2, wall_s)
                if cut:
                    break
            # ABBA: a drift of the machine over the pairs weighs on both sides alike
            for label, cwd, env in ((before, after) if i % 2 == 0 else (after, before)):
                rep = self._time(label, cwd, env, append=i > 0)
                reps[label].append(rep)
                side = "before" if label == before[0] else "after"
                self.progress.say(f"{name}: pair {i + 1} {side}: {rep['wall_s']:.2f} s")
                if rep.get("exit_code") != 0:
                    cut = f"the untraced run of {label} failed (exit code {rep.get('exit_code')})"
                    return timing, measure.Decision("unmeasured", cut), cut
            if i + 1 >= self.o.min_pairs:
                session_sd = measure.SESSION_SD if self.o.session_noise_pct is None else self.o.session_noise_pct / 100
                timing = measure.Timing.of(reps[before[0]], reps[after[0]], session_sd)
                decision = measure.decide(timing, self.o.min_gain_pct)
                if decision.decided:
                    break
        if decision.outcome == "undecided" and cut:
            decision = measure.Decision("undecided", f"{decision.text}; stopped: {cut}")
        return timing, decision, cut

    def _run_dict(self, label: str) -> dict:
        """A run's record as the judge reads it (its folder, label and repeats)."""
        from dftpass.runs.layout import run_dir

        run = run_dir(self.ws, label)
        return {**run.record(), "label": label, "path": str(run.path)}

    def attempt(self, k: int, proposal, current) -> tuple[Attempt, object | None]:
        """Try ``proposal`` on the current stack; the attempt, and the analysis to go on from."""
        # both as changes of the wall time: negative is faster
        att = Attempt(proposal.id, estimate_pct=-proposal.app_impact_pct)
        try:
            plan = changes.plan(proposal, current)
        except NotApplicable as exc:
            att.why = f"not attempted: {exc}"
            return att, None
        folder = self.root / f"attempt-{k}"
        self._copy(self.stack_source, folder / "source")
        try:
            done = changes.apply(plan, Path(current.project), folder / "source")
        except NotApplicable as exc:
            att.why = f"not attempted: {exc}"
            return att, None
        att.change, att.env = "; ".join(done), {**self.stack_env, **plan.env}
        wall = current.traces.median("wall_s") or 0.0
        cut = self._fits(2 * self.o.traced + 2 * self.o.min_pairs, wall)
        if cut:
            att.why = f"not measured: {cut}"
            self.stopped = cut
            return att, None
        # 1. the work and the output: traced runs of the annotated copies
        annotated_after = self._annotate(folder / "source", folder / "annotated")
        annotated_before = self.stack_annotated
        before, after = f"attempt-{k}-traced-before", f"attempt-{k}-traced-after"
        att.runs = [before, after]
        for i in range(self.o.traced):
            order = [(before, annotated_before, self.stack_env, ()), (after, annotated_after, att.env, (proposal.id,))]
            for label, cwd, env, applies in (order if i % 2 == 0 else order[::-1]):
                rep = self._run(label, cwd, env, append=i > 0, applies=applies)
                side = "before" if label == before else "after"
                self.progress.say(f"attempt {k} {proposal.id}: traced run {i + 1}/{self.o.traced} {side}: "
                                  f"{rep['wall_s']:.2f} s")
        att.traced_runs = 2 * self.o.traced
        result_b, data_b = self._analyze(before, annotated_before)
        result_a, data_a = self._analyze(after, annotated_after)
        work, output = judge.same_work(data_b, data_a), judge.same_output(data_b, data_a)
        att.same_work, att.outputs_same = work.same, output.same
        att.evidence = [f"work: {work.reason}" + (f" (from {self.o.traced} traced run a side)"
                                                  if self.o.traced == 1 else ""),
                        f"output: {output.reason}", *output.evidence[:5]]
        self._lessons(data_b, data_a)
        if work.same is not True:
            att.why = f"reverted: {work.reason}"
            return att, result_b
        if output.same is not True:
            edited = tuple(dict.fromkeys(site.path for sites in plan.sites.values() for site in sites))
            cause = causes.message(proposal.id, folder / "source", edited) if output.same is False else ""
            att.why = f"reverted: {output.reason}" + (f"; {cause}" if cause else "")
            return att, result_b
        # 2. the time: untraced runs of the unannotated copies, as the user runs them
        timed_b, timed_a = f"attempt-{k}-before", f"attempt-{k}-after"
        att.runs += [timed_b, timed_a]
        timing, decision, cut = self.timed_pairs(
            f"attempt {k} {proposal.id}", (timed_b, self.stack_source, self.stack_env),
            (timed_a, folder / "source", att.env), wall)
        if cut.startswith("the budget") and decision.outcome == "unmeasured":
            self.stopped = cut
        att.decision = decision.outcome
        if timing is not None:
            att.repeats = timing.pairs
            att.timing = timing.to_dict()
            att.measured_change_pct = measure.rounded(timing.wall.change_pct)
            att.program_change_pct = measure.rounded(timing.program.change_pct) if timing.program else None
            untraced = judge.same_output(self._run_dict(timed_b), self._run_dict(timed_a))
            att.evidence.append(f"untraced output: {untraced.reason}")
            if untraced.same is False:
                att.why = f"reverted: untraced, {untraced.reason}"
                return att, result_b
        if plan.changes_results:
            att.why = f"not kept: it changes results by design; {decision.text}: for a person to decide"
        elif decision.outcome == "faster":
            att.kept = True
            att.why = f"kept: same work, same output, {decision.text}"
            self.stack_source, self.stack_annotated, self.stack_env = folder / "source", annotated_after, att.env
            return att, result_a
        elif decision.outcome == "undecided":
            att.why = f"undecided, not kept: {decision.text}"
        else:
            att.why = f"reverted: {decision.text}"
        return att, result_b

    def confirm(self) -> dict | None:
        """The kept changes together against the original, untraced, in pairs until decided:
        the gain the user's own clock sees (the gains of several changes do not add)."""
        if self.stack_source is None or not any(a.kept for a in self.attempts):
            return None
        original = self.root / "stack-0" / "source"
        wall = self.baseline.get("wall_s") or 0.0
        cut = self._fits(2 * self.o.min_pairs, wall)
        if cut:
            return {"decision": "unmeasured", "text": f"not confirmed: {cut}"}
        timing, decision, _ = self.timed_pairs("confirm", ("confirm-original", original, {}),
                                               ("confirm-optimized", self.stack_source, self.stack_env), wall)
        out = {"decision": decision.outcome, "text": decision.text,
               "timing": timing.to_dict() if timing is not None else None}
        if timing is not None:
            same = judge.same_output(self._run_dict("confirm-original"), self._run_dict("confirm-optimized"))
            out["outputs_same"], out["output"] = same.same, same.reason
            out["headline"] = f"optimized: {timing.headline()}; " + (
                "same output" if same.same else f"output: {same.reason}")
        return out

    def _lessons(self, before: dict, after: dict) -> None:
        from dftpass.analysis.compare import compare
        from dftpass.analysis.lessons import record_impacts

        record_impacts(self.ws, compare([before, after]).proposal_impacts)

    def run(self) -> dict:
        started = time.monotonic()
        try:
            current = self.run_baseline()
            tried: set[str] = set()
            k = 0
            while current is not None and self.stopped is None:
                pending = [p for p in self._ordered(current) if p.id not in tried]
                if not pending:
                    break
                if self.o.max_attempts is not None and k >= self.o.max_attempts:
                    self.stopped = (f"--max-attempts {self.o.max_attempts} reached; not attempted: "
                                    + ", ".join(p.id for p in pending))
                    break
                proposal = pending[0]
                tried.add(proposal.id)
                k += 1
                self.progress.say(f"attempt {k}: {proposal.id} ({proposal.title}), estimate "
                                  f"{proposal.app_impact_pct:.1f}% of the wall time")
                att, nxt = self.attempt(k, proposal, current)
                self.attempts.append(att)
                self.progress.say(f"attempt {k}: {att.why}")
                if nxt is not None:
                    current = nxt
            self.confirmation = self.confirm()
            if self.confirmation is not None:
                self.progress.say(self.confirmation.get("headline") or self.confirmation["text"])
        except KeyboardInterrupt:
            self.stopped = "interrupted (Ctrl-C): what was measured until then is kept"
            self.finish(time.monotonic() - started)
            raise
        return self.finish(time.monotonic() - started)

    # ------------------------------------------------------------ the results

    def finish(self, total_s: float) -> dict:
        original = self.o.source.resolve()
        optimized = self.ws / "optimized"
        kept = [a for a in self.attempts if a.kept]
        if self.stack_source is not None:
            self._copy(self.stack_source, optimized)
            patch = diff_trees(original, optimized)
            atomic_write(self.ws / PATCH, patch.encode("utf-8"), self.ws)
        doc = {
            "optimized": str(optimized) if self.stack_source is not None else None,
            "patch": str(self.ws / PATCH) if self.stack_source is not None else None,
            "source": str(original),
            "command": self.o.command,
            "environment": self.stack_env,
            "baseline": self.baseline,
            "attempts": [a.to_dict() for a in self.attempts],
            "kept": [a.proposal for a in kept],
            # the kept changes together against the original, untraced: the headline
            "confirmation": self.confirmation,
            "stopped": self.stopped,
            "seconds": round(total_s, 3),
            "overhead": {"runs": self.overhead["runs"], "runs_s": round(self.overhead["runs_s"], 3),
                         "beyond_runs_s": round(total_s - self.overhead["runs_s"], 3)},
        }
        atomic_write(self.ws / OPTIMIZE_FILE, json.dumps(doc, indent=2, default=str).encode("utf-8"), self.ws)
        return doc


def diff_trees(original: Path, changed: Path) -> str:
    """A unified diff (``a/`` the original, ``b/`` the optimized copy) of the Python files that differ."""
    out = []
    for path in sorted(changed.rglob("*.py")):
        rel = path.relative_to(changed)
        old_path = original / rel
        old = old_path.read_text(encoding="utf-8", errors="surrogateescape").splitlines(keepends=True) \
            if old_path.is_file() else []
        new = path.read_text(encoding="utf-8", errors="surrogateescape").splitlines(keepends=True)
        if old != new:
            out += difflib.unified_diff(old, new, f"a/{rel.as_posix()}", f"b/{rel.as_posix()}")
    return "".join(out)
