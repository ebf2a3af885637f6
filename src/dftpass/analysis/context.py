"""What the advice needs to know about the program that ran, read from its source and the run.

The trace says *that* the loop waits; whether a proposal fits depends on the program:

* **its scope**: the functions the traced command runs (the entry of the script it started
  and what that reaches), not every program of the project: a folder of several programs
  is diagnosed one program at a time;
* **its loaders**: each ``DataLoader`` it builds, with its line, the split it serves
  (``val_loader``, ``DataLoader(val_set, ...)``), and its settings as written:
  ``num_workers``, ``persistent_workers``, ``pin_memory``, ``prefetch_factor``, the start
  method (``multiprocessing_context=``, ``set_start_method``); a value that is not a literal
  is kept as written (``args.workers``) and only the trace tells what it was;
* **the machine**: CPUs and GPUs (``run.json``, recorded by ``dftpass trace``), and whether
  the code moves work to a GPU at all.

A value that is unknown stays None: advice that needs it says what it could not check
instead of assuming.
"""

from __future__ import annotations

from pathlib import Path

import attrs

from dftpass.core.loops import split_of

#: the settings of a DataLoader that advice reads, and their positions in torch's signature
#: (None: keyword-only)
SETTINGS = {"num_workers": 5, "pin_memory": 7, "worker_init_fn": 10, "multiprocessing_context": 11,
            "prefetch_factor": None, "persistent_workers": None}
ABSENT = "(absent)"


@attrs.define
class LoaderFacts:
    path: str
    line: int
    callee: str
    #: the name the loader is assigned to (``train_loader``), if any
    name: str | None
    #: train | evaluate | test, from the loader's name and arguments (None: not told)
    split: str | None
    #: setting -> its text as written, ABSENT when not given
    settings: dict[str, str | None]

    def setting(self, key: str) -> str | None:
        value = self.settings.get(key, ABSENT)
        return None if value == ABSENT else value

    def literal_int(self, key: str) -> int | None:
        value = self.setting(key)
        return int(value) if value is not None and value.lstrip("-").isdigit() else None

    @property
    def workers(self) -> int | None:
        """``num_workers`` as written: 0 when absent (the default), None when not a literal."""
        if self.settings.get("num_workers", ABSENT) == ABSENT:
            return 0
        return self.literal_int("num_workers")

    @property
    def persistent(self) -> bool | None:
        value = self.settings.get("persistent_workers", ABSENT)
        if value == ABSENT or value == "False":
            return False
        return True if value == "True" else None

    def location(self) -> str:
        return f"{self.path}:{self.line}"


@attrs.define
class ProgramFacts:
    #: the functions the traced program runs (None: the whole project, no entry matched)
    scope: set[str] | None
    #: the entry that matched the command (``train.py:41``), if any
    entry: str | None
    loaders: list[LoaderFacts]
    #: batch loops of the program, and how many fetch from a DataLoader-like loader
    batch_loops: int
    #: the start method the program sets (``set_start_method("spawn")``), if it does
    start_method: str | None
    #: the code moves data to a GPU (``.cuda()``, ``torch.device('cuda')``)
    gpu_code: bool
    #: the machine of the run (run.json): cpus, physical_cores, usable_cpus, gpu
    machine: dict = attrs.field(factory=dict)

    @property
    def has_loader(self) -> bool:
        return bool(self.loaders)

    @property
    def gpu(self) -> bool | None:
        """Whether the run had a GPU to use: the machine had one and the code uses one (None:
        the machine was not recorded)."""
        if "gpu" not in self.machine:
            return None
        return bool(self.machine.get("gpu")) and self.gpu_code

    def loader_for(self, phase: str | None) -> LoaderFacts | None:
        """The loader a phase's batch loop most likely iterates: the one built for its split,
        else the only one."""
        if phase is not None:
            for loader in self.loaders:
                if loader.split == phase:
                    return loader
        splitless = [lo for lo in self.loaders if lo.split in (None, "train")]
        if phase in (None, "train") and splitless:
            return splitless[0]
        return self.loaders[0] if len(self.loaders) == 1 else None

    def to_dict(self) -> dict:
        return {"entry": self.entry, "scoped": self.scope is not None, "batch_loops": self.batch_loops,
                "start_method": self.start_method, "gpu_code": self.gpu_code, "machine": self.machine,
                "loaders": [{"at": lo.location(), "callee": lo.callee, "name": lo.name, "split": lo.split,
                             "settings": {k: v for k, v in lo.settings.items() if v != ABSENT}}
                            for lo in self.loaders]}


