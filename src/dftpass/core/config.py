"""Configuration: one loader for every layer, and every value remembers where it came from.

Layers, lowest first (a higher layer replaces a key of a lower one):

1. defaults (below, in :data:`KEYS`);
2. site: ``$DFTPASS_SITE_CONFIG``, else ``/etc/dftpass/config.yaml``;
3. user: ``$XDG_CONFIG_HOME/dftpass/config.yaml`` (``~/.config/dftpass/config.yaml``);
4. project: ``dftpass.yaml`` in the project root, else ``[tool.dftpass]`` in its
   ``pyproject.toml`` (or the file given with ``--config``);
5. the command line (``--select``, ``--ignore``, ``--jobs``, ``--set KEY=VALUE``).

Two keys merge instead of replacing: ``rules.options`` merges per rule and option, and
``rules.per-path`` concatenates (every layer's overrides apply, in layer order).
An unknown key or a value of the wrong type is a :class:`ConfigError` naming the file and line.
"""

from __future__ import annotations

import os
import re
import sys
from pathlib import Path
from typing import Any, Callable, Iterable

import attrs
import yaml

from dftpass.core.errors import UserError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover
    import tomli as tomllib

#: timing-like text that varies between identical runs: replaced by ``<T>`` before comparing
#: (each is a Python regex; ``outputs.mask`` replaces the list)
DEFAULT_MASKS = (
    r"\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d(?:[.,]\d+)?",                  # 2026-12-02 13:05:51.123
    r"\b\d\d:\d\d:\d\d(?:[.,]\d+)?\b",                                  # 13:05:51, 00:01:02
    r"(?i)\b\d+(?:\.\d+)?(?:e[-+]?\d+)?\s*(?:ms|us|µs|ns|s|sec|secs|seconds?|mins?|minutes?|hours?)\b",
    r"(?i)\b\d+(?:\.\d+)?\s*(?:it|its|samples?|img|images?|tokens?|batch(?:es)?|steps?|ex|examples?)/s\b",
    r"(?i)\b(?:time|elapsed|took|duration|eta|speed|throughput|ms/batch|s/it|it/s|wall)\b"
    r"[^0-9\n]{0,12}\d+(?:\.\d+)?(?:e[-+]?\d+)?",                       # time: 1.23, ms/batch 34.5
    r"\b0x[0-9a-fA-F]{6,}\b",                                           # object addresses
    r"[^\n]*\d+%\|[^\n]*",                                               # a progress bar (tqdm, Lightning):
)                                                                       # the whole line, its redraws included


class ConfigError(UserError):
    """A configuration problem; the message names the file and line."""


@attrs.frozen
class Source:
    layer: str  # default | site | user | project | cli
    path: str = ""
    line: int = 0

    def where(self) -> str:
        """Where a value came from, as a message's location: ``dftpass.yaml:4``, ``--set``,
        ``the command line``, ``the defaults``."""
        if self.path and self.line:
            return f"{self.path}:{self.line}"
        if self.path:
            return self.path
        return {"cli": "the command line", "default": "the defaults"}.get(self.layer, self.layer)

    def __str__(self) -> str:
        if not self.path:
            return self.layer
        return f"{self.layer} {self.path}:{self.line}" if self.line else f"{self.layer} {self.path}"


@attrs.frozen
class Value:
    value: Any
    source: Source


# -- the schema ------------------------------------------------------------------------


def _list_of_str(v: Any) -> bool:
    return isinstance(v, list) and all(isinstance(x, str) for x in v)


#: from this many files on, ``run.jobs: 0`` reads and rewrites them in worker processes: below
#: it, starting the workers costs more than they save (docs/performance.md)
AUTO_JOBS_FILES = 64


def effective_jobs(jobs: int | None, n_files: int) -> int:
    """The worker processes for ``n_files`` files: ``jobs`` as set, or for 0 (or None) the
    cores, at most 8, from :data:`AUTO_JOBS_FILES` files on (torch/_inductor, 348 files:
    ``plan`` 23.3 s with 1, 16.3 s with 2 on a 2-core machine)."""
    if jobs:
        return jobs
    if n_files < AUTO_JOBS_FILES:
        return 1
    import os

    return max(1, min(8, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1))


def _int(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool)


