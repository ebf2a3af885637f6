"""Why loading does not overlap compute: causes read from the project's source (analysis.md A-D).

The trace says *that* the training loop waits for data; the source says *why*. Each cause
is linked to the line that shows it:

* A: the DataLoader has no worker processes (``num_workers`` unset or 0), a prefetch depth
  of 0 or 1, or workers that are re-created every epoch (``persistent_workers`` unset);
* B: batches moved to the device with ``.to(device)`` / ``.cuda()`` without
  ``non_blocking=True`` (and ``pin_memory`` off);
* C: a barrier inside the batch loop (``dist.barrier()``, ``MPI.COMM_WORLD.Barrier()``);
* D: a batch loop not wrapped with ``fetch.iter``, so the trace cannot show its loading.

Values that are not literals (``num_workers=args.workers``) cannot be judged from the
source; the run's trace can (no worker process wrote loading events), and the cause says so.
"""

from __future__ import annotations

from dataclasses import dataclass

from dftpass.core.callgraph import CallGraph
from dftpass.core.loops import LoopAnalysis

NUM_WORKERS, PREFETCH, PERSISTENT = "A.num_workers", "A.prefetch_factor", "A.persistent_workers"
NON_BLOCKING, BARRIER, UNWRAPPED = "B.non_blocking", "C.barrier_in_loop", "D.unwrapped_loop"


@dataclass(frozen=True)
class Cause:
    id: str
    path: str
    line: int
    message: str

    def location(self) -> str:
        return f"{self.path}:{self.line}"


def trace_causes(summary, label: str) -> list[Cause]:
    """Causes the trace itself shows: worker processes that came and went during the run
    (more workers over the run than ever ran at once: they were started again, each epoch)."""
    workers: dict[tuple, tuple[int, int]] = {}
    for p in summary.workers():
        if p.first_ns is None or p.last_ns is None:
            continue
        key = (p.host, p.pid)
        first, last = workers.get(key, (p.first_ns, p.last_ns))
        workers[key] = (min(first, p.first_ns), max(last, p.last_ns))
    if len(workers) < 2:
        return []
    edges = sorted([(a, 1) for a, _ in workers.values()] + [(b, -1) for _, b in workers.values()])
    running = most = 0
    for _, step in edges:
        running += step
        most = max(most, running)
    if len(workers) <= most:
        return []
    return [Cause(PERSISTENT, label, 0,
                  f"{len(workers)} DataLoader worker processes over the run, at most {most} at a time: workers "
                  "are started again (each epoch), and every new worker's first batches stall the loop")]


def _is_literal(text: str | None, *values: str) -> bool:
    return text is not None and text in values


def find_causes(graph: CallGraph, loops: LoopAnalysis, factories: list[str],
                workers_traced: bool | None) -> list[Cause]:
    """Every cause A-D in the project. ``workers_traced``: whether the run's trace has
    worker processes with loading events (None when unknown)."""
    causes: list[Cause] = []
    batch_loops = {(f.function, f.loop.index): f for f in loops.of_kind("batch")}
    for function_id, (fs, fn) in graph.functions.items():
        for call in fn.calls:
            last = graph.qualify(fs, call.callee).rsplit(".", 1)[-1]
            if last in factories:
                causes.extend(_loader_causes(fs.relpath, call, workers_traced))
            in_batch_loop = any((function_id, i) in batch_loops for i in call.loops)
            if not in_batch_loop:
                continue
            if call.method in ("barrier", "Barrier", "Ibarrier"):
                causes.append(Cause(BARRIER, fs.relpath, call.line,
                                    f"{call.callee}() inside the batch loop: every step waits for the slowest "
                                    "rank, which drains the prefetch pipeline"))
            elif call.method in ("to", "cuda") and dict(call.keywords).get("non_blocking") != "True" \
                    and not any(a == "'cpu'" for a in call.args):
                causes.append(Cause(NON_BLOCKING, fs.relpath, call.line,
                                    f"{call.callee}() without non_blocking=True: the host waits for every copy"))
    for facts in batch_loops.values():
        if facts.wrapped_by is None and facts.loop.kind == "for":
            fs = graph.file_of(facts.function)
            causes.append(Cause(UNWRAPPED, fs.relpath, facts.loop.line,
                                f"batch loop over {facts.subject} not wrapped with fetch.iter: the trace cannot "
                                "show its loading (dftpass run adds it, ML-R6)"))
    return sorted(causes, key=lambda c: (c.id, c.path, c.line))


def _loader_causes(relpath: str, call, workers_traced: bool | None) -> list[Cause]:
    kw = dict(call.keywords)
    out: list[Cause] = []
    workers = kw.get("num_workers")
    if workers is None or _is_literal(workers, "0"):
        how = "not set (defaults to 0)" if workers is None else "0"
        out.append(Cause(NUM_WORKERS, relpath, call.line,
                         f"{call.callee}(num_workers {how}): batches are loaded in the training process, "
                         "one after the other, never while the model computes"))
    elif workers_traced is False:
        out.append(Cause(NUM_WORKERS, relpath, call.line,
                         f"{call.callee}(num_workers={workers}): no worker process left loading events in the "
                         "trace: check the value at run time (0?) and the start method (spawn workers need "
                         "a worker_init_fn that starts tracing)"))
    no_workers = workers is None or _is_literal(workers, "0")
    prefetch = kw.get("prefetch_factor")
    if _is_literal(prefetch, "0", "1"):
        out.append(Cause(PREFETCH, relpath, call.line,
                         f"{call.callee}(prefetch_factor={prefetch}): at most {prefetch} batch per worker in "
                         "flight, so a slow batch stalls the loop"))
    if not no_workers and kw.get("persistent_workers") in (None, "False"):
        out.append(Cause(PERSISTENT, relpath, call.line,
                         f"{call.callee}(persistent_workers not set): workers are started again at every epoch"))
    return out
