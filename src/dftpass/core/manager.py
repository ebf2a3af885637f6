"""The pass manager: discovers passes through pluggy, selects, orders and runs them.

1. **Discovery.** Built-in plugins (:mod:`dftpass.plugins.builtin`) and third-party plugins
   from the ``dftpass`` entry-point group implement ``dftpass_passes()``; ``plugins.load``
   adds local modules. ``DFTPASS_DISABLE_PLUGIN_AUTOLOAD=1`` skips entry points and
   ``plugins.disable`` blocks single ones. Two passes with one id are an error naming both
   plugins.
2. **Selection.** Rules (transform and check passes) are selected by the configuration;
   analyses join the pipeline when a selected pass requires them, and otherwise are
   computed only if some pass asks for them (``ctx.analysis``).
3. **Ordering.** ``requires`` and ``after`` become the edges of a networkx DAG, and the
   pipeline is its topological order with ties broken by id (``ML-R2`` before ``ML-R10``),
   never by registration order. A missing requirement or a cycle is an error naming the passes.
4. **Running.** Each pass gated on frameworks runs only when detection found one of them;
   every pass is timed (``--time-passes``).
"""

from __future__ import annotations

import functools
import importlib
import importlib.metadata
import os
import re
import time
from typing import Iterable

import attrs
import pluggy
import structlog

from dftpass.core import hookspecs
from dftpass.core.config import Config, ConfigError, Value
from dftpass.core.context import PassTiming, RunContext
from dftpass.core.errors import PluginError, UserError
from dftpass.core.findings import Finding, Severity
from dftpass.core.passes import Pass, PassKind, option_fields
from dftpass.core.project import TOOL
from dftpass.core.selection import Selection, is_pattern

log = structlog.get_logger("dftpass")

AUTOLOAD_ENV = "DFTPASS_DISABLE_PLUGIN_AUTOLOAD"
BUILTIN_PLUGIN = "dftpass.plugins.builtin"
#: the distribution whose entry points load even with auto-loading off: the framework
#: plugins dftpass ships (``jax``, ``lightning``, ``tensorflow`` in pyproject.toml) register
#: through entry points like any third party's, and their names are what ``plugins.disable``
#: takes
OWN_DISTRIBUTION = "dftpass"
#: the analysis that tells a program from a library: transform passes do not run on a library
LIBRARY_GATE = "programs"


class PipelineError(UserError):
    """The passes cannot form a pipeline (duplicate id, missing requirement, cycle)."""


def natural_key(pass_id: str) -> tuple:
    return tuple(int(p) if p.isdigit() else p for p in re.split(r"(\d+)", pass_id))


@attrs.define
class PluginInfo:
    name: str
    module: str
    passes: list[str]
    builtin: bool


@functools.lru_cache(maxsize=1)
def _entry_points() -> tuple:
    """The ``dftpass`` entry points of the installed distributions. Scanning the installed
    distributions takes ~45 ms; the command line needs them twice (options, then passes)."""
    return tuple(importlib.metadata.entry_points(group=hookspecs.PROJECT_NAME))


def _distribution(ep) -> str:
    return getattr(getattr(ep, "dist", None), "name", "") or ""


def own_plugins() -> dict[str, str]:
    """The plugins dftpass's own distribution declares besides the built-in one: entry
    point name -> module (the framework plugins)."""
    return {ep.name: ep.value for ep in _entry_points()
            if _distribution(ep) == OWN_DISTRIBUTION and ep.name != "builtin"}


@attrs.frozen
class PluginFailure:
    """A plugin that could not be loaded: skipped, and said."""

    name: str
    distribution: str
    error: str

    def __str__(self) -> str:
        dist = f" (distribution {self.distribution})" if self.distribution else ""
        return f"plugin {self.name!r}{dist} cannot be loaded and is skipped: {self.error}"