def _str(v: Any) -> bool:
    return isinstance(v, str)


def _per_path(v: Any) -> bool:
    if not isinstance(v, list):
        return False
    for item in v:
        if not isinstance(item, dict) or not _list_of_str(item.get("paths")):
            return False
        if set(item) - {"paths", "select", "ignore"}:
            return False
        if any(not _list_of_str(item.get(k, [])) for k in ("select", "ignore")):
            return False
    return True


@attrs.frozen
class KeySpec:
    default: Any
    check: Callable[[Any], bool]
    expected: str
    doc: str


DEFAULT_EXCLUDE = [
    "**/.*/**",  # hidden folders: .git, .venv, .tox, .dftpass ...
    "**/__pycache__/**",
    "**/venv/**",
    "**/env/**",
    "**/site-packages/**",
    "**/node_modules/**",
    "**/build/**",
    "**/dist/**",
    "**/*.egg-info/**",
    "**/docs/**",
    "**/doc/**",
    "**/test/**",
    "**/tests/**",
    "**/test_*.py",
    "**/*_test.py",
    "**/conftest.py",
    "**/setup.py",
    "**/*-dftpass/**",
]

def _regexes(value: Any) -> bool:
    if not _list_of_str(value):
        return False
    try:
        for pattern in value:
            re.compile(pattern)
    except re.error:
        return False
    return True


