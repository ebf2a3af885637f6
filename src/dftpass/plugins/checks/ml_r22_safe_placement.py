"""ML-R22: dftracer regions placed where they work: decorator order, coroutines, nesting, dft_fn.log."""

from __future__ import annotations

from dftpass.api import (
    Case, Decorate, Expect, Finding, GENERIC_DECORATORS, module_loggers, Pass, PassKind,
    region_of, RULES_THAT_PLACE, Severity, WrapBody,
)

#: decorators that turn a function into something else: a region above them wraps that
#: object (a property, a cache, a static method), not the function
WRAPPING_DECORATORS = ("property", "cached_property", "setter", "getter", "deleter", "staticmethod", "classmethod",
                       "cache", "lru_cache")


def _last(text: str) -> str:
    return text.split("(", 1)[0].rsplit(".", 1)[-1]


class SafePlacement(Pass):
    """Report dftracer regions that are placed where they break the program or lose events.

    What it does:
        Checks every dftracer region, written by hand or planned by another rule in this
        run, for four mistakes:

        - a region decorator **above** ``@property``, ``@cached_property``, a setter,
          ``@staticmethod``, ``@classmethod`` or ``@functools.cache``/``lru_cache``: it wraps
          the object that decorator made, not the function (an error);
        - a region decorator on an ``async def`` or a generator: it times only the creation
          of the coroutine or generator (a warning; a ``with`` inside the body is right);
        - the same ``ai`` node nested in itself: a function with region X whose body has
          ``with X:`` or that calls a function with region X (``ai`` nodes are not
          re-entrant: the outer event is lost; a warning);
        - ``dft_fn``'s ``.log`` where it would raise: dftracer converts the arguments and
          ``self`` attributes named ``epoch``, ``step``, ``image_idx`` and ``image_size`` to
          numbers on every call with tracing on, and ``None``, a string or a method raises in
          the user's code (an error, naming the default, the call or the class that gives
          it). The answer is the ``log_safety`` analysis's, the one ML-R19 places by: a
          parameter every call in the project gives a number is safe.

    Why:
        Each of these was seen in hand-annotated projects and in the peer tool's output
        (peer.md): the program breaks only with tracing on, or the trace silently misses
        the events that matter.

    Example:
        ``@ai.compute\\n@property\\ndef loss(self): ...`` is reported: move the region into
        the body (``with ai.compute:``), or under ``@property``.

    Fix safety:
        A check: it changes nothing. dftpass's own regions follow these rules by
        construction (:mod:`dftpass.core.placement`); a finding on a planned region means
        two rules disagree, and is a dftpass bug worth reporting.

    Options:
        None.
    """

    id = "ML-R22"
    title = "Safe placement"
    kind = PassKind.CHECK
    requires = ("callgraph", "log_safety")
    after = RULES_THAT_PLACE
    tags = ("safety",)

    VALID = [
        "from dftracer.python import ai\n\n\nclass M:\n    @property\n    @ai.compute\n    def loss(self):\n"
        "        return 1\n",
        "from dftracer.python import dft_fn\n\ndlp = dft_fn('m', name='m')\n\n\nclass M:\n    @staticmethod\n"
        "    @dlp.log_static\n    def build(n):\n        return n\n",
        "from dftracer.python import ai\n\n\nasync def load(x):\n    with ai.data.item:\n        return x\n",
        # DLIO's readers: a step parameter every call in the project gives a number is safe, as
        # ML-R19 decides before it places @dlp.log (one answer: the log_safety analysis)
        "from dftracer.python import dft_fn\n\ndlp = dft_fn('reader', name='reader')\n\n\nclass Reader:\n"
        "    @dlp.log\n    def read_index(self, image_idx, step):\n        return image_idx * step\n\n\n"
        "def run(reader, n):\n    for step in range(n):\n        reader.read_index(step % 4, step + 1)\n",
    ]
    INVALID = [
        Case(
            "import functools\n\nfrom dftracer.python import ai\n\n\nclass M:\n    @ai.compute\n    @property\n"
            "    def loss(self):\n        return 1\n\n    @ai.data.item\n    @functools.lru_cache(maxsize=None)\n"
            "    def sample(self, i):\n        return i\n",
            findings=(Expect("error", "above @property", line=9), Expect("error", "above @functools.lru_cache", line=14)),
        ),
        Case(
            "from dftracer.python import ai\n\n\n@ai.data.item\nasync def load(x):\n    return x\n\n\n"
            "@ai.dataloader.fetch\ndef batches(xs):\n    for x in xs:\n        yield x\n",
            findings=(Expect("warning", "coroutine", line=5), Expect("warning", "generator", line=10)),
        ),
        Case(
            "from dftracer.python import ai\n\n\n@ai.data.preprocess\ndef crop(x):\n    return x\n\n\n"
            "@ai.data.preprocess\ndef augment(x):\n    return crop(x)\n",
            findings=(Expect("warning", "nested in itself", line=10),),
        ),
        Case(
            "from dftracer.python import dft_fn\n\ndlp = dft_fn('train', name='train')\n\n\n@dlp.log\n"
            "def evaluate(model, step=None):\n    return model\n",
            findings=(Expect("error", "parameter step", line=7),),
        ),
        Case(
            # a caller passes None, and a class with a step() method: dft_fn.log raises on both
            "from dftracer.python import dft_fn\n\ndlp = dft_fn('m', name='m')\n\n\n@dlp.log\n"
            "def save(path, step):\n    return path\n\n\nclass Sched:\n    def step(self):\n        pass\n\n"
            "    @dlp.log\n    def state(self):\n        return {}\n\n\nsave('a.pt', None)\n",
            findings=(Expect("error", "<module> (line 20) passes None as its parameter step", line=7),
                      Expect("error", "Sched.step is a method", line=16)),
        ),
    ]

    def run(self, ctx) -> None:
        graph = ctx.analysis("callgraph")
        self._safety = ctx.analysis("log_safety")
        nodes: dict[str, set[str]] = {}  # function id -> ai nodes of its regions
        for function_id, (fs, fn) in graph.functions.items():
            loggers = module_loggers(fs)
            for k, d in enumerate(fn.decorators):
                region = region_of(fs, d, loggers)
                if region is None:
                    continue
                self._order(ctx, fs, fn, d, fn.decorators[k + 1:], region)
                self._coroutine(ctx, fs, fn, f"@{d}", region)
                self._magic(ctx, fs, fn, function_id, f"@{d}", region)
                if not region.startswith(("dft_fn", "dftracer")):
                    nodes.setdefault(function_id, set()).add(region)
            for w in fn.withs:
                region = region_of(fs, w, loggers)
                if region and not region.startswith(("dft_fn", "dftracer")):
                    if region in nodes.get(function_id, ()):
                        self._nested(ctx, fs, fn, region, f"its body has `with {w}:`")
            edit_set = ctx.edit_sets.get(fs.relpath)
            for e in (edit_set.edits if edit_set else ()):
                if isinstance(e, Decorate) and e.func == fn.stmt and e.rule != "ML-R19":
                    node = e.code.split(".", 1)[1] if "." in e.code else ""
                    self._coroutine(ctx, fs, fn, f"@{e.code} (planned by {e.rule})", node)
                    nodes.setdefault(function_id, set()).add(node)
                elif isinstance(e, WrapBody) and e.owner == fn.stmt and e.with_item and e.rule != "ML-R19" \
                        and not e.prologue:
                    nodes.setdefault(function_id, set()).add(e.with_item.split(".", 1)[1] if "." in e.with_item else "")
        for function_id, own in sorted(nodes.items()):
            fs, fn = graph.functions[function_id]
            for i, call in enumerate(fn.calls):
                for target in graph.targets(function_id, i):
                    shared = own & nodes.get(target, set())
                    for node in sorted(shared):
                        self._nested(ctx, fs, fn, node, f"it calls {graph.fn(target).qualname}() (line {call.line}), "
                                     "which has the same region")

    def _order(self, ctx, fs, fn, decorator: str, below: tuple[str, ...], region: str) -> None:
        for other in below:
            if _last(other) in WRAPPING_DECORATORS and not (_last(decorator) == "log_static" and
                                                              _last(other) == "staticmethod"):
                ctx.report(Finding(self.id, f"@{decorator} above @{other.split('(', 1)[0]} on {fn.qualname}: it wraps "
                                   f"the object @{_last(other)} made, not the function; put it under @{_last(other)} "
                                   "(next to `def`) or use a `with` region in the body",
                                   fs.relpath, fn.line, fn.col, Severity.ERROR))

    def _coroutine(self, ctx, fs, fn, where: str, region: str) -> None:
        what = "coroutine" if fn.is_async else "generator" if fn.is_generator else None
        if what:
            ctx.report(Finding(self.id, f"{where} on {fn.qualname}: on a {what} function the decorator times only "
                               f"the creation of the {what}; put a `with` region inside the body",
                               fs.relpath, fn.line, fn.col, Severity.WARNING))

    def _magic(self, ctx, fs, fn, function_id: str, where: str, region: str) -> None:
        if not region.startswith("dft_fn.") or region.rsplit(".", 1)[-1] not in GENERIC_DECORATORS:
            return
        why = self._safety.unsafe(function_id)  # the answer ML-R19 placed its own regions by
        if why:
            ctx.report(Finding(self.id, f"{where} on {fn.qualname}: with tracing on, dft_fn.log reads the "
                               f"arguments and attributes named epoch, step, image_idx and image_size as numbers, "
                               f"and {why}; use an `ai` region instead (it reads no arguments)",
                               fs.relpath, fn.line, fn.col, Severity.ERROR))

    def _nested(self, ctx, fs, fn, node: str, how: str) -> None:
        ctx.report(Finding(self.id, f"region ai.{node} on {fn.qualname} is nested in itself: {how}; ai nodes are "
                           f"not re-entrant, so only the inner event is kept (use X.derive(name=...) for one of them)",
                           fs.relpath, fn.line, fn.col, Severity.WARNING))
