"""``dftpass rules``, ``explain``, ``config``, ``plugins`` and ``detect``."""

from __future__ import annotations

import argparse
import json

from dftpass.core.config import rule_selected
from dftpass.core.context import RunContext
from dftpass.core.passes import PassKind
from dftpass.core.project import Project


def cmd_rules(args: argparse.Namespace) -> int:
    from dftpass.cli import load

    config, manager = load(args)
    rows = []
    for cls in manager.rules():
        on = rule_selected(cls.id, cls.tags, cls.default_enabled, config.get("rules.select"), config.get("rules.ignore"))
        rows.append({"id": cls.id, "title": cls.title, "kind": cls.kind.value, "enabled": on,
                     "default": cls.default_enabled, "frameworks": list(cls.frameworks), "tags": list(cls.tags),
                     "plugin": manager.provider[cls.id], "summary": cls.summary()})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    for r in rows:
        state = "on " if r["enabled"] else "off"
        gate = f" [{', '.join(r['frameworks'])}]" if r["frameworks"] else ""
        print(f"{r['id']:<8} {state} {r['kind']:<9} {r['title']}{gate}")
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    from dftpass.cli import UsageError, load

    _, manager = load(args)
    cls = manager.registry.get(args.rule) or manager.registry.get(args.rule.upper())
    if cls is None:
        raise UsageError(f"no rule {args.rule!r}; `dftpass rules` lists them")
    gates = ", ".join(cls.frameworks) or "any project"
    print(f"{cls.id}: {cls.title}  ({cls.kind.value}; on by default: {'yes' if cls.default_enabled else 'no'}; "
          f"applies to: {gates})")
    print()
    print(cls.doc())
    if cls.INVALID:
        case = cls.INVALID[0]
        print("\nBefore:\n")
        print(_indent(case.before))
        print("After:\n")
        print(_indent(case.after or case.before))
    return 0


def _indent(text: str) -> str:
    return "".join("    " + line if line.strip() else line for line in text.splitlines(keepends=True))


def cmd_config(args: argparse.Namespace) -> int:
    from dftpass.cli import load

    config, manager = load(args)
    manager.check_config()
    print(config.show())
    return 0


def cmd_plugins(args: argparse.Namespace) -> int:
    from dftpass.cli import load

    _, manager = load(args)
    for info in manager.plugins():
        kind = "built-in" if info.builtin else "plugin"
        print(f"{info.name} ({kind}, {info.module}): {', '.join(info.passes) or 'no passes'}")
    for name in manager.blocked():
        print(f"{name} (blocked by configuration)")
    return 0


def cmd_detect(args: argparse.Namespace) -> int:
    from dftpass.cli import load

    config, manager = load(args)
    project = Project.discover(args.project.resolve(), config.get("files.include"), config.exclude_globs())
    project.load(config.get("files.max-bytes"), jobs=config.get("run.jobs"))
    ctx = RunContext(config, project, manager, "plan")
    det = ctx.analysis("frameworks").to_dict()
    graph = ctx.analysis("callgraph")
    det["entries"] = [f"{e.relpath}:{e.line} ({e.kind}{', runs ' + e.function.split('::')[1] if e.function else ''})"
                      for e in graph.entries]
    if args.json:
        print(json.dumps(det, indent=2))
        return 0
    print(f"frameworks:   {', '.join(det['frameworks']) or 'none found'}")
    print(f"distributed:  {'yes' if det['distributed'] else 'no'}")
    print(f"data loader:  {'yes' if det['has_dataloader'] else 'no'}")
    print(f"ROCm:         {det['rocm']['path'] or 'not found'}; HIP tracing needed: "
          f"{'yes' if det['hip_tracing_needed'] else 'no'}")
    flags = " ".join(f"{k}={v}" for k, v in det["install_flags"].items())
    print(f"install:      {'pip install --no-binary dftracer dftracer with ' + flags if flags else 'pip install dftracer'}")
    print("entries:      " + ("\n              ".join(det["entries"]) or "none found"))
    return 0


__all__ = ["cmd_rules", "cmd_explain", "cmd_config", "cmd_plugins", "cmd_detect", "PassKind"]