KEYS: dict[str, KeySpec] = {
    "rules.select": KeySpec(
        None,
        lambda v: v is None or _list_of_str(v),
        "a list of rule ids, globs (ML-R2*) or tag:NAME",
        "rules to run; unset = every rule that is on by default",
    ),
    "rules.ignore": KeySpec([], _list_of_str, "a list of rule ids, globs or tag:NAME", "rules switched off"),
    "rules.options": KeySpec({}, lambda v: isinstance(v, dict), "a mapping", "per-rule options"),
    "rules.per-path": KeySpec(
        [],
        _per_path,
        "a list of {paths: [glob], select: [...], ignore: [...]}",
        "rule selection for some paths only",
    ),
    "files.include": KeySpec(["**/*.py"], _list_of_str, "a list of globs", "files to consider"),
    "files.exclude": KeySpec(DEFAULT_EXCLUDE, _list_of_str, "a list of globs", "files never considered"),
    "files.extend-exclude": KeySpec([], _list_of_str, "a list of globs", "added to files.exclude"),
    "files.max-bytes": KeySpec(2_000_000, _int, "an integer", "larger files are reported and left alone"),
    "files.max-rewrite-bytes": KeySpec(
        1_000_000, _int, "an integer", "larger files are analysed, but their edits are reported, not applied"),
    "plugins.disable": KeySpec([], _list_of_str, "a list of plugin names",
                               "entry-point plugins not to load (every layer adds to the list)"),
    "plugins.load": KeySpec([], _list_of_str, "a list of module names", "local plugin modules to load"),
    "plugins.strict": KeySpec(
        False, lambda v: isinstance(v, bool), "true or false",
        "a pass that raises stops the command (exit 3, for CI) instead of being skipped with a warning "
        "(exit 4, the other rules' edits applied); --strict-plugins sets it"),
    "plugins.trust-project": KeySpec(
        False, lambda v: isinstance(v, bool), "true or false",
        "let a project's own configuration load plugin modules (site, user or --trust-project-plugins only)"),
    "run.jobs": KeySpec(0, lambda v: _int(v) and v >= 0, "an integer >= 0",
                        "worker processes for per-file work; 0: the cores (at most 8) for a project of "
                        f"{AUTO_JOBS_FILES} files or more, one process below"),
    "project.kind": KeySpec(
        "auto", lambda v: v in ("auto", "program", "library"), "one of auto, program, library",
        "a library (no entry trains or evaluates) gets no AI regions; auto decides from the entries",
    ),
    "project.entries": KeySpec(
        [], _list_of_str, "a list of globs (files, console-script names, function names)",
        "the entries to instrument; empty = every entry that trains or evaluates",
    ),
    "emit.skip-dynamo-import": KeySpec(
        True, lambda v: isinstance(v, bool), "true or false",
        "put one line before the dftracer import of the file that starts tracing, so that it does not "
        "import torch._dynamo (1.5 s per process)"),
    "emit.lean-regions": KeySpec(
        True, lambda v: isinstance(v, bool), "true or false",
        "write a statement region as start()/stop() around the statements, not a `with` that re-indents "
        "them, where nothing leaves the statements early (return, break, continue, raise, yield)"),
    "trace.data-dir": KeySpec(
        None, lambda v: v is None or _str(v), "a string", "DFTRACER_DATA_DIR for traced runs"
    ),
    "trace.chunk-mb": KeySpec(64, _int, "an integer", "size bound of one compacted trace chunk"),
    "outputs.mask": KeySpec(
        list(DEFAULT_MASKS), _regexes, "a list of Python regular expressions",
        "text of a run's standard output replaced before runs are compared (timings, dates, addresses)"),
    "overhead.budget": KeySpec(
        0.03, lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and 0 < v < 1, "a number in (0, 1)",
        "the share of a training step tracing may cost (with --step-time, the plan coarsens to fit it)"),
    "overhead.step-time": KeySpec(
        None, lambda v: v is None or (isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0),
        "a number of seconds > 0", "the training step's time, for the tracing budget (unset: every region)"),
    "overhead.sample-every": KeySpec(
        None, lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 1),
        "an integer >= 1", "trace the regions a training step writes for one step in k (the first steps and each "
        "pass's first and last always); unset: chosen from --step-time when the budget cannot be met otherwise; "
        "1: never sample. `dftpass trace --sample-every K` sets it for one run"),
    "overhead.traced-step-us": KeySpec(
        None, lambda v: v is None or (isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0),
        "a number of µs >= 0", "what tracing one step costs in situ when its neighbours are not traced: `--step-time "
        "RUN` of a sampled run measures it (a traced step's time over an untraced one's); unset: the model's "
        "every region x 1.33"),
    "overhead.event-us": KeySpec(
        None, lambda v: v is None or (isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0),
        "a number of µs > 0", "what one event costs inside a training step on this machine (bench/overhead.py "
        "measures it; unset: 18 µs, as measured where dftpass was built, plugins/analyses/overhead.py)"),
    "optimize.min-gain-pct": KeySpec(
        2.0, lambda v: isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0, "a number >= 0",
        "the least gain (% of the program's time) optimize keeps: the whole 95% interval of the paired "
        "ratios must lie below 1 - this"),
    "optimize.session-noise-pct": KeySpec(
        None, lambda v: v is None or (isinstance(v, (int, float)) and not isinstance(v, bool) and v >= 0),
        "a number >= 0", "how much (% sd) the ratio of the same two copies moves between two sessions on this "
        "machine; optimize's intervals are widened by it (unset: dftpass.optimize.measure.SESSION_SD, measured "
        "on 2-core shared machines)"),
}
#: keys whose value is a mapping that merges across layers instead of being replaced
_MERGED = ("rules.options",)
#: list keys that every layer adds to (instead of replacing)
_CONCATENATED = ("rules.per-path", "plugins.disable")
_SECTIONS = {k.split(".")[0] for k in KEYS}


# -- reading one layer ------------------------------------------------------------------


#: the only tags a configuration value may carry (plain YAML: no Python objects, no custom tags)
_PLAIN_TAGS = {f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "seq", "map")}
#: how many values a configuration file may expand to: a few anchors can stand for billions
#: (a 12-line "alias bomb" took 48 s and 1 GB before this bound)
MAX_VALUES = 10_000
_SCALARS = yaml.constructor.SafeConstructor()


def _node_to_python(node: yaml.Node | None, path: str = "", budget: list[int] | None = None) -> Any:
    """A YAML node as plain Python, refusing tags and bounding what aliases expand to."""
    if node is None:
        return None
    budget = budget if budget is not None else [MAX_VALUES]
    budget[0] -= 1
    where = f"{path}:{node.start_mark.line + 1}" if path else f"line {node.start_mark.line + 1}"
    if budget[0] < 0:
        raise ConfigError(f"{where}: the configuration expands to more than {MAX_VALUES} values "
                          "(YAML anchors and aliases?); refused")
    if node.tag not in _PLAIN_TAGS:
        raise ConfigError(f"{where}: the YAML tag {node.tag} is not allowed in a configuration (plain values only)")
    if isinstance(node, yaml.ScalarNode):
        return _SCALARS.construct_object(node)
    if isinstance(node, yaml.SequenceNode):
        return [_node_to_python(child, path, budget) for child in node.value]
    return {_node_to_python(k, path, budget): _node_to_python(v, path, budget) for k, v in node.value}


