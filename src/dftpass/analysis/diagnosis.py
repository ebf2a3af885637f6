"""Why the run's time goes where it goes: causes read from the trace and the program's source.

The bottleneck (:mod:`~dftpass.analysis.bottleneck`) says *where* the time goes; a cause
says *why*, linked to the line that shows it. Causes come in two kinds:

* causes that **explain the bottleneck** (``explains=True``), most likely first; the first
  is the run's *top cause*, and the first proposal is the one that answers it:

  - ``A.num_workers``: the loader of the stalled phase has no workers (``num_workers``
    unset or 0, or a non-literal value that was 0 at run time: no worker process loaded),
    or too few for the loading rate (its workers are busy most of the phase);
  - ``A.no_loader``: the program has no DataLoader and the training process produces
    every batch itself;
  - ``A.prefetch_factor``: a prefetch depth of 1 (at most one batch per worker in flight);
  - ``A.persistent_workers``: workers started again every epoch (more worker processes over
    the run than at once, or ``persistent_workers`` not set) when the waits for each
    epoch's first batch dominate;
  - ``E.spawn_start_method``: spawn/forkserver workers, each importing the program anew,
    when the first batch's wait dominates;
  - ``E.preprocess`` / ``E.sample_reads``: what producing a sample spends its time on;
  - ``G.checkpoint``: the saves that fill the training loop;
  - ``E.evaluation``: an evaluation that outweighs training without waiting for data;

* **other observations** (``explains=False``): blocking host-to-device copies (B, only on a
  run that used a GPU), barriers in the batch loop (C), batch loops the trace cannot see (D).

A value that is not a literal (``num_workers=args.workers``) is judged by the trace (how many
worker processes loaded), never guessed.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from dftpass.analysis import bottleneck as B
from dftpass.traces import names as N

NUM_WORKERS, NO_LOADER, PREFETCH = "A.num_workers", "A.no_loader", "A.prefetch_factor"
PERSISTENT, SPAWN = "A.persistent_workers", "E.spawn_start_method"
PREPROCESS, SAMPLE_READS, CHECKPOINT, EVALUATION = "E.preprocess", "E.sample_reads", "G.checkpoint", "E.evaluation"
NON_BLOCKING, BARRIER, UNWRAPPED = "B.non_blocking", "C.barrier_in_loop", "D.unwrapped_loop"
#: the workers of a stalled phase are busy this share of it or more: they are too few
SATURATED = 0.5
#: a loop that waits this share of its time or more, though not stalled, still gets the
#: loader's causes as observations (their proposals follow the bottleneck's)
MINOR_STALL = 0.05


@dataclass(frozen=True)
class Cause:
    id: str
    path: str
    line: int
    message: str
    #: the phase the cause acts in (train, evaluate, ...; None: the whole run)
    phase: str | None = None
    #: whether it explains the run's bottleneck (else: another observation)
    explains: bool = False
    #: figures a proposal sizes its estimate with (seconds, counts)
    figures: dict = field(default_factory=dict, compare=False, hash=False)

    def location(self) -> str:
        return f"{self.path}:{self.line}" if self.line else self.path


def worker_generations(summary) -> tuple[int, int]:
    """(worker processes over the run, the most that ran at once), by (host, pid)."""
    spans: dict[tuple, tuple[int, int]] = {}
    for p in summary.workers():
        if p.first_ns is None or p.last_ns is None:
            continue
        key = (p.host, p.pid)
        first, last = spans.get(key, (p.first_ns, p.last_ns))
        spans[key] = (min(first, p.first_ns), max(last, p.last_ns))
    edges = sorted([(a, 1) for a, _ in spans.values()] + [(b, -1) for _, b in spans.values()])
    running = most = 0
    for _, step in edges:
        running += step
        most = max(most, running)
    return len(spans), most


def trace_causes(summary, label: str) -> list[Cause]:
    """Causes the trace itself shows: worker processes that came and went during the run
    (more workers over the run than ever ran at once: they were started again, each epoch)."""
    total, most = worker_generations(summary)
    if total < 2 or total <= most:
        return []
    return [Cause(PERSISTENT, label, 0,
                  f"{total} DataLoader worker processes over the run, at most {most} at a time: workers "
                  "are started again (each epoch), and every new worker's first batches stall the loop")]


def diagnose(neck: B.Bottleneck, overlap, summary, facts, graph=None, loops=None, label: str = "run",
             checkpoint_saves: list[tuple[str, int, str]] | None = None) -> list[Cause]:
    """The causes of one run, those that explain ``neck`` first (most likely first).

    ``facts``: :class:`~dftpass.analysis.context.ProgramFacts` (None without the source);
    ``checkpoint_saves``: (path, line, api) of the program's checkpoint saves."""
    explains: list[Cause] = []
    phase = neck.phase if neck.phase != "all" else None
    focus = (overlap.phases or {}).get(neck.phase) if overlap is not None and neck.phase != "all" else \
        (overlap.whole if overlap is not None else None)
    stalled = neck.overlap == B.STALLED or (focus is not None and (focus.fetch_stall_share or 0) >= B.STALL_SHARE)
    if neck.kind in (B.LOADING, B.PREPROCESS) or (neck.kind in (B.EVALUATION, B.TEST) and stalled):
        explains += _loader_causes(neck, focus, overlap, summary, facts, phase, label)
        pre, reads = B.sample_split(summary)
        wait = focus.fetch_wait_s if focus is not None else 0.0
        loading = pre + reads
        if neck.kind == B.PREPROCESS:
            explains.append(Cause(PREPROCESS, *_loader_place(facts, phase, label),
                                  f"transforms and collate take {pre:.3g} s of the {loading:.3g} s spent producing "
                                  "samples: each sample is decoded/augmented again every epoch", phase, True,
                                  {"wait_s": wait, "preprocess_s": pre, "reads_s": reads}))
        elif reads:
            explains.append(Cause(SAMPLE_READS, *_loader_place(facts, phase, label),
                                  f"sample reads take {reads:.3g} s of the {loading:.3g} s spent producing samples",
                                  phase, True, {"wait_s": wait, "preprocess_s": pre, "reads_s": reads}))
    elif neck.kind == B.STARTUP:
        explains += _startup_causes(neck, focus, summary, facts, phase, label)
    elif neck.kind == B.CHECKPOINT:
        seconds = neck.figures.get("checkpoint_s", 0.0)
        saves = [s for key, s in summary.by_key.items() if key[0] == N.CHECKPOINT_CAT]
        count = max((s.count for s in saves), default=0)
        path, line, api = (checkpoint_saves or [(label, 0, "the checkpoint")])[0]
        explains.append(Cause(CHECKPOINT, path, line,
                              f"{api}() inside the loop: {count} saves take {seconds:.3g} s "
                              f"({seconds / max(neck.figures.get('phase_s') or 1e-9, 1e-9):.0%} of the phase), "
                              "and training waits for every one", phase, True,
                              {"checkpoint_s": seconds, "saves": count}))
    elif neck.kind in (B.EVALUATION, B.TEST):
        waits = (focus.fetch_stall_share or 0) if focus is not None else 0
        what = "the evaluation's own compute, not its data, takes the time" if waits < MINOR_STALL else \
            f"mostly the evaluation's own compute; its loop also waits {waits:.0%} of its time for data"
        explains.append(Cause(EVALUATION, label, 0, f"{neck.text}: {what}", phase, True,
                              {"phase_s": neck.figures.get("phase_s", 0.0)}))
        if waits >= MINOR_STALL:  # minGPT: the evaluation's loader has no workers
            others = _loader_causes(neck, focus, overlap, summary, facts, phase, label)
            explains += [dataclasses.replace(c, explains=False) for c in others if c.id != PREFETCH]
    elif focus is not None and waits_materially(focus, overlap):
        others = _loader_causes(neck, focus, overlap, summary, facts, phase, label)
        explains += [dataclasses.replace(c, explains=False) for c in others if c.id != PREFETCH]
    explains += _other_phases(neck, overlap, summary, facts, label)
    others = _source_observations(graph, loops, facts) if graph is not None and loops is not None else []
    seen = {(c.id, c.path, c.line) for c in explains}
    return explains + [c for c in others if (c.id, c.path, c.line) not in seen]