def make_plugin_manager(disable: Iterable[str] = (), load: Iterable[str] = (),
                        failures: list[PluginFailure] | None = None) -> pluggy.PluginManager:
    """A pluggy manager with the built-in plugin, the entry-point plugins (unless
    ``DFTPASS_DISABLE_PLUGIN_AUTOLOAD=1``) minus ``disable``, and the modules in ``load``.
    A plugin that fails to import is skipped and added to ``failures``: one broken plugin
    does not take the tool down."""
    failures = failures if failures is not None else []
    pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    pm.register(importlib.import_module(BUILTIN_PLUGIN), name="builtin")
    for name in disable:
        pm.set_blocked(name)
    autoload = os.environ.get(AUTOLOAD_ENV, "") not in ("1", "true", "yes")
    for ep in _entry_points():
        if pm.get_plugin(ep.name) is not None or pm.is_blocked(ep.name):
            continue  # "builtin" is dftpass's own entry point, registered above
        dist = _distribution(ep)
        if not autoload and dist != OWN_DISTRIBUTION:
            continue
        try:
            plugin = ep.load()
        except Exception as exc:  # noqa: BLE001 - a plugin's bug must not stop dftpass
            failures.append(PluginFailure(ep.name, dist, f"{type(exc).__name__}: {exc}"))
            continue
        pm.register(plugin, name=ep.name)
    for module_name in load:
        try:
            module = importlib.import_module(module_name)
        except Exception as exc:  # noqa: BLE001
            failures.append(PluginFailure(module_name, "", f"{type(exc).__name__}: {exc}"))
            continue
        if not pm.is_registered(module):
            pm.register(module, name=module_name)
    return pm


def call_hook(pm: pluggy.PluginManager, name: str, **kwargs) -> list:
    """Call hook ``name`` on every plugin, one at a time, so that an exception names the
    plugin that raised it."""
    return [result for _, result in hook_results(pm, name, **kwargs)]


def hook_results(pm: pluggy.PluginManager, name: str, **kwargs) -> list[tuple[str, object]]:
    """``(plugin name, result)`` of every plugin's ``name`` hook that returned something."""
    results = []
    for impl in reversed(getattr(pm.hook, name).get_hookimpls()):
        try:
            result = impl.function(**{k: v for k, v in kwargs.items() if k in impl.argnames})
        except Exception as exc:
            raise PluginError(f"plugin {impl.plugin_name!r} failed in its {name} hook: "
                              f"{type(exc).__name__}: {exc}") from exc
        if result is not None:
            results.append((impl.plugin_name, result))
    return results


#: the kinds of library facts plugins may contribute (hookspecs.dftpass_knowledge): lists add
#: up across plugins, tables add keys
KNOWLEDGE_LISTS = ("module_bases", "module_base_prefixes", "module_call_methods", "process_launchers",
                   "process_keywords", "loader_factories", "loader_modules", "transparent_wrappers",
                   "compilers", "gradient_calls", "optimizer_calls", "optimizer_methods", "loop_models",
                   "dataset_bases", "iterable_dataset_bases", "model_factories", "io_calls",
                   "log_methods", "optimizer_classes", "no_grad", "identity_methods", "passthrough_calls",
                   "load_state_methods", "checkpoint_waits", "load_result", "collective_nonblocking",
                   "mpi_communicators", "mpi_derived_communicators", "collective_waits")
KNOWLEDGE_TABLES = ("loader_names", "framework_phases", "checkpoint_functions", "checkpoint_objects", "checkpoint_methods",
                    "accelerator_methods", "save_object", "checkpoint_io_measure", "collective_functions",
                    "collective_objects", "mpi_methods", "checkpoint_hooks")
KNOWLEDGE_KINDS = KNOWLEDGE_LISTS + KNOWLEDGE_TABLES