def _shown(value: Any, limit: int = 120) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _flatten_yaml(root: yaml.Node, source_path: str, layer: str) -> dict[str, Value]:
    out: dict[str, Value] = {}
    if root is None:
        return out
    if not isinstance(root, yaml.MappingNode):
        raise ConfigError(f"{source_path}:{root.start_mark.line + 1}: the configuration must be a mapping")
    budget = [MAX_VALUES]

    def walk(node: yaml.MappingNode, prefix: str) -> None:
        if node.tag not in _PLAIN_TAGS:
            raise ConfigError(f"{source_path}:{node.start_mark.line + 1}: the YAML tag {node.tag} is not allowed "
                              "in a configuration (plain values only)")
        for key_node, value_node in node.value:
            key = prefix + str(_node_to_python(key_node, source_path, budget))
            line = key_node.start_mark.line + 1
            src = Source(layer, source_path, line)
            if key in KEYS:
                value = coerce(key, _node_to_python(value_node, source_path, budget))
                _check(key, value, src)
                if key in _MERGED and isinstance(value_node, yaml.MappingNode):
                    _flatten_options(value_node, key, source_path, layer, out)
                else:
                    out[key] = Value(value, src)
            elif prefix == "" and key in _SECTIONS and isinstance(value_node, yaml.MappingNode):
                walk(value_node, key + ".")
            else:
                raise ConfigError(f"{source_path}:{line}: unknown configuration key '{key}'" + _hint(key))

    walk(root, "")
    return out


def _flatten_options(node: yaml.MappingNode, key: str, path: str, layer: str, out: dict) -> None:
    for rule_node, opts_node in node.value:
        rule = str(rule_node.value)
        if not isinstance(opts_node, yaml.MappingNode):
            raise ConfigError(f"{path}:{rule_node.start_mark.line + 1}: options of {rule} must be a mapping")
        for opt_node, val_node in opts_node.value:
            src = Source(layer, path, opt_node.start_mark.line + 1)
            out[f"{key}.{rule}.{opt_node.value}"] = Value(_node_to_python(val_node, path), src)


def _hint(key: str) -> str:
    close = [k for k in KEYS if k.split(".")[-1] == key.split(".")[-1] and k != key]
    return f" (did you mean '{close[0]}'?)" if close else f"; known keys: {', '.join(sorted(KEYS))}"


def coerce(key: str, value: Any) -> Any:
    """A number as users write it, in any Python spelling (``1e-05``, ``.00001``, ``2E3``):
    YAML 1.1 reads ``1e-05`` as text, and so would ``--set``. Only for a key whose check
    refuses the text and accepts the number; anything else is returned as it is."""
    spec = KEYS.get(key)
    if spec is None or not isinstance(value, str) or spec.check(value):
        return value
    try:
        number = float(value.strip())
    except ValueError:
        return value
    if number != number or number in (float("inf"), float("-inf")):
        return value
    for candidate in ((int(number),) if number.is_integer() else ()) + (number,):
        if spec.check(candidate):
            return candidate
    return value


def _check(key: str, value: Any, src: Source) -> None:
    spec = KEYS[key]
    if not spec.check(value):
        raise ConfigError(f"{src.where()}: '{key}' must be {spec.expected}, "
                          f"got {_shown(value)}")


def load_yaml_file(path: Path, layer: str) -> dict[str, Value]:
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the configuration: {exc}") from exc
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"{path}:{mark.line + 1}" if mark else str(path)
        raise ConfigError(f"{where}: invalid YAML: {getattr(exc, 'problem', exc)}") from exc
    return _flatten_yaml(root, str(path), layer)