def _loop_phases(overlap) -> dict:
    return {name: p for name, p in ((overlap.phases or {}).items() if overlap is not None else ())
            if name in ("train", "evaluate", "test")}


def waits_materially(phase, overlap) -> bool:
    """Whether a phase that is not stalled still waits enough to report: >= MINOR_STALL of its
    own loop, and of all the loop phases' time (a wait of a few milliseconds in a phase of a
    few batches is not worth a cause)."""
    loops = _loop_phases(overlap)
    total = sum(p.span_s for p in loops.values()) if loops else phase.span_s
    return (phase.fetch_stall_share or 0) >= MINOR_STALL and phase.fetch_wait_s >= MINOR_STALL * total


def _other_phases(neck: B.Bottleneck, overlap, summary, facts, label: str) -> list[Cause]:
    """The loader causes of the loop phases the verdict is not about that wait for data
    (>= :data:`MINOR_STALL` of their own time and of all the loop phases' time), as
    observations named by their phase: minGPT's training hides
    its loading in two workers while its evaluation loads in the training process."""
    out: list[Cause] = []
    for name, phase in sorted(_loop_phases(overlap).items()):
        if name == neck.phase or not waits_materially(phase, overlap):
            continue
        theirs = B.judge_bottleneck(overlap, summary, facts, name)
        out += [dataclasses.replace(c, explains=False)
                for c in _loader_causes(theirs, phase, overlap, summary, facts, name, label) if c.id != PREFETCH]
    return out


