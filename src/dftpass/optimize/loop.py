"""The optimization loop: one change at a time, on copies, measured side by side, kept only when
the program does the same work, computes the same output, and is faster beyond the noise.

```
<workspace>/
  optimize/stack-0/source      the original source (a copy: the user's tree is never touched)
  optimize/stack-0/annotated   ... annotated, traced as the baseline
  optimize/attempt-<k>/source  the current stack plus attempt k's change
  optimize/attempt-<k>/annotated
  opt-warmup/, opt-baseline/   runs: one untimed warm-up, then the diagnosed baseline
  attempt-<k>-before/, attempt-<k>-after/   the alternating repeats of attempt k
  optimized/                   the original source plus the kept changes, no annotations
  patches/optimize.patch       the kept changes as a unified diff
  optimize.json                the baseline, every attempt, and the decisions
```

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
from dftpass.optimize import change as changes
from dftpass.optimize import measure
from dftpass.proposals.codemods import NotApplicable
from dftpass.runs.tracer import OutputOptions, trace

OPTIMIZE_FILE = "optimize.json"
PATCH = Path("patches") / "optimize.patch"
#: the fewest repeats a side gets under a tight budget (below it nothing is measured)
MIN_REPEATS = 3
#: what one traced run costs beyond the program's own time (start-up, compaction, analysis), s
RUN_OVERHEAD_S = 1.0


@dataclass
class Options:
    source: Path
    workspace: Path
    command: list[str]
    repeats: int = 5
    #: the most proposals attempted (None: every one the analyses make)
    max_attempts: int | None = None
    #: untimed runs before the baseline (generated data, caches, the page cache)
    warmups: int = 1
    budget_s: float | None = None
    min_gain_pct: float = 2.0
    data_dir: str | None = None
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
    #: changes of the median times, after vs before, in % (negative: faster)
    measured_change_pct: float | None = None
    program_change_pct: float | None = None
    steady_change_pct: float | None = None
    estimate_pct: float | None = None
    repeats: int = 0
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
                    env=run_env, applies=applies, keep=self.o.outputs)
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
                         "work": data["repeats"][0].get("work") if data["repeats"] else None}
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

    def _repeats_for(self, wall_s: float) -> tuple[int, str]:
        left = self.progress.left_s
        per_run = wall_s + RUN_OVERHEAD_S
        if left is None:
            return self.o.repeats, ""
        fits = int(left // (2 * per_run))
        if fits >= self.o.repeats:
            return self.o.repeats, ""
        if fits < MIN_REPEATS:
            return 0, (f"the budget is spent: {MIN_REPEATS} repeats a side need ~{2 * MIN_REPEATS * per_run:.0f} s, "
                       f"{max(0.0, left):.0f} s are left")
        return fits, f"{fits} repeats a side instead of {self.o.repeats}: that is what the budget's {left:.0f} s hold"

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
        n, why_fewer = self._repeats_for(wall)
        if n == 0:
            att.why = f"not measured: {why_fewer}"
            self.stopped = why_fewer
            return att, None
        annotated_after = self._annotate(folder / "source", folder / "annotated")
        annotated_before = self.stack_annotated
        before, after = f"attempt-{k}-before", f"attempt-{k}-after"
        att.runs = [before, after]
        for i in range(n):
            # ABBA order: a drift of the machine over the attempt weighs on both sides alike
            order = [(before, annotated_before, self.stack_env, ()), (after, annotated_after, att.env, (proposal.id,))]
            for label, cwd, env, applies in (order if i % 2 == 0 else order[::-1]):
                rep = self._run(label, cwd, env, append=i > 0, applies=applies)
                side = "before" if label == before else "after"
                self.progress.say(f"attempt {k} {proposal.id}: repeat {i + 1}/{n} {side}: {rep['wall_s']:.2f} s")
        result_b, data_b = self._analyze(before, annotated_before)
        result_a, data_a = self._analyze(after, annotated_after)
        att.repeats = n
        work, output = judge.same_work(data_b, data_a), judge.same_output(data_b, data_a)
        att.same_work, att.outputs_same = work.same, output.same
        t = measure.Timing.of(data_b["repeats"], data_a["repeats"])
        att.timing = t.to_dict()
        att.measured_change_pct = measure.rounded(t.wall.change_pct)
        att.program_change_pct = measure.rounded(t.program.change_pct) if t.program else None
        att.steady_change_pct = measure.rounded(t.steady.change_pct) if t.steady else None
        gained, why_time = measure.faster(t, self.o.min_gain_pct)
        att.evidence = [f"work: {work.reason}", f"output: {output.reason}", *output.evidence[:5]]
        if why_fewer:
            att.evidence.append(why_fewer)
        self._lessons(data_b, data_a)
        if work.same is not True:
            att.why = f"reverted: {work.reason}"
        elif output.same is not True:
            att.why = f"reverted: {output.reason}"
        elif plan.changes_results:
            att.why = f"not kept: it changes results by design; {why_time}: for a person to decide"
        elif not gained:
            att.why = f"reverted: {why_time}"
        else:
            att.kept = True
            att.why = f"kept: same work, same output, {why_time}"
            self.stack_source, self.stack_annotated, self.stack_env = folder / "source", annotated_after, att.env
            return att, result_a
        return att, result_b

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