def load_pyproject(path: Path) -> dict[str, Value] | None:
    """``[tool.dftpass]`` of a pyproject.toml, or None when the table is absent."""
    text = path.read_text(encoding="utf-8")
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from exc
    table = data.get("tool", {}).get("dftpass")
    if table is None:
        return None
    # tomllib keeps no positions: re-serialise as YAML nodes for one code path, and locate
    # each key's line in the TOML text by its name (good enough for an error message).
    locate = _toml_locator(text)
    root = yaml.compose(yaml.safe_dump(table), Loader=yaml.SafeLoader)
    values = {}
    try:
        values = _flatten_yaml(root, str(path), "project")
    except ConfigError as exc:
        msg = str(exc).split(": ", 1)[1]
        key = re.search(r"'([^']+)'", msg)
        line = locate(key.group(1)) if key else 0
        raise ConfigError(f"{path}:{line}: {msg}") from None
    return {k: attrs.evolve(v, source=Source("project", str(path), locate(k))) for k, v in values.items()}


def _toml_locator(text: str) -> Callable[[str], int]:
    lines = text.splitlines()

    def locate(dotted: str) -> int:
        last = dotted.split(".")[-1]
        pattern = re.compile(rf"^\s*(\"?{re.escape(last)}\"?)\s*=")
        for i, line in enumerate(lines, 1):
            if pattern.match(line):
                return i
        for i, line in enumerate(lines, 1):
            if line.strip().startswith("[tool.dftpass"):
                return i
        return 0

    return locate


# -- the resolved configuration --------------------------------------------------------


def site_config_path() -> Path:
    return Path(os.environ.get("DFTPASS_SITE_CONFIG", "/etc/dftpass/config.yaml"))


def user_config_path() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME") or os.path.join(os.path.expanduser("~"), ".config")
    return Path(base) / "dftpass" / "config.yaml"


def project_config_path(project: Path) -> Path | None:
    for name in ("dftpass.yaml", "dftpass.yml"):
        if (project / name).is_file():
            return project / name
    return None


@attrs.define
class Config:
    """The resolved configuration: ``values`` maps a dotted key to its winning :class:`Value`."""

    values: dict[str, Value]
    files_read: list[str] = attrs.field(factory=list)
    cli_args: Any = None

    def get(self, key: str) -> Any:
        if key in self.values:
            return self.values[key].value
        return KEYS[key].default

    def source(self, key: str) -> Source:
        return self.values[key].source if key in self.values else Source("default")

    def rule_options(self, rule_id: str) -> dict[str, Value]:
        prefix = f"rules.options.{rule_id}."
        return {k[len(prefix) :]: v for k, v in self.values.items() if k.startswith(prefix)}

    def option_rule_ids(self) -> dict[str, Source]:
        out: dict[str, Source] = {}
        for k, v in self.values.items():
            if k.startswith("rules.options."):
                out.setdefault(k.split(".")[2], v.source)
        return out

    def exclude_globs(self) -> list[str]:
        return list(self.get("files.exclude")) + list(self.get("files.extend-exclude"))

    def show(self) -> str:
        """Every resolved value with the layer it came from (``dftpass config``)."""
        rows = []
        keys = sorted(set(KEYS) | set(self.values))
        for key in keys:
            if key in _MERGED:
                continue
            value = self.get(key) if key in KEYS else self.values[key].value
            rows.append((key, _fmt(value), str(self.source(key))))
        width = max(len(r[0]) for r in rows)
        lines = [f"{k.ljust(width)} = {v}    # {s}" for k, v, s in rows]
        if self.files_read:
            lines.append("")
            lines.append("# layers read (lowest first): " + ", ".join(self.files_read))
        return "\n".join(lines)


def _fmt(value: Any) -> str:
    if isinstance(value, list) and len(value) > 4:
        return "[" + ", ".join(map(str, value[:4])) + f", ... ({len(value)} items)]"
    return repr(value) if isinstance(value, str) else str(value)