def merge_knowledge(given: list[tuple[str, dict]]) -> dict:
    """``(plugin, facts)`` pairs added up by kind: lists as tuples (each value once), tables as
    dicts. An unknown kind, a list where a table belongs (or the reverse), and a key two
    plugins give different values are errors that name the plugin."""
    out: dict = {k: [] for k in KNOWLEDGE_LISTS} | {k: {} for k in KNOWLEDGE_TABLES}
    for plugin, facts in given:
        for kind, values in facts.items():
            if kind not in out:
                raise PluginError(f"plugin {plugin!r} gives knowledge of unknown kind {kind!r} "
                                  f"(kinds: {', '.join(KNOWLEDGE_KINDS)})")
            if kind in KNOWLEDGE_TABLES:
                if not isinstance(values, dict):
                    raise PluginError(f"plugin {plugin!r} gives knowledge {kind!r} as a "
                                      f"{type(values).__name__}: it is a table (a dict)")
                for key, value in values.items():
                    if isinstance(value, list) and isinstance(out[kind].get(key), list):
                        out[kind][key] = [*out[kind][key], *(v for v in value if v not in out[kind][key])]
                        continue  # lists under one key add up (two plugins' loader names for tf)
                    if key in out[kind] and out[kind][key] != value:
                        raise PluginError(f"plugin {plugin!r} gives {kind}[{key!r}] = {value!r}, another "
                                          f"plugin {out[kind][key]!r}")
                    out[kind][key] = value
            else:
                if isinstance(values, (str, dict)):
                    raise PluginError(f"plugin {plugin!r} gives knowledge {kind!r} as a "
                                      f"{type(values).__name__}: it is a list of strings")
                out[kind].extend(v for v in values if v not in out[kind])
    return {k: tuple(v) if k in KNOWLEDGE_LISTS else v for k, v in out.items()}


def run_pass(manager: "PassManager", pass_id: str, run):
    """``run()``, with an exception turned into one that names the pass and its plugin."""
    try:
        return run()
    except (PluginError, UserError):
        raise
    except Exception as exc:
        plugin = manager.provider.get(pass_id, "?")
        raise PluginError(f"pass {pass_id} (plugin {plugin!r}) failed: {type(exc).__name__}: {exc}",
                          pass_id, plugin) from exc