def program_facts(graph, loops, detection, project_root: Path | None, command: list[str] | None,
                  cwd: str | None, machine: dict | None) -> ProgramFacts:
    scope, entry = _scope(graph, project_root, command, cwd)
    # every plugin's library knowledge, merged by the loops analysis (dftpass_knowledge)
    factories = set(loops.options.loader_factories)
    loaders: list[LoaderFacts] = []
    start_method = None
    files = {f.split("::", 1)[0] for f in scope} if scope is not None else None
    for function_id, (fs, fn) in sorted(graph.functions.items()):
        owner = graph.class_of_method(function_id)
        # ``class BaseDataLoader(DataLoader)``: its ``super().__init__(...)`` builds the loader,
        # also when a configuration picks the subclass (``config.init_obj('data_loader', module)``:
        # no call the graph sees), as long as the program imports its module
        subclass = owner is not None and fn.name == "__init__" and graph.has_base(owner, factories)
        if scope is not None and function_id not in scope and not (subclass and fs.relpath in files):
            continue
        for index, call in enumerate(fn.calls):
            last = graph.qualify(fs, call.callee).rsplit(".", 1)[-1]
            if call.method in ("set_start_method",) and call.args and call.args[0]:
                start_method = call.args[0].strip("'\"")
            # the library's constructor (a project base's is the project's own class)
            inherited = subclass and call.callee == "super().__init__" and not graph.targets(function_id, index)
            if last not in factories and not inherited:
                continue
            keywords = dict(call.keywords)
            settings: dict[str, str | None] = {}
            for key, position in SETTINGS.items():
                if key in keywords:
                    settings[key] = keywords[key]
                elif position is not None and len(call.args) > position:
                    settings[key] = call.args[position]
                else:
                    # a subclass passes its settings on in a dict or **kwargs the summaries
                    # do not show: unknown, not torch's default
                    settings[key] = None if inherited else ABSENT
            name = call.assigned_to[0] if call.assigned_to else None
            split = split_of([name, *(a for a in call.args[:1]), fn.name])
            loaders.append(LoaderFacts(fs.relpath, call.line, call.callee, name, split, settings))
    batch = [f for f in loops.of_kind("batch") if scope is None or f.function in scope]
    return ProgramFacts(scope, entry, loaders, len(batch), start_method, bool(detection.cuda), machine or {})


def _scope(graph, root: Path | None, command: list[str] | None, cwd: str | None) -> tuple[set[str] | None, str | None]:
    """The functions the command's program runs: the entry whose file is the script the
    command started (``python train.py``), and what it reaches (its process targets too)."""
    if root is None or not command:
        return None, None
    scripts = []
    for arg in command:
        if arg.endswith(".py"):
            path = Path(arg) if Path(arg).is_absolute() else Path(cwd or ".") / arg
            try:
                scripts.append(path.resolve().relative_to(root).as_posix())
            except ValueError:
                continue
    for entry in graph.entries:
        if entry.relpath in scripts:
            reach = set(graph.program_reach(entry))
            for spawned in list(reach):  # what it starts in other processes (mp.spawn targets)
                for _, target, data in graph.graph.out_edges(spawned, data=True):
                    if data.get("kind") == "spawns":
                        reach |= {target} | graph.reachable(target)
            return reach, f"{entry.relpath}:{entry.line}"
    return None, None
