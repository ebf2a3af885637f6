"""Sampled step regions (issue 31): the regions a training step writes, written for one step
in k, with the "off" path a counter and an attribute test.

What it does
    ``install(every=k)`` (``initialize(sample_every=k)``, or ``DFTPASS_SAMPLE_EVERY=k`` in the
    environment, which rules) turns the per-step subtrees of dftracer's ``ai`` tree
    (``compute``, ``device``, ``comm``, ``data``, ``dataloader``) into sampled regions. The
    batch loop is the clock: each batch ``fetch.iter`` hands out (or each ``fetch`` region
    around ``next(it)``) is a step, traced when it is one of the process's first ``warmup``
    steps, the first or the last step of a pass over the loader (its length known), or every
    k-th step after the warm-up. An untraced step writes no event, and its ``update`` calls
    are dropped (the traced step's own update sets its values). The phase, epoch, evaluation
    and checkpoint regions (``pipeline``, ``checkpoint``, ``other``) are always written, and
    so is everything between two passes.

Why not dftracer's own ``enable()``/``disable()``
    ``fetch.iter`` reads the flag at each point of its cycle, so a step switched off between
    the yield and the resume keeps the start time of the last traced step: measured, a 5 ms
    step's ``fetch.block`` read 26.9 ms (docs/decisions.md, "Sampled step regions need
    dftpass's own gate"). Here a region decides when it opens and closes on the same decision,
    and the batch loop's events are written by a sampled iterator with dftracer's names, cat,
    arguments and event scopes (its first wait holds the making of the loader's iterator,
    where a DataLoader starts its workers).

What the trace says
    The process's trace ends with ``CM`` lines ``dftpass.sampling.*`` (written when it
    finalizes): k, the warm-up, the steps and the traced steps, every step's wait and body
    timed (traced or not), the longest untraced ones, and each pass with its span on the
    trace's clock. The analysis counts each traced step for the steps it stands for
    (``dftpass.traces.sampling``). The ``count`` argument of a traced ``fetch.iter`` event is
    its step in the pass.

What it leaves alone
    DataLoader worker processes trace every sample: the overlap of loading and compute is
    measured bucket by bucket, and a worker sampled on its own counter would load beside
    untraced steps (docs/decisions.md, "Sampled steps: how the gate works"). A forked child
    starts with the gate open and no counts.

Costs: an untraced step +1.1% ± 1 of a 0.9 ms step in situ against tracing off
(bench/overhead.py and docs/performance.md, "Sampled steps"); tracing off
(``DFTRACER_ENABLE`` unset) installs nothing.
"""

from __future__ import annotations

import json
import os
import time

#: the environment that sets the sampling at run time (over the annotation's own k)
ENV_EVERY, ENV_WARMUP = "DFTPASS_SAMPLE_EVERY", "DFTPASS_SAMPLE_WARMUP"
#: the steps of a process traced before sampling starts
DEFAULT_WARMUP = 2
#: the subtrees of ``ai`` a step writes, gated by the step (by their path under ``ai``)
GATED = ("compute", "device", "comm", "data", "dataloader")
#: the batch loop's node: the clock of the steps
CLOCK = "dataloader.fetch"
#: the prefix of the trace's metadata lines (read by dftpass.traces.sampling)
META_PREFIX = "dftpass.sampling."
#: the passes a trace describes one by one (a longer run's last record takes in the rest)
MAX_PASSES = 10_000