def load_config(project: Path | None, overrides: dict[str, Value] | None = None,
                config_file: Path | None = None, cli_args: Any = None) -> Config:
    """Read every layer for ``project`` and merge them; ``overrides`` is the CLI layer."""
    merged: dict[str, Value] = {}
    read: list[str] = []

    def apply(layer_values: dict[str, Value], label: str) -> None:
        read.append(label)
        for key, value in layer_values.items():
            if key in _CONCATENATED and key in merged:
                # per-path rules add up; a plugin blocked by the site stays blocked whatever a
                # user or project writes (a project cannot switch a site's block off)
                joined = list(merged[key].value) + [v for v in value.value if v not in merged[key].value]
                value = Value(joined, attrs.evolve(value.source, layer=f"{merged[key].source.layer}+"
                                                                       f"{value.source.layer}"))
            merged[key] = value

    site = site_config_path()
    if site.is_file():
        apply(load_yaml_file(site, "site"), f"site {site}")
    user = user_config_path()
    if user.is_file():
        apply(load_yaml_file(user, "user"), f"user {user}")
    if config_file is not None:
        if config_file.name == "pyproject.toml":
            apply(load_pyproject(config_file) or {}, f"project {config_file}")
        else:
            apply(load_yaml_file(config_file, "project"), f"project {config_file}")
    elif project is not None:
        found = project_config_path(project)
        if found is not None:
            apply(load_yaml_file(found, "project"), f"project {found}")
        elif (project / "pyproject.toml").is_file():
            table = load_pyproject(project / "pyproject.toml")
            if table is not None:
                apply(table, f"project {project / 'pyproject.toml'}")
    if overrides:
        apply(overrides, "cli")
    _check_plugin_trust(merged)
    return Config(values=merged, files_read=read, cli_args=cli_args)


def _check_plugin_trust(merged: dict[str, Value]) -> None:
    """Modules named by a project's own configuration would run code from the project tree
    the moment dftpass reads it: only a site, a user or the command line may allow that."""
    trust = merged.get("plugins.trust-project")
    if trust is not None and trust.source.layer == "project":
        raise ConfigError(f"{trust.source.path}:{trust.source.line}: plugins.trust-project can only be set by the "
                          "site or user configuration or the command line, not by the project it would trust")
    load = merged.get("plugins.load")
    if load is not None and load.value and load.source.layer == "project" and not (trust and trust.value):
        raise ConfigError(f"{load.source.path}:{load.source.line}: plugins.load in a project's configuration "
                          "imports modules from the project tree; allow it with --trust-project-plugins or "
                          "`plugins: {trust-project: true}` in your user or site configuration")


def cli_overrides(select: list[str] | None, ignore: list[str] | None, jobs: int | None,
                  sets: Iterable[str] = (), flags: Iterable[tuple[str, Any, str]] = ()) -> dict[str, Value]:
    """The command-line layer. ``sets`` are ``KEY=VALUE`` strings, VALUE parsed as YAML;
    ``flags`` are (key, value, the option the user typed: ``--step-time``), checked and named
    as that option in an error."""
    out: dict[str, Value] = {}
    src = Source("cli")
    for key, value, flag in flags:
        value = coerce(key, value)
        _check(key, value, Source("cli", flag))
        out[key] = Value(value, Source("cli", flag))
    if select:
        out["rules.select"] = Value(_split_csv(select), src)
    if ignore:
        out["rules.ignore"] = Value(_split_csv(ignore), src)
    if jobs is not None:
        _check("run.jobs", jobs, Source("cli", "--jobs"))
        out["run.jobs"] = Value(jobs, src)
    for item in sets:
        key, sep, raw = item.partition("=")
        if not sep:
            raise ConfigError(f"--set {item!r}: expected KEY=VALUE")
        key = key.strip()
        try:
            value = yaml.safe_load(raw) if raw.strip() else ""
        except yaml.YAMLError as exc:
            problem = getattr(exc, "problem", None) or "not YAML"
            raise ConfigError(f"--set {key}: {raw!r} is not a value dftpass can read ({problem}); write a "
                              f"list as a,b or [a, b] and quote text with commas or colons") from None
        if key in KEYS and isinstance(value, str) and not KEYS[key].check(value) and KEYS[key].check([value]):
            value = _split_csv([value])  # --set rules.select=ML-R1,ML-R6: a list written as the flags are
        if key.startswith("rules.options.") and key.count(".") == 3:
            out[key] = Value(value, src)
            continue
        if key not in KEYS:
            raise ConfigError(f"--set: unknown configuration key '{key}'" + _hint(key))
        value = coerce(key, value)
        _check(key, value, Source("cli", "--set"))
        out[key] = Value(value, src)
    return out


def _split_csv(items: list[str]) -> list[str]:
    return [part.strip() for item in items for part in item.split(",") if part.strip()]