class PassManager:
    def __init__(self, config: Config) -> None:
        self.config = config
        #: plugins that could not be loaded (reported once by the command line, then skipped)
        self.failures: list[PluginFailure] = []
        self.pm = make_plugin_manager(config.get("plugins.disable"), config.get("plugins.load"), self.failures)
        self.registry: dict[str, type[Pass]] = {}
        self.provider: dict[str, str] = {}  # pass id -> plugin name
        self._declared: dict[str, frozenset[str]] = {}  # pass id -> the analyses it may ask for
        self._instances: dict[str, Pass] = {}
        self._collect_passes()
        #: which rules are on, globally and per file (the one place that decides)
        self.selection = Selection(config, self.registry)

    def run_guarded(self, pass_id: str, run):
        """``run()`` for pass ``pass_id``, an exception turned into one that names the pass and
        its plugin (what the run context calls, without importing this module)."""
        return run_pass(self, pass_id, run)

    # -- discovery ---------------------------------------------------------------------
    def _collect_passes(self) -> None:
        for impl in self.pm.hook.dftpass_passes.get_hookimpls():
            try:
                classes = impl.function() or ()
            except Exception as exc:
                raise PluginError(f"plugin {impl.plugin_name!r} failed in its dftpass_passes hook: "
                                  f"{type(exc).__name__}: {exc}") from exc
            for cls in classes:
                if not (isinstance(cls, type) and issubclass(cls, Pass)) or not cls.id:
                    raise PipelineError(f"plugin {impl.plugin_name!r} returned {cls!r}, not a Pass class with an id")
                if cls.id in self.registry and self.registry[cls.id] is not cls:
                    raise PipelineError(
                        f"pass id {cls.id!r} is defined twice: by plugin {self.provider[cls.id]!r} "
                        f"and by plugin {impl.plugin_name!r}")
                self.registry[cls.id] = cls
                self.provider[cls.id] = impl.plugin_name

    def add_passes(self, *classes: type[Pass], plugin: str = "local") -> None:
        """Register pass classes directly (tests, and tools embedding dftpass)."""
        for cls in classes:
            if cls.id in self.registry and self.registry[cls.id] is not cls:
                raise PipelineError(f"pass id {cls.id!r} is defined twice: by plugin "
                                    f"{self.provider[cls.id]!r} and by plugin {plugin!r}")
            self.registry[cls.id] = cls
            self.provider[cls.id] = plugin
        self._declared.clear()

    def plugins(self) -> list[PluginInfo]:
        out = []
        for name, plugin in self.pm.list_name_plugin():
            if plugin is None:
                continue
            passes = sorted((pid for pid, p in self.provider.items() if p == name), key=natural_key)
            out.append(PluginInfo(name, getattr(plugin, "__name__", repr(plugin)), passes, name == "builtin"))
        return sorted(out, key=lambda p: (not p.builtin, p.name))

    def blocked(self) -> list[str]:
        return sorted(n for n, p in self.pm.list_name_plugin() if p is None)

    def rules(self) -> list[type[Pass]]:
        return sorted((c for c in self.registry.values() if c.is_rule()), key=lambda c: natural_key(c.id))

    @functools.cached_property
    def knowledge(self) -> dict:
        """Every plugin's library facts (``dftpass_knowledge``), added up by kind
        (:func:`merge_knowledge`)."""
        return merge_knowledge(hook_results(self.pm, "dftpass_knowledge"))

    def framework_markers(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for markers in call_hook(self.pm, "dftpass_framework_markers"):
            for fw, prefixes in (markers or {}).items():
                out.setdefault(fw, []).extend(prefixes)
        return out

    # -- options -----------------------------------------------------------------------
    def check_config(self) -> None:
        """Errors for rule ids and options the configuration names but no pass has."""
        for rule, source in self.config.option_rule_ids().items():
            if rule not in self.registry:
                raise ConfigError(f"{source.where()}: rules.options names "
                                  f"unknown pass {rule!r}")
        ids = list(self.registry)
        for key in ("rules.select", "rules.ignore"):
            for pattern in self.config.get(key) or ():
                if is_pattern(pattern):
                    continue
                if pattern not in ids:
                    src = self.config.source(key)
                    where = f"{src.where()}: {key} names"
                    if self.failures:  # the rule may be one of a plugin that did not load
                        raise PluginError(f"{where} rule {pattern!r}, which no loaded plugin has; "
                                          + "; ".join(map(str, self.failures)))
                    if self.blocked():
                        raise ConfigError(f"{where} rule {pattern!r}, which no loaded plugin has; blocked by "
                                          f"plugins.disable: {', '.join(self.blocked())}")
                    raise ConfigError(f"{where} unknown rule {pattern!r}")
        # dftpass's own passes cannot be disabled; its framework plugins can
        known = {ep.name for ep in _entry_points()} - {"builtin"}
        for name in self.config.get("plugins.disable") or ():
            if name not in known:
                src = self.config.source("plugins.disable")
                raise ConfigError(f"{src.where()}: plugins.disable names {name!r}, which is "
                                  f"not an installed plugin (installed: {', '.join(sorted(known))})")
        for pass_id in self.registry:
            self.options_for(pass_id)

    def options_for(self, pass_id: str):
        cls = self.registry[pass_id]
        fields = option_fields(cls.Options)
        if attrs.has(cls.Options):
            attrs.resolve_types(cls.Options)
        kwargs = {}
        for name, value in self.config.rule_options(pass_id).items():
            field = fields.get(name)
            where = value.source.where()
            if field is None:
                known = ", ".join(fields) or "none"
                raise ConfigError(f"{where}: {pass_id} has no option {name!r} (options: {known})")
            kwargs[name] = _coerce(field, value, where, pass_id)
        return cls.Options(**kwargs)

    def instance(self, pass_id: str) -> Pass:
        if pass_id not in self._instances:
            if pass_id not in self.registry:
                raise PipelineError(f"no pass with id {pass_id!r} is installed")
            cls = self.registry[pass_id]
            self._instances[pass_id] = cls(self.options_for(pass_id))
        return self._instances[pass_id]

    # -- selection and order -----------------------------------------------------------
    def selected_rules(self, only: Iterable[str] | None = None,
                       kinds: tuple[PassKind, ...] = (PassKind.TRANSFORM, PassKind.CHECK)) -> list[str]:
        """The rules of ``kinds`` the configuration switches on (``only``: exactly these passes)."""
        # a rule switched on for some paths only is in the pipeline; the context filters per file
        chosen = [cls.id for cls in self.rules() if cls.kind in kinds and self.selection.in_pipeline(cls.id)]
        if only is not None:
            only = list(only)
            unknown = [p for p in only if p not in self.registry]
            if unknown:
                raise PipelineError(f"--passes names unknown pass(es): {', '.join(unknown)}")
            chosen = [p for p in only]
        return chosen

    def order(self, pass_ids: Iterable[str]) -> list[str]:
        """The requested passes and everything they require, in dependency order."""
        import networkx as nx  # here, not at start-up: ~75 ms that the information commands never need

        wanted = list(dict.fromkeys(pass_ids))
        graph = nx.DiGraph()
        todo = list(wanted)
        while todo:
            pid = todo.pop()
            if pid in graph and graph.nodes[pid].get("seen"):
                continue
            graph.add_node(pid, seen=True)
            cls = self.registry[pid]
            for req in cls.requires:
                if req not in self.registry:
                    raise PipelineError(f"pass {pid} requires {req!r}, which no installed plugin provides")
                cls_req = self.registry[req]
                if cls_req.is_rule() and req not in wanted:
                    raise PipelineError(f"pass {pid} requires rule {req}, which is switched off")
                graph.add_edge(req, pid)
                todo.append(req)
        for pid in list(graph):
            for after in self.registry[pid].after:
                if after in graph:
                    graph.add_edge(after, pid)
        try:
            cycle = nx.find_cycle(graph)
        except nx.NetworkXNoCycle:
            cycle = None
        if cycle:
            names = " -> ".join([a for a, _ in cycle] + [cycle[0][0]])
            raise PipelineError(f"pass ordering has a cycle: {names}")
        return list(nx.lexicographical_topological_sort(graph, key=natural_key))

    def declared(self, pass_id: str) -> frozenset[str]:
        """The analyses ``pass_id`` may ask for: its ``requires``, and theirs, transitively."""
        if pass_id in self._declared:
            return self._declared[pass_id]
        out: set[str] = set()
        todo = list(self.registry[pass_id].requires) if pass_id in self.registry else []
        while todo:
            pid = todo.pop()
            if pid not in out:
                out.add(pid)
                todo.extend(self.registry[pid].requires if pid in self.registry else ())
        self._declared[pass_id] = frozenset(out)
        return self._declared[pass_id]

    def runs_after(self, later: str, earlier: str) -> bool:
        """Whether ``later`` declares (through ``after`` or ``requires``, directly or not) that
        it runs after ``earlier``."""
        seen, todo = set(), [later]
        while todo:
            pid = todo.pop()
            cls = self.registry.get(pid)
            if cls is None or pid in seen:
                continue
            seen.add(pid)
            for before in (*cls.after, *cls.requires):
                if before == earlier:
                    return True
                todo.append(before)
        return False

    def precedence(self, winner: str, loser: str) -> str:
        """Why ``winner``'s edit came first, as a finding says it."""
        if self.runs_after(loser, winner):
            return f"{loser} runs after {winner}, as it declares"
        return (f"{winner} ran first only by the order of their ids: nothing declares which goes first "
                f"(`after` in one of them)")

    # -- running -----------------------------------------------------------------------
    def gate(self, ctx: RunContext, cls: type[Pass]) -> str | None:
        """None if the pass may run, else why it is skipped."""
        if cls.kind == PassKind.TRANSFORM and not cls.runs_on_libraries and LIBRARY_GATE in self.registry:
            programs = ctx.analysis(LIBRARY_GATE)
            if programs.kind == "library":
                return f"skipped: a library ({programs.reason})"
        if not cls.frameworks:
            return None
        detected = ctx.analysis("frameworks").names
        if detected & set(cls.frameworks):
            return None
        return f"skipped: needs {' or '.join(cls.frameworks)}"

    def run(self, ctx: RunContext, pipeline: list[str]) -> None:
        call_hook(self.pm, "dftpass_configure", config=self.config)
        for pid in pipeline:
            cls = self.registry[pid]
            if cls.kind == PassKind.ANALYSIS:
                try:
                    ctx.analysis(pid)
                except PluginError:
                    if self.config.get("plugins.strict"):
                        raise
                    # said by each rule that needs it, which is skipped (the error is kept)
                continue
            why = self.gate(ctx, cls)
            if why and why.startswith("skipped: a library") and not any(
                    t.status.startswith("skipped: a library") for t in ctx.timings):
                # said once, by the first pass it stops
                ctx.report(Finding(TOOL, f"treated as a library, so no AI regions are added: "
                                   f"{ctx.analysis(LIBRARY_GATE).reason}. `--set project.kind=program` "
                                   "annotates it anyway; `project.entries` names the entries to instrument",
                                   # said where the user expects regions (nothing to fix in validate)
                                   severity=Severity.WARNING if ctx.mode != "validate" else Severity.INFO))
            if why:
                ctx.timings.append(PassTiming(pid, 0.0, why))
                log.debug("pass skipped", pass_id=pid, reason=why)
                continue
            start = time.perf_counter()
            ctx.running = pid
            try:
                run_pass(self, pid, lambda: self.instance(pid).run(ctx))
            except PluginError as exc:
                if self.config.get("plugins.strict"):
                    raise
                # one rule that raises stops no other: its edits are dropped, the failure is said
                ctx.fail(pid, exc, self.distribution(exc.plugin or self.provider.get(pid, "?")))
                ctx.timings.append(PassTiming(pid, time.perf_counter() - start, "failed"))
                continue
            finally:
                ctx.running = None
            ctx.timings.append(PassTiming(pid, time.perf_counter() - start))

    def distribution(self, plugin: str) -> str:
        """The distribution (and version) a plugin came from, as a failure names it: the
        entry point's package, ``dftpass`` for the built-in passes, the module for
        ``plugins.load``."""
        if plugin == "builtin":
            return "dftpass"
        for ep in _entry_points():
            if ep.name == plugin and getattr(ep, "dist", None) is not None:
                return f"{ep.dist.name} {ep.dist.version}"
        return f"module {plugin}" if plugin in (self.config.get("plugins.load") or ()) else plugin


def _coerce(field: attrs.Attribute, value: Value, where: str, pass_id: str):
    """Check an option's value against the attrs field's type (bool, int, float, str, list[str])."""
    v, t = value.value, field.type
    name = f"{pass_id} option {field.name!r}"
    origin = getattr(t, "__origin__", None)
    ok = True
    if t is bool:
        ok = isinstance(v, bool)
    elif t is int:
        ok = isinstance(v, int) and not isinstance(v, bool)
    elif t is float:
        if isinstance(v, str):  # ``1e-05`` in YAML is text: a number as users write it
            try:
                v = float(v.strip())
            except ValueError:
                pass
        ok = isinstance(v, (int, float)) and not isinstance(v, bool) and v == v
        v = float(v) if ok else v
    elif t is str:
        ok = isinstance(v, str)
    elif origin is list or t is list:
        ok = isinstance(v, list) and all(isinstance(x, str) for x in v)
    elif origin is dict or t is dict:
        ok = isinstance(v, dict)
    if not ok:
        expected = getattr(t, "__name__", str(t))
        raise ConfigError(f"{where}: {name} must be {expected}, got {value.value!r}")
    return v