class Gate:
    """The step counter and its figures; ``on`` is what a gated region tests."""

    __slots__ = ("on", "every", "warmup", "steps", "traced", "wait_ns", "body_ns", "wait_traced_ns",
                 "body_traced_ns", "untraced_wait_max_ns", "untraced_body_max_ns", "written",
                 "passes", "_open", "last_end")

    def __init__(self, every: int = 1, warmup: int = DEFAULT_WARMUP) -> None:
        self.every, self.warmup = max(1, int(every)), max(0, int(warmup))
        self.on = True
        self.steps = self.traced = 0
        self.wait_ns = self.body_ns = self.wait_traced_ns = self.body_traced_ns = 0
        self.untraced_wait_max_ns = self.untraced_body_max_ns = 0
        self.written = False
        #: the closed passes over a loader: [start, end (dftracer's clock), steps, traced, wait_ns,
        #: wait_traced_ns, body_ns, body_traced_ns], a nested pass's steps not in its parent's
        self.passes: list[list[int]] = []
        #: the open passes, outermost first: [start, counters at the start, nested counters, on before]
        self._open: list[list] = []
        #: dftracer's clock at the end of the last wait of a pass of fetch regions
        self.last_end = 0

    def tick(self, first: bool = False, last: bool = False) -> bool:
        """A new step: traced or not."""
        n = self.steps
        self.steps = n + 1
        on = first or last or n < self.warmup or (n - self.warmup) % self.every == 0
        self.on = on
        self.traced += on
        return on

    def _counters(self) -> tuple[int, ...]:
        return (self.steps, self.traced, self.wait_ns, self.wait_traced_ns, self.body_ns, self.body_traced_ns)

    def open_pass(self, now: int, implicit: bool = False) -> None:
        """A pass over a loader starts (``now``: dftracer's clock); one inside another's step
        (an evaluation every n steps) is a pass of its own. ``implicit``: the steps of fetch
        regions around ``next(it)``, which have no end of their own: it ends where a pass over
        a loader starts (and a later fetch region opens another)."""
        if self._open and self._open[-1][4]:
            self.close_pass(self.last_end or now)
        self._open.append([now, self._counters(), (0,) * 6, self.on if self._open else True, implicit])

    def close_pass(self, now: int) -> None:
        """The innermost pass ended: its figures are kept; what runs until the next step is
        traced as the step around it was (every region, between passes)."""
        if not self._open:
            return
        start, mark, nested, before, _ = self._open.pop()
        total = tuple(c - m for c, m in zip(self._counters(), mark))
        own = [t - n for t, n in zip(total, nested)]
        if self._open:
            parent = self._open[-1]
            parent[2] = tuple(n + t for n, t in zip(parent[2], total))
            # the step around the pass had the pass's time in its body
            elapsed = total[2] + total[4]
            self.body_ns -= elapsed
            if before:
                self.body_traced_ns -= elapsed
        if len(self.passes) < MAX_PASSES:
            self.passes.append([start, now, *own])
        else:  # a very long run: the last record takes in the rest
            last = self.passes[-1]
            last[1] = now
            last[2:] = [a + b for a, b in zip(last[2:], own)]
        self.on = before

    def untick(self, on: bool) -> None:
        """The step :meth:`tick` counted was none (the loader had no more batches)."""
        self.steps -= 1
        self.traced -= on

    def account(self, on: bool, wait_ns: int, body_ns: int) -> None:
        """One step's wait for its batch and its body."""
        self.wait_ns += wait_ns
        self.body_ns += body_ns
        if on:
            self.wait_traced_ns += wait_ns
            self.body_traced_ns += body_ns
        else:
            if wait_ns > self.untraced_wait_max_ns:
                self.untraced_wait_max_ns = wait_ns
            if body_ns > self.untraced_body_max_ns:
                self.untraced_body_max_ns = body_ns

    def figures(self) -> dict[str, object]:
        """What the trace's metadata says (:data:`META_PREFIX` + key)."""
        return {"passes": json.dumps(self.passes, separators=(",", ":")), "every": self.every,
                "warmup": self.warmup, "steps": self.steps, "traced": self.traced, "wait_ns": self.wait_ns, "wait_traced_ns": self.wait_traced_ns,
                "body_ns": self.body_ns, "body_traced_ns": self.body_traced_ns,
                "untraced_wait_max_ns": self.untraced_wait_max_ns,
                "untraced_body_max_ns": self.untraced_body_max_ns}


#: the process's gate; None: nothing sampled
GATE: Gate | None = None
#: (a dftracer node class, the maker) -> its sampled class
_CLASSES: dict[tuple[type, object], type] = {}