def _loader_place(facts, phase: str | None, label: str) -> tuple[str, int]:
    loader = facts.loader_for(phase) if facts is not None and facts.loaders else None
    if loader is not None:
        return loader.path, loader.line
    if facts is not None and facts.entry:
        path, _, line = facts.entry.rpartition(":")
        return path, int(line)
    return label, 0


def _loader_causes(neck, focus, overlap, summary, facts, phase, label) -> list[Cause]:
    """Why the stalled phase's loader does not keep up."""
    wait = focus.fetch_wait_s if focus is not None else 0.0
    span = neck.figures.get("phase_s") or (focus.span_s if focus is not None else 0.0)
    workers_seen = overlap.loading_workers if overlap is not None else 0
    _, at_once = worker_generations(summary)
    loading_main = focus.loading_main_s if focus is not None else 0.0
    figures = {"wait_s": wait, "phase_s": span, "workers": 0}
    where = f" of the {phase} phase" if phase else ""
    if facts is not None and not facts.has_loader:
        path, line = _loader_place(facts, phase, label)
        return [Cause(NO_LOADER, path, line,
                      f"no DataLoader: the training process produces every batch{where} itself, so loading never "
                      "runs while the model computes", phase, True, figures)]
    loader = facts.loader_for(phase) if facts is not None else None
    if loader is None:
        if not workers_seen and loading_main:
            return [Cause(NUM_WORKERS, label, 0,
                          f"no worker process loads: the training process loads every batch{where} itself",
                          phase, True, figures)]
        return []
    causes: list[Cause] = []
    written = loader.setting("num_workers")
    if loader.workers == 0:
        how = "not set (defaults to 0)" if written is None else "0"
        causes.append(Cause(NUM_WORKERS, loader.path, loader.line,
                            f"{loader.callee}(num_workers {how}): batches{where} are loaded in the training "
                            "process, one after the other, never while the model computes", phase, True, figures))
    elif loader.workers is None and not workers_seen and loading_main:
        causes.append(Cause(NUM_WORKERS, loader.path, loader.line,
                            f"{loader.callee}(num_workers={written}) was 0 at run time: no worker process loaded, "
                            f"the training process loaded every batch{where} itself", phase, True, figures))
    else:
        count = loader.workers if loader.workers is not None else at_once
        busy = focus.loading_workers_s if focus is not None else 0.0
        if count and span and busy / (count * span) >= SATURATED:
            figures = {**figures, "workers": count, "workers_busy_s": busy}
            causes.append(Cause(NUM_WORKERS, loader.path, loader.line,
                                f"{loader.callee}(num_workers={written}): {count} worker(s) busy "
                                f"{busy / (count * span):.0%} of the phase and the loop still waits "
                                f"{neck.figures.get('stall_share') or 0:.0%}: too few workers for the loading rate",
                                phase, True, figures))
    prefetch = loader.literal_int("prefetch_factor")
    if prefetch is not None and prefetch <= 1 and loader.workers != 0:
        causes.append(Cause(PREFETCH, loader.path, loader.line,
                            f"{loader.callee}(prefetch_factor={prefetch}): at most {prefetch} batch per worker in "
                            "flight, so a slow batch stalls the loop", phase, True, figures))
    return causes


