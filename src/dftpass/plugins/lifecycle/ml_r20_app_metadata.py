"""ML-R20: the program's parsed parameters, logged once as dftracer metadata lines."""

from __future__ import annotations

import re

from dftpass.api import (
    CallSite, Case, Expect, Finding, InsertAfter, InsertBefore, is_metadata_call, origin_kind as kind, runtime_call,
    origin_subject as subject, Pass, PassKind, Severity,
)

#: argparse (and its many look-alikes): the parse returns one namespace; ``parse_known_args``
#: returns (namespace, the rest)
ARGPARSE_METHODS = frozenset({"parse_args", "parse_known_args"})
#: transformers' ``HfArgumentParser``: a tuple of dataclass instances
DATACLASS_PARSE_METHODS = frozenset({"parse_args_into_dataclasses", "parse_json_file", "parse_yaml_file"})
#: calls that build a config object from the command line (qualified)
CLI_BUILDERS = ("tyro.cli",)
HYDRA_MAIN = "hydra.main"
#: classes whose instances are a program's configuration: dataclasses, attrs classes and
#: pydantic models named like a configuration
CONFIG_CLASS = re.compile(r"(?i)(config|conf|cfg|args|arguments|settings|params|hparams|hyperparameters|options)$")
DATACLASS_DECORATORS = ("dataclass", "define", "frozen", "s", "attrs", "mutable")
PYDANTIC_BASES = ("BaseModel", "BaseSettings")
#: how many ``return get_args()`` hops are followed up to where the value is named
MAX_RETURN_HOPS = 3

#: one planned block: where ((relpath, "after" | "before", statement path)) -> what
Plan = dict[tuple[str, str, tuple], dict]

_TRAIN = "    torch.ones(1, requires_grad=True).sum().backward()\n"