def every_from_env(default: int | None) -> int:
    """k: the environment's ``DFTPASS_SAMPLE_EVERY`` over the annotation's, else 1."""
    raw = os.environ.get(ENV_EVERY, "").strip()
    return max(1, int(raw) if raw.isdigit() else int(default or 1))


def install(every: int, warmup: int | None = None, log=None) -> Gate | None:
    """Sample this process's step regions one step in ``every`` (1: nothing to do). ``log``:
    dftracer's tracer, whose ``finalize`` then writes the figures first. Once per process."""
    global GATE
    if every <= 1 or GATE is not None:
        return GATE
    if warmup is None:
        raw = os.environ.get(ENV_WARMUP, "").strip()
        warmup = int(raw) if raw.isdigit() else DEFAULT_WARMUP
    from dftracer.python import ai

    GATE = Gate(every, warmup)
    for path in (*GATED, CLOCK):  # the clock last: it is below a gated subtree
        node = ai
        for part in path.split("."):
            node = getattr(node, part)
        _swap(node, _clock_class if path == CLOCK else _region_class)
    os.environ[ENV_EVERY] = str(every)  # the program's own child processes sample alike
    if log is not None:
        _write_on_finalize(log)
    os.register_at_fork(after_in_child=_forked_child)
    return GATE


def _forked_child() -> None:
    """A forked child (a DataLoader worker) traces every region and counts nothing."""
    global GATE
    if GATE is not None:
        GATE = Gate(1, 0)
        GATE.written = True


def _swap(node, make) -> None:
    """Give ``node`` and the nodes below it their sampled class (in place: a function the
    program decorated with it already holds the object)."""
    key = (getattr(type(node), "_dftpass_base", type(node)), make)  # dftracer's own class
    if key not in _CLASSES:
        _CLASSES[key] = make(key[0])
    node.__class__ = _CLASSES[key]
    for child in getattr(node, "_children", {}).values():
        _swap(child, make)


def _write_on_finalize(log) -> None:
    """Write the figures as the trace's last metadata, before dftracer closes the file (the
    program's own ``log.finalize()`` or the one at exit)."""
    original = log.finalize

    def finalize() -> None:
        gate = GATE
        if gate is not None and not gate.written and log.logger is not None:
            gate.written = True
            while gate._open:  # a pass of fetch regions (or one cut short) ends with the program
                gate.close_pass(gate.last_end or log.get_time())
            for key, value in gate.figures().items():
                log.log_metadata_event(META_PREFIX + key, str(value))
        original()

    log.finalize = finalize
    if log.logger is not None:
        log.log_metadata_event(META_PREFIX + "every", str(GATE.every))


def _region_class(base: type) -> type:
    """A node class whose regions open only on traced steps, and whose updates are dropped on
    untraced ones."""

    class Sampled(base):
        def __enter__(self):
            if GATE is None or GATE.on:
                self._dftpass_open = True
                return base.__enter__(self)
            return self

        def __exit__(self, *exc):
            # closed on the decision it opened with (a region open across a step's start)
            if self.__dict__.pop("_dftpass_open", False):
                return base.__exit__(self, *exc)
            return None

        def update(self, epoch=None, step=None, image_idx=None, image_size=None, args=None):
            # an untraced step's update is dropped: its values would only be overwritten by the
            # next traced step's own update (the per-step update runs after the step's batch,
            # and between passes the gate is open). Deferring them cost 4.5% of a 1 ms step in situ.
            gate = GATE
            if gate is None or gate.on:
                return base.update(self, epoch=epoch, step=step, image_idx=image_idx, image_size=image_size,
                                   args=args)
            return self

        def derive(self, name):
            child = base.derive(self, name)
            _swap(child, _region_class)
            return child

    Sampled.__name__ = Sampled.__qualname__ = f"Sampled{base.__name__}"
    Sampled._dftpass_base = base
    return Sampled


