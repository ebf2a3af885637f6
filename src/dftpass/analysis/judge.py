"""The judge: did two runs do the same work, and did they compute the same result?

A time is only comparable with a time of the same work. Before ``compare`` (and ``optimize``)
says a run is faster, the judge checks, on the records of ``dftpass trace``:

* **same work**: every repeat exited the same way (0), and each phase received the same
  batches in the same number of regions (:mod:`dftpass.analysis.work`). A program that stops
  on a loss threshold, or reads a different number of samples, did other work: its time is
  no verdict;
* **same output**: the masked standard output (:mod:`dftpass.runs.outputs`), the files it
  wrote (PyTorch files tensor by tensor), and the user's check command.

Each side is first checked against itself: repeats of one label that differ (an unseeded
program) are reported, and then nothing can be proven about a change. A verdict is
``True`` (same), ``False`` (differs) or ``None`` (cannot tell), always with its evidence.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from dftpass.analysis.work import describe
from dftpass.runs.outputs import MASKED

#: files that only some repeats of a side wrote (a data set generated once, a cache)
#: are not part of the output: see :func:`_stable_files`
ONCE = "written by some repeats only (made once: a cache or a generated data set)"


@dataclass
class Verdict:
    same: bool | None
    reason: str
    evidence: list[str] = field(default_factory=list)

    def to_dict(self) -> dict:
        return {"same": self.same, "reason": self.reason, "evidence": self.evidence}


# ---------------------------------------------------------------- work

def _work_key(rep: dict) -> tuple:
    """What must agree: the batches received (counted event by event), and each phase's batches
    (each labelled with its phase by the instant it arrived) and regions."""
    work = rep.get("work") or {}
    phases = work.get("phases") or {}
    return work.get("batches"), tuple(sorted((p, w["batches"], w["regions"]) for p, w in phases.items()))


def _exit_codes(run: dict) -> list:
    return [r.get("exit_code") for r in run.get("repeats", [])]


def repeats_agree_on_work(run: dict) -> Verdict:
    """Whether the repeats of one run did the same work."""
    reps = run.get("repeats", [])
    codes = set(_exit_codes(run))
    if len(codes) > 1:
        return Verdict(False, f"the repeats of {run['label']} exited differently ({sorted(codes, key=str)})")
    keys = [_work_key(r) for r in reps]
    if len(set(keys)) > 1:
        shown = "; ".join(f"repeat {r['repeat']}: {describe(r.get('work'))}" for r in reps)
        return Verdict(False, f"the repeats of {run['label']} did different work (an unseeded program, or one "
                              f"that stops on a threshold?): {shown}")
    return Verdict(True, f"{len(reps)} repeats of {run['label']}: the same work")


def same_work(a: dict, b: dict) -> Verdict:
    """Whether runs ``a`` and ``b`` (analysis dicts) did the same work."""
    for run in (a, b):
        inner = repeats_agree_on_work(run)
        if inner.same is False:
            return Verdict(None, inner.reason)
    code_a, code_b = _exit_codes(a)[:1], _exit_codes(b)[:1]
    if code_a != code_b:
        return Verdict(False, f"the runs exited differently ({a['label']}: {code_a[0] if code_a else None}, "
                              f"{b['label']}: {code_b[0] if code_b else None})")
    wa, wb = (a["repeats"][0].get("work") if a.get("repeats") else None), \
        (b["repeats"][0].get("work") if b.get("repeats") else None)
    pa, pb = (wa or {}).get("phases") or {}, (wb or {}).get("phases") or {}
    untraced = [r["label"] for r in (a, b) if not r.get("events")]
    if untraced:
        return Verdict(None, f"{' and '.join(untraced)} has no trace events: its work cannot be counted "
                             "(judged by exit code and output only)")
    if not pa and not pb:
        return Verdict(None, "no phase was traced in either run: the work cannot be counted (exit codes agree)")
    differences = []
    ta, tb = (wa or {}).get("batches"), (wb or {}).get("batches")
    phases = sorted(set(pa) | set(pb))
    if ta != tb:
        by_phase = "; ".join(f"{p}: {pa.get(p, {}).get('batches', 0)} vs {pb.get(p, {}).get('batches', 0)} batches"
                             for p in phases)
        differences.append(f"{ta} vs {tb} batches in all ({by_phase})")
    for phase in phases:
        x, y = pa.get(phase, {"batches": 0, "regions": 0}), pb.get(phase, {"batches": 0, "regions": 0})
        if ta == tb and x["batches"] != y["batches"]:  # the same batches in all, in other phases
            differences.append(f"{phase}: {x['batches']} vs {y['batches']} batches")
        if x["regions"] != y["regions"]:
            differences.append(f"{phase}: {x['regions']} vs {y['regions']} regions")
    if differences:
        return Verdict(False, f"the runs did different work ({'; '.join(differences)})", differences)
    return Verdict(True, f"the same work ({describe(wa)})")


# ---------------------------------------------------------------- output

def _outputs(rep: dict) -> dict | None:
    return rep.get("outputs")


def _stdout_lines(run: dict, rep: dict) -> list[str] | None:
    path = Path(run.get("path", "")) / "outputs" / f"rep-{rep['repeat']}" / MASKED
    try:
        return path.read_text(encoding="utf-8").splitlines()
    except OSError:
        return None


def _first_difference(x: list[str] | None, y: list[str] | None) -> str:
    if x is None or y is None:
        return "the printed output differs"
    for i, (u, v) in enumerate(zip(x, y), 1):
        if u != v:
            return f"stdout line {i}: {u.strip()[:100]!r} vs {v.strip()[:100]!r}"
    return f"stdout has {len(x)} vs {len(y)} lines"


def _stable_files(run: dict) -> tuple[dict[str, dict], list[str]]:
    """The files every repeat of a run wrote, with the first repeat's fingerprint, and the
    names only some repeats wrote."""
    reps = [_outputs(r) or {} for r in run.get("repeats", [])]
    names = [set((o.get("files") or {})) for o in reps]
    if not names:
        return {}, []
    every = set.intersection(*names)
    some = sorted(set.union(*names) - every)
    return {n: reps[0]["files"][n] for n in sorted(every)}, some


def _file_difference(name: str, x: dict, y: dict) -> str | None:
    if x.get("kind") != y.get("kind"):
        return f"{name}: {x.get('kind')} vs {y.get('kind')}"
    if x["kind"] == "torch":
        tx, ty = x.get("tensors", {}), y.get("tensors", {})
        if set(tx) != set(ty):
            missing = sorted(set(tx) ^ set(ty))[:3]
            return f"{name}: different entries ({', '.join(missing)})"
        changed = [k for k in tx if tx[k] != ty[k]]
        if not changed:
            return None
        sx, sy = x.get("sums", {}), y.get("sums", {})
        sized = [f"{k} (sum {sx[k]:.6g} vs {sy[k]:.6g})" for k in changed[:3] if k in sx and k in sy]
        return f"{name}: {len(changed)} of {len(tx)} tensors differ" + (f": {', '.join(sized)}" if sized else "")
    if x["kind"] == "bytes":
        return None if x.get("digest") == y.get("digest") else f"{name}: different bytes"
    return None  # skipped or unreadable on both sides: nothing to compare


def _side_differences(run: dict, other: dict, ra: dict, rb: dict, fa: dict, fb: dict) -> list[str]:
    """What differs between repeat ``ra`` of ``run`` and ``rb`` of ``other``, files
    ``fa``/``fb`` being those written by every repeat of each side."""
    oa, ob = _outputs(ra) or {}, _outputs(rb) or {}
    out = []
    sa, sb = (oa.get("stdout") or {}).get("digest"), (ob.get("stdout") or {}).get("digest")
    if sa != sb:
        out.append(_first_difference(_stdout_lines(run, ra), _stdout_lines(other, rb)))
    for name in sorted(set(fa) | set(fb)):
        if name not in fa or name not in fb:
            writer = run if name in fa else other
            # one run that wrote it once may have made a cache the other found: only a side whose
            # every repeat (two or more) wrote it shows a real output the other lacks
            if len(writer.get("repeats", [])) >= 2:
                out.append(f"{name}: written by {writer['label']} only")
            continue
        diff = _file_difference(name, fa[name], fb[name])
        if diff:
            out.append(diff)
    ca, cb = oa.get("check"), ob.get("check")
    if ca or cb:
        if not ca or not cb:
            out.append("the check command ran on one side only")
        elif ca.get("digest") != cb.get("digest") or ca.get("exit_code") != cb.get("exit_code"):
            out.append(f"the check command's output differs (exit {ca.get('exit_code')} vs {cb.get('exit_code')})")
    return out


def _repeats_differ(run: dict) -> list[str]:
    """How the repeats of one run differ in output (an empty list: they agree)."""
    reps = run.get("repeats", [])
    stable, _ = _stable_files(run)
    out = []
    for rep in reps[1:]:
        mine = {n: (_outputs(rep) or {}).get("files", {})[n] for n in stable}
        differences = _side_differences(run, run, reps[0], rep, stable, mine)
        out += [f"repeat {reps[0]['repeat']} vs {rep['repeat']}: {d}" for d in differences]
    return out


def repeats_agree_on_output(run: dict) -> Verdict:
    """Whether the repeats of one run produced the same output (None: nothing recorded)."""
    if not run.get("repeats") or any(_outputs(r) is None for r in run["repeats"]):
        return Verdict(None, f"{run['label']} recorded no outputs (a run made before dftpass recorded them)")
    inner = _repeats_differ(run)
    if inner:
        return Verdict(False, f"the repeats of {run['label']} differ in output, so no change can be proven to keep "
                              "it (seed the program, mask the varying text with --mask, or pass a --check that "
                              "tolerates it)", inner[:5])
    return Verdict(True, f"{len(run['repeats'])} repeats of {run['label']}: the same output")


def same_output(a: dict, b: dict) -> Verdict:
    """Whether ``a`` and ``b`` (analysis dicts) produced the same output, with the evidence."""
    for run in (a, b):
        inner = repeats_agree_on_output(run)
        if inner.same is not True:
            return Verdict(None, inner.reason, inner.evidence)
        for rep in run["repeats"]:
            check = (_outputs(rep) or {}).get("check")
            if check and check.get("exit_code") != 0:
                return Verdict(False, f"the check command failed on {run['label']} repeat {rep['repeat']} "
                                      f"(exit {check.get('exit_code')})", [check.get("output", "")[-500:]])
    (fa, once), (fb, _) = _stable_files(a), _stable_files(b)
    differences = _side_differences(a, b, a["repeats"][0], b["repeats"][0], fa, fb)
    if differences:
        return Verdict(False, f"the outputs differ: {differences[0]}", differences[:10])
    compared = ["the masked standard output"]
    if fa:
        kinds = sorted({f.get("kind") for f in fa.values()})
        compared.append(f"{len(fa)} written file(s) ({', '.join(kinds)})")
    if (_outputs(a["repeats"][0]) or {}).get("check"):
        compared.append("the check command")
    evidence = [f"same: {c}" for c in compared] + [f"{n}: {ONCE}" for n in once[:5]]
    return Verdict(True, "the same output (" + ", ".join(compared) + ")", evidence)