class AppMetadata(Pass):
    """Log the program's parsed parameters once, as dftracer metadata lines.

    What it does:
        Right after the program's configuration exists, in the process that traces, every
        top-level field is written with dftracer's ``log_metadata_event`` as a ``CM``
        metadata line, under the key ``<variable>.<field>`` (``args.lr``, ``cfg.model``), its
        value ``str()``'d and cut to 1,024 characters. Configurations recognised:

        * argparse: ``args = parser.parse_args()``, ``args, rest = parser.parse_known_args()``,
          ``args = parser.parse_known_args()[0]``, ``args = vars(parser.parse_args())``,
          ``self.args = ...``;
        * transformers' ``HfArgumentParser``: ``a, b, c = parser.parse_args_into_dataclasses()``
          (and ``parse_json_file``/``parse_yaml_file``): one set of keys per dataclass;
        * ``tyro.cli(Config)`` and project dataclass/attrs/pydantic configs
          (``cfg = TrainConfig(...)``, ``Config.from_yaml(...)``), by a class name that
          ends like a configuration (``Config``, ``Args``, ``Settings``, ``Params``...);
        * hydra: the configuration parameter of a ``@hydra.main`` function, at the start
          of its body (its top-level keys; nested groups as one value each);
        * nanoGPT's ``configurator.py``: the dict built at module level after
          ``exec(open('configurator.py').read())`` (``config = {k: globals()[k] ...}``).

        Where the parse sits in a helper that returns it (``def get_args(): return
        parser.parse_args()``), the fields are logged where the program names the result
        (``args = get_args()``, followed through up to 3 returns), or at the start of the
        function it is handed to (``main(parser.parse_args())``). A parse at the top level
        of a file with a ``__main__`` block runs on import, before the block starts tracing:
        its fields are logged at the top of the block instead. Only code that an
        instrumented program runs is considered, and only once per run (a parse inside a
        loop, or in a function called from one, is left alone).

    Why:
        A trace without the run's parameters cannot be compared with another one: batch
        size, workers, learning rate and model size explain most differences between two
        traces. Metadata lines are written once per process and cost nothing per event.

    Example:
        ``args = parser.parse_args()`` is followed by ``_dft_runtime.log_parameters("args",
        args)``, which logs ``args.epochs``, ``args.batch_size``, ...

    Fix safety:
        Safe. ``dftpass.runtime.log_parameters`` does nothing unless this process traces;
        every value goes through ``str()`` inside ``try/except Exception``, so an odd value
        never raises into the program. dftracer writes key and value unescaped into its
        JSON line, so both are JSON-escaped. A parse followed by a hand-written
        ``log_metadata_event`` in the same function is left alone. A configuration parsed
        at import time of a module that is not the program (before tracing starts) is not
        logged (a note says so); a ``get_args()`` helper called from two places logs twice.

    Options:
        None.
    """

    id = "ML-R20"
    title = "App metadata"
    kind = PassKind.TRANSFORM
    requires = ("callgraph", "programs", "loops")
    after = ("ML-R1",)
    tags = ("lifecycle", "metadata")

    VALID = [
        # a data preparation script trains nothing: it is not a traced program
        "import argparse\n\n\ndef main():\n    parser = argparse.ArgumentParser()\n"
        "    parser.add_argument('--out')\n    args = parser.parse_args()\n    print(args.out)\n\n\n"
        "if __name__ == '__main__':\n    main()\n",
        # the program logs its parameters itself
        "import argparse\n\nimport torch\nfrom dftracer.python import dftracer\n\n\ndef main():\n"
        "    args = argparse.ArgumentParser().parse_args()\n"
        "    dftracer.get_instance().log_metadata_event('args', str(args))\n" + _TRAIN + "\n\n"
        "if __name__ == '__main__':\n    main()\n",
        # parsed when another module imports it, before tracing starts: nothing to log then
        Case("import torch\n\nfrom settings import args\n\n\ndef main():\n" + _TRAIN + "\n\n"
             "if __name__ == '__main__':\n    main()\n",
             files={"settings.py": "import argparse\n\nparser = argparse.ArgumentParser()\n"
                                   "parser.add_argument('--lr', type=float)\nargs = parser.parse_args()\n"},
             findings=(Expect("info", "parsed when settings.py is imported"),)),
        # a config dataclass built in a helper no training loop reaches is a part's settings
        # (open_clip's AudioAugmentationCfg() in an audio transform), not the program's
        "import dataclasses\n\nimport torch\n\n\n@dataclasses.dataclass\nclass AugmentCfg:\n    p: float = 0.5\n\n\n"
        "def make_transform():\n    cfg = AugmentCfg()\n    return cfg.p\n\n\n"
        "def main():\n    p = make_transform()\n    for _ in range(3):\n"
        "        torch.ones(1, requires_grad=True).mul(p).sum().backward()\n\n\nif __name__ == '__main__':\n    main()\n",
        # a config dataclass built once per batch is data, not the program's configuration
        "import dataclasses\n\nimport torch\n\n\n@dataclasses.dataclass\nclass StepParams:\n    lr: float = 0.1\n\n\n"
        "def main():\n    for _ in range(3):\n        params = StepParams()\n" + _TRAIN.replace("    ", "        ", 1)
        + "\n\nif __name__ == '__main__':\n    main()\n",
    ]
    INVALID = [
        Case(
            # torch_basic's shape: a helper returns the parse, main names it
            "import argparse\n\nimport torch\n\n\ndef parse_args(argv=None):\n"
            "    parser = argparse.ArgumentParser()\n    parser.add_argument('--batch-size', type=int, default=16)\n"
            "    return parser.parse_args(argv)\n\n\ndef main(argv=None):\n    args = parse_args(argv)\n"
            + _TRAIN + "\n\nif __name__ == '__main__':\n    main()\n",
            'import dftpass.runtime as _dft_runtime\nimport argparse\n\nimport torch\n\n\n'
            'def parse_args(argv=None):\n    parser = argparse.ArgumentParser()\n'
            "    parser.add_argument('--batch-size', type=int, default=16)\n"
            '    return parser.parse_args(argv)\n\n\ndef main(argv=None):\n    args = parse_args(argv)\n'
            '    _dft_runtime.log_parameters("args", args)\n'
            "    torch.ones(1, requires_grad=True).sum().backward()\n\n\nif __name__ == '__main__':\n"
            '    main()\n',
        ),
        Case(
            # hydra: the config parameter, at the start of the body (after the docstring)
            "import hydra\nimport torch\nfrom omegaconf import DictConfig\n\n\n"
            "@hydra.main(version_base=None, config_path='conf', config_name='config')\n"
            "def main(cfg: DictConfig) -> None:\n    \"\"\"Train.\"\"\"\n" + _TRAIN + "\n\n"
            "if __name__ == '__main__':\n    main()\n",
            'import dftpass.runtime as _dft_runtime\nimport hydra\nimport torch\n'
            'from omegaconf import DictConfig\n\n\n'
            "@hydra.main(version_base=None, config_path='conf', config_name='config')\n"
            'def main(cfg: DictConfig) -> None:\n    """Train."""\n'
            '    _dft_runtime.log_parameters("cfg", cfg)\n'
            "    torch.ones(1, requires_grad=True).sum().backward()\n\n\nif __name__ == '__main__':\n"
            '    main()\n',
        ),
        Case(
            # nanoGPT: module-level defaults, overridden by configurator.py, collected in a dict
            "import torch\n\nbatch_size = 12\nlearning_rate = 6e-4\n"
            "config_keys = [k for k, v in globals().items() if not k.startswith('_') and isinstance(v, (int, float))]\n"
            "exec(open('configurator.py').read())  # overrides from command line or config file\n"
            "config = {k: globals()[k] for k in config_keys}  # will be useful for logging\n"
            "w = torch.zeros(1, requires_grad=True)\nfor _ in range(3):\n    (w * learning_rate).sum().backward()\n",
            'import dftpass.runtime as _dft_runtime\nimport torch\n\nbatch_size = 12\nlearning_rate = 6e-4\n'
            "config_keys = [k for k, v in globals().items() if not k.startswith('_') and isinstance(v, (int, float))]\n"
            "exec(open('configurator.py').read())  # overrides from command line or config file\n"
            'config = {k: globals()[k] for k in config_keys}  # will be useful for logging\n'
            '_dft_runtime.log_parameters("config", config)\nw = torch.zeros(1, requires_grad=True)\n'
            'for _ in range(3):\n    (w * learning_rate).sum().backward()\n',
            files={"configurator.py": "import sys\nfor arg in sys.argv[1:]:\n    pass\n"},
        ),
        Case(
            # transformers' run_clm: three dataclasses, from a JSON file or the command line
            "import json\nimport sys\n\nimport torch\nfrom transformers import HfArgumentParser, TrainingArguments\n\n"
            "from args import DataArguments, ModelArguments\n\n\ndef main():\n"
            "    parser = HfArgumentParser((ModelArguments, DataArguments, TrainingArguments))\n"
            "    if len(sys.argv) == 2 and sys.argv[1].endswith('.json'):\n"
            "        model_args, data_args, training_args = parser.parse_json_file(json_file=sys.argv[1])\n"
            "    else:\n        model_args, data_args, training_args = parser.parse_args_into_dataclasses()\n"
            + _TRAIN + "\n\nif __name__ == '__main__':\n    main()\n",
            'import dftpass.runtime as _dft_runtime\nimport json\nimport sys\n\nimport torch\n'
            'from transformers import HfArgumentParser, TrainingArguments\n\n'
            'from args import DataArguments, ModelArguments\n\n\ndef main():\n'
            '    parser = HfArgumentParser((ModelArguments, DataArguments, TrainingArguments))\n'
            "    if len(sys.argv) == 2 and sys.argv[1].endswith('.json'):\n"
            '        model_args, data_args, training_args = parser.parse_json_file(json_file=sys.argv[1])\n'
            '        _dft_runtime.log_parameters("model_args", model_args)\n'
            '        _dft_runtime.log_parameters("data_args", data_args)\n'
            '        _dft_runtime.log_parameters("training_args", training_args)\n    else:\n'
            '        model_args, data_args, training_args = parser.parse_args_into_dataclasses()\n'
            '        _dft_runtime.log_parameters("model_args", model_args)\n'
            '        _dft_runtime.log_parameters("data_args", data_args)\n'
            '        _dft_runtime.log_parameters("training_args", training_args)\n'
            "    torch.ones(1, requires_grad=True).sum().backward()\n\n\nif __name__ == '__main__':\n"
            '    main()\n',
            files={"args.py": "from dataclasses import dataclass\n\n\n@dataclass\nclass ModelArguments:\n"
                              "    name: str = 'gpt2'\n\n\n@dataclass\nclass DataArguments:\n    path: str = ''\n"},
        ),
        Case(
            # parsed at the top of the script, on import: logged once the __main__ block traces
            "import argparse\n\nimport torch\n\nparser = argparse.ArgumentParser()\n"
            "parser.add_argument('--epochs', type=int, default=1)\nargs, unknown = parser.parse_known_args()\n\n\n"
            "def train():\n" + _TRAIN + "\n\nif __name__ == '__main__':\n    # run\n    train()\n",
            'import dftpass.runtime as _dft_runtime\nimport argparse\n\nimport torch\n\n'
            "parser = argparse.ArgumentParser()\nparser.add_argument('--epochs', type=int, default=1)\n"
            'args, unknown = parser.parse_known_args()\n\n\ndef train():\n'
            "    torch.ones(1, requires_grad=True).sum().backward()\n\n\nif __name__ == '__main__':\n"
            '    _dft_runtime.log_parameters("args", args)\n    # run\n    train()\n',
        ),
        Case(
            # a config dataclass, and a class that keeps its namespace on self
            "import argparse\nfrom dataclasses import dataclass\n\nimport torch\n\n\n@dataclass\nclass TrainConfig:\n"
            "    lr: float = 0.1\n    epochs: int = 2\n\n\nclass Trainer:\n    def __init__(self, argv):\n"
            "        self.args = argparse.ArgumentParser().parse_known_args(argv)[0]\n"
            "        self.cfg = TrainConfig()\n\n"
            "    def fit(self):\n    " + _TRAIN + "\n\nif __name__ == '__main__':\n    Trainer(None).fit()\n",
            'import dftpass.runtime as _dft_runtime\nimport argparse\nfrom dataclasses import dataclass\n\n'
            'import torch\n\n\n@dataclass\nclass TrainConfig:\n    lr: float = 0.1\n    epochs: int = 2\n\n\n'
            'class Trainer:\n    def __init__(self, argv):\n'
            '        self.args = argparse.ArgumentParser().parse_known_args(argv)[0]\n'
            '        _dft_runtime.log_parameters("args", self.args)\n        self.cfg = TrainConfig()\n'
            '        _dft_runtime.log_parameters("cfg", self.cfg)\n\n    def fit(self):\n'
            "        torch.ones(1, requires_grad=True).sum().backward()\n\n\nif __name__ == '__main__':\n"
            '    Trainer(None).fit()\n',
        ),
    ]

    def run(self, ctx) -> None:
        graph = ctx.analysis("callgraph")
        programs = ctx.analysis("programs")
        self.graph, self.ctx = graph, ctx
        self.reach: set[str] = set()
        #: file -> kind of the instrumented entry it is ("main-guard" / "module-script"), and the guard
        self.own: dict[str, tuple[str, int | None]] = {}
        self.entry_functions: set[str] = set()
        loops = ctx.analysis("loops")
        #: the functions that run a training or evaluation loop: a configuration object built
        #: where none of them is reached is a part's settings, not the program's
        self.looping = {f.function for kind in ("batch", "epoch") for f in loops.of_kind(kind)}
        for program in programs.instrumented():
            if program.evidence in graph.functions:
                self.looping.add(program.evidence)  # what showed the program trains (a backward pass)
            entry = program.entry
            self.reach |= programs.reach(entry)
            if entry.kind in ("main-guard", "module-script"):
                self.own.setdefault(entry.relpath, (entry.kind, entry.guard))
            if entry.function:
                self.entry_functions.add(entry.function)
        self.plans: Plan = {}
        self._once: dict[str, bool] = {}
        self._drives: dict[str, bool] = {}
        self.noted: set[str] = set()
        for function_id in sorted(self.reach):
            fs, fn = graph.functions[function_id]
            if any(graph.qualify(fs, d.removesuffix("()")) == HYDRA_MAIN for d in fn.decorators) and fn.positional:
                self._at_start(function_id, fn.positional[0], mapping=True, why="hydra configuration")
            for i, call in enumerate(fn.calls):
                shape = self._shape(function_id, i, call)
                if shape:
                    self._place(function_id, call, shape, 0)
            if fn.is_module and fs.exec_includes:
                self._configurator(function_id)
        for (relpath, where, stmt), plan in sorted(self.plans.items(), key=lambda kv: (kv[0][0], kv[1]["line"])):
            code = ctx.names(relpath).metadata(plan["fields"])
            if where == "after":
                edit = InsertAfter(self.id, plan["line"], plan["why"], stmt, code)
            else:
                edit = InsertBefore(self.id, plan["line"], plan["why"], stmt, code, take_comments=False)
            ctx.add_edit(relpath, edit)

    # -- what is a configuration ------------------------------------------------------------
    def _shape(self, function_id: str, index: int, call: CallSite) -> str | None:
        """"one" (a namespace/config object), "first" (a tuple whose first item is one),
        "each" (a tuple of them), or None."""
        graph = self.graph
        fs, fn = graph.functions[function_id]
        targets = graph.targets(function_id, index)
        if call.in_comprehension or any(not t.endswith(".__init__") for t in targets):
            return None  # a project function: followed through its own returns
        method, receiver = call.method, call.receiver
        if method in ARGPARSE_METHODS and receiver and receiver != "self" and not targets:
            return "first" if method == "parse_known_args" else "one"
        if method in DATACLASS_PARSE_METHODS and receiver and not targets:
            return "each"
        qualified = graph.qualify(fs, call.callee)
        if qualified in CLI_BUILDERS:
            return "one"
        # ``TrainConfig(...)``, ``TrainConfig.from_yaml(...)``: asked of the value flow only
        # when a name reads like a configuration class (most calls are not worth the question)
        named_like = CONFIG_CLASS.search(method) or CONFIG_CLASS.search(receiver.rsplit(".", 1)[-1])
        if named_like and call.stmt_kind in ("assign", "return") and graph.values is not None \
                and self._drives_loops(function_id):
            for origin in graph.values.of(function_id, call.callee + "()"):
                if kind(origin) == "inst" and self._is_config_class(subject(origin)):
                    return "one"
        return None

    def _drives_loops(self, function_id: str) -> bool:
        """Module code, an entry, or a function that runs (or calls into) a training or
        evaluation loop, or whose result is returned into one: where a program's configuration
        is made (open_clip's ``AudioAugmentationCfg()`` inside an audio transform is not)."""
        if function_id not in self._drives:
            self._drives[function_id] = False  # a cycle of callers adds nothing
            self._drives[function_id] = self._drives_uncached(function_id)
        return self._drives[function_id]

    def _drives_uncached(self, function_id: str) -> bool:
        graph = self.graph
        if graph.fn(function_id).is_module or function_id in self.entry_functions:
            return True
        if self.looping & ({function_id} | graph.reachable(function_id)):
            return True
        owner = graph.class_of_method(function_id)
        if owner is not None and owner in graph.classes:  # ``Trainer.__init__`` builds what ``fit`` runs with
            methods = graph.classes[owner][1].methods.values()
            ids = {f"{graph.classes[owner][0].relpath}::{q}" for q in methods}
            if any(self.looping & ({m} | graph.reachable(m)) for m in ids if m in graph.functions):
                return True
        # ``def get_config(): return Config(...)``: made for the callers that drive the loops
        returns_config = graph.values is not None and any(
            kind(o) == "inst" and self._is_config_class(subject(o)) for o in graph.values.returns_of(function_id))
        return returns_config and any(self._drives_loops(caller) for caller, _ in graph.call_sites_of(function_id)
                                      if caller in self.reach and caller != function_id)

    def _is_config_class(self, class_id: str) -> bool:
        fs, cs = self.graph.classes[class_id]
        if not CONFIG_CLASS.search(cs.name):
            return False
        if any(d.removesuffix("()").rsplit(".", 1)[-1] in DATACLASS_DECORATORS for d in cs.decorators):
            return True
        return self.graph.has_base(class_id, PYDANTIC_BASES)

    # -- where its fields are logged ---------------------------------------------------------
    def _place(self, function_id: str, call: CallSite, shape: str, hops: int) -> None:
        graph = self.graph
        fs, fn = graph.functions[function_id]
        if call.loops or call.in_comprehension or not self._runs_once(function_id):
            return
        named = self._named(fn, call, shape)
        if named:
            self._after(function_id, call, named)
            return
        if call.stmt_kind == "return" and hops < MAX_RETURN_HOPS:
            for caller, site in graph.call_sites_of(function_id):
                if caller in self.reach:
                    self._place(caller, site, shape, hops + 1)
            return
        if shape != "one":
            return
        # handed to a project function: ``main(parser.parse_args())``
        text = call.callee + "()"
        for i, outer in enumerate(fn.calls):
            if outer.stmt != call.stmt or outer is call:
                continue
            positions = [k for k, a in enumerate(outer.args) if a == text]
            keywords = [k for k, v in outer.keywords if v == text]
            for target in graph.targets(function_id, i):
                if target not in self.reach:
                    continue
                tfn = graph.fn(target)
                offset = 1 if graph.is_bound_method(target) else 0
                params = [tfn.positional[k + offset] for k in positions if k + offset < len(tfn.positional)]
                params += [k for k in keywords if k in tfn.params]
                for param in params:
                    self._at_start(target, param, mapping=False, why=f"parameters parsed by {call.callee}()")

    def _named(self, fn, call: CallSite, shape: str) -> list[tuple[str, str, bool]]:
        """The names the statement binds the configuration to: (expression, prefix, mapping)."""
        whole = call.callee + "()"
        same = [a for a in fn.assigns if a.stmt == call.stmt]
        out = []
        for a in same:
            if a.value == whole and shape == "one":
                out.append((a.target, False))
            elif a.value == whole + "[]" and shape == "first":
                out.append((a.target, False))  # parse_known_args()[0]
            elif a.value == "vars()" and a.call_args == (whole,) and shape == "one":
                out.append((a.target, True))  # vars(parser.parse_args()): a dict
        if not out and call.stmt_kind == "assign" and len(call.assigned_to) > 1 and shape in ("first", "each"):
            names = call.assigned_to[:1] if shape == "first" else call.assigned_to
            out = [(n, False) for n in names if not n.startswith("_")]
        return [(target, target.rsplit(".", 1)[-1], mapping) for target, mapping in out]

    def _after(self, function_id: str, call: CallSite, fields: list[tuple[str, str, bool]],
               why: str | None = None) -> None:
        graph = self.graph
        fs, fn = graph.functions[function_id]
        if fn.is_module and not call.in_main_guard:
            own = self.own.get(fs.relpath)
            if own is None:
                if fs.relpath not in self.noted:
                    self.noted.add(fs.relpath)
                    self.ctx.report(Finding(self.id, f"the configuration is parsed when {fs.relpath} is imported, "
                                            "before the program starts tracing: its parameters are not logged",
                                            fs.relpath, call.line, severity=Severity.INFO))
                return
            if own[0] == "main-guard":
                guard = fs.main_guards[own[1]]
                if self._logged(fs, fn, lambda c: c.in_main_guard):
                    return
                self._plan(fs.relpath, "before", guard.body_first, guard.line, fields,
                           f"{why or 'parameters parsed'} on import, logged once the program traces")
                return
        if self._logged(fs, fn, lambda c: c.line > call.line):
            return
        self._plan(fs.relpath, "after", call.stmt, call.line, fields, why or f"parameters parsed by {call.callee}()")

    def _at_start(self, function_id: str, param: str, mapping: bool, why: str) -> None:
        fs, fn = self.graph.functions[function_id]
        if not self._runs_once(function_id) or self._logged(fs, fn, lambda c: True):
            return
        self._plan(fs.relpath, "before", fn.body_first, fn.line, [(param, param, mapping)], why)

    def _configurator(self, module_id: str) -> None:
        """nanoGPT: ``config = {k: globals()[k] for k in config_keys}`` after the exec."""
        fs, fn = self.graph.functions[module_id]
        execs = [c for c in fn.calls if c.callee == "exec" and len(c.stmt) == 1]
        if not execs:
            return
        for a in fn.assigns:
            if a.value == "<dict>" and len(a.stmt) == 1 and a.line > execs[0].line:
                fake = CallSite("<dict>", a.line, 0, a.stmt, "assign", (), (), (), (), (a.target,))
                self._after(module_id, fake, [(a.target, a.target, True)],
                            "configuration collected after configurator.py")
                return

    def _plan(self, relpath: str, where: str, stmt, line: int, fields, why: str) -> None:
        plan = self.plans.setdefault((relpath, where, stmt), {"line": line, "why": why, "fields": []})
        for f in fields:
            if f not in plan["fields"]:
                plan["fields"].append(f)

    @staticmethod
    def _logged(fs, fn, where) -> bool:
        """The function already logs metadata (at the places ``where`` accepts): by hand, or
        through the runtime's ``log_parameters`` (what an earlier run wrote)."""
        return any((is_metadata_call(c.callee) or runtime_call(fs, c.callee) == "log_parameters") and where(c)
                   for c in fn.calls)

    def _runs_once(self, function_id: str, depth: int = 0) -> bool:
        """Whether one run of the program runs the function about once: module code, an
        entry, or a function whose every call in the program sits outside loops in such a
        function."""
        if function_id in self._once:
            return self._once[function_id]
        self._once[function_id] = True  # a cycle adds nothing
        graph = self.graph
        fn = graph.fn(function_id)
        once = True
        if not fn.is_module and function_id not in self.entry_functions and depth < 8:
            for caller, site in graph.call_sites_of(function_id):
                if caller not in self.reach:
                    continue
                if site.loops or site.in_comprehension or not self._runs_once(caller, depth + 1):
                    once = False
                    break
        self._once[function_id] = once
        return once