def _clock_class(base: type) -> type:
    """The batch loop's node: each batch is a step (``iter``, or a ``start``/``stop`` pair
    around ``next(it)``), timed always and traced when the gate says so."""
    region = _region_class(base)

    class SampledClock(region):
        def __enter__(self):
            gate = GATE
            now = time.perf_counter_ns()
            held = self.__dict__.get("_dftpass_step")
            if held is not None and gate is not None:  # the previous step's body ends here
                on, wait = held
                gate.account(on, wait, now - self.__dict__.get("_dftpass_waited", now))
            if gate is not None:
                if not gate._open:  # fetch regions around next(it): one pass until a loader's pass
                    gate.open_pass(self.get_time(), implicit=True)
                gate.tick()
            self._dftpass_started = now
            return region.__enter__(self)

        def __exit__(self, *exc):
            now = time.perf_counter_ns()
            gate = GATE
            if gate is not None:
                self._dftpass_step = (gate.on, now - self.__dict__.get("_dftpass_started", now))
                self._dftpass_waited = now
                gate.last_end = self.get_time()
            return region.__exit__(self, *exc)

        def iter(self, iterator, *, include_block=True, include_iter=True, iter_name=None, block_name=None):
            if GATE is None:
                return base.iter(self, iterator, include_block=include_block, include_iter=include_iter,
                                 iter_name=iter_name, block_name=block_name)
            return _sampled_iter(self, iterator, include_block, include_iter, iter_name, block_name)

    SampledClock.__name__ = SampledClock.__qualname__ = f"SampledClock{base.__name__}"
    return SampledClock


def _sampled_iter(node, iterator, include_block, include_iter, iter_name, block_name):
    """dftracer's ``fetch.iter`` (the wait for each batch, ``<name>.iter``, and the loop's body,
    ``<name>.block``, in the same event scopes), for the traced steps only."""
    from dftracer.python import dftracer
    from dftracer.python.ai_common import ITER_COUNT_NAME, get_iter_block_name, get_iter_handle_name
    from dftracer.python.common import TagDType, TagType, TagValue

    profiler = node.profiler
    iter_name = iter_name or get_iter_handle_name(profiler._name)
    block_name = block_name or get_iter_block_name(profiler._name)
    tracer = dftracer.get_instance()
    native = tracer.logger
    clock = time.perf_counter_ns
    try:
        total = len(iterator)
    except Exception:  # an iterable without a length: its last step is not known in advance
        total = None
    source = None  # made inside the first wait, as dftracer's iter does: a DataLoader starts its workers there
    index = 0
    scope_open = False
    gate = GATE
    gate.open_pass(native.get_time() if native is not None else 0)
    last = total - 1 if total is not None else -1
    try:
        while True:
            on = gate.tick(first=index == 0, last=index == last)
            traced = on and native is not None and profiler._enable
            if traced:
                native.enter_event()
                scope_open = True
                start = native.get_time()
            began = clock()
            try:
                if source is None:
                    source = iter(iterator)
                value = next(source)
            except StopIteration:
                gate.untick(on)
                return
            got = clock()
            if traced:
                end = native.get_time()
                native.exit_event()
                native.enter_event()
                t0 = native.get_time()
            yield value
            done = clock()
            index += 1
            gate.account(on, got - began, done - got)
            if traced:
                t1 = native.get_time()
                profiler._arguments_int[ITER_COUNT_NAME] = TagValue(index, TagDType.INT, TagType.KEY).value()
                args = dict(int_args=profiler._arguments_int, float_args=profiler._arguments_float,
                            string_args=profiler._arguments_string)
                if include_iter:
                    native.log_event(name=iter_name, cat=profiler._cat, start_time=start, duration=end - start,
                                     **args)
                if include_block:
                    native.log_event(name=block_name, cat=profiler._cat, start_time=t0, duration=t1 - t0, **args)
                native.exit_event()
                scope_open = False
    finally:
        if scope_open:
            native.exit_event()
        gate.close_pass(native.get_time() if native is not None else 0)