def _startup_causes(neck, focus, summary, facts, phase, label) -> list[Cause]:
    """Why the first batch of a loop waits: workers started again, or started slowly."""
    count, first = (focus.first_fetches, focus.first_fetch_s) if focus is not None else (0, 0.0)
    total, at_once = worker_generations(summary)
    figures = {"first_fetch_s": first, "first_fetches": count, "workers_total": total, "workers_at_once": at_once}
    loader = facts.loader_for(phase) if facts is not None else None
    path, line = (loader.path, loader.line) if loader is not None else (label, 0)
    causes: list[Cause] = []
    respawned = total >= 2 and total > at_once
    unset = loader is not None and loader.persistent is False and loader.workers != 0
    if respawned or (unset and count > 1):
        seen = f"{total} worker processes over the run, {at_once} at a time" if respawned else \
            f"{count} loops each waited for its first batch"
        causes.append(Cause(PERSISTENT, path, line,
                            f"workers are started again every epoch ({seen}; persistent_workers "
                            f"{'not set' if loader is not None and loader.setting('persistent_workers') is None else 'False'})"
                            f": the waits for each epoch's first batch take {first:.3g} s", phase, True, figures))
    method = ""
    if loader is not None:
        method = (loader.setting("multiprocessing_context") or "").strip("'\"")
    method = method or (facts.start_method if facts is not None else "") or ""
    if any(m in method for m in ("spawn", "forkserver")):
        causes.append(Cause(SPAWN, path, line,
                            f"workers start with {method.split('(')[-1].strip(')') or method}: each one starts a "
                            "new interpreter and imports the program (torch included) before its first batch; "
                            f"the first-batch waits take {first:.3g} s", phase, True, figures))
    return causes


def _source_observations(graph, loops, facts) -> list[Cause]:
    """Observations from the source that do not explain this run's bottleneck on their own."""
    causes: list[Cause] = []
    scope = facts.scope if facts is not None else None
    gpu = facts.gpu if facts is not None else None
    batch_loops = {(f.function, f.loop.index): f for f in loops.of_kind("batch")
                   if scope is None or f.function in scope}
    for function_id, (fs, fn) in graph.functions.items():
        if scope is not None and function_id not in scope:
            continue
        for call in fn.calls:
            if not any((function_id, i) in batch_loops for i in call.loops):
                continue
            if call.method in ("barrier", "Barrier", "Ibarrier"):
                causes.append(Cause(BARRIER, fs.relpath, call.line,
                                    f"{call.callee}() inside the batch loop: every step waits for the slowest "
                                    "rank, which drains the prefetch pipeline"))
            elif gpu and call.method in ("to", "cuda") and dict(call.keywords).get("non_blocking") != "True" \
                    and not any(a == "'cpu'" for a in call.args):
                causes.append(Cause(NON_BLOCKING, fs.relpath, call.line,
                                    f"{call.callee}() without non_blocking=True: the host waits for every copy"))
    for facts_ in batch_loops.values():
        # only a loop that iterates its loader: one whose batches come from next(it), a producer
        # function (get_batch) or a feeding generator is timed there, not by wrapping its iterable
        if facts_.wrapped_by is None and facts_.loop.kind == "for" and facts_.style == "iter":
            fs = graph.file_of(facts_.function)
            causes.append(Cause(UNWRAPPED, fs.relpath, facts_.loop.line,
                                f"batch loop over {facts_.subject} not wrapped with fetch.iter: the trace cannot "
                                "show its loading (dftpass run adds it, ML-R6)"))
    return sorted(causes, key=lambda c: (c.id, c.path, c.line))
