"""The analysis of a run as a one-screen text summary and as Markdown (both from the dict
that ``analysis.json`` holds, so ``report`` renders saved analyses the same way)."""

from __future__ import annotations

import re

from dftpass.core.console import Col, table


def human_bytes(n: float | None) -> str:
    if n is None:
        return "-"
    for unit in ("B", "KB", "MB", "GB", "TB"):
        if abs(n) < 1024 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TB"  # pragma: no cover


def plural(n: int, one: str, many: str) -> str:
    """``1 process``, ``3 processes``."""
    return f"{n} {one if n == 1 else many}"


def cell(text: object) -> str:
    """Text for a Markdown table cell or list item: one line, pipes escaped, and outside
    `code` the characters Markdown would read as emphasis or HTML (``__init__`` stays
    ``__init__``, not a bold "init")."""
    parts = str(text).replace("\n", " ").split("`")
    for i in range(0, len(parts), 2):  # the even parts are outside backticks
        # an underscore inside a word (``wall_s``) is no emphasis in CommonMark: only those at
        # a word's edge (``__init__``) are escaped
        parts[i] = re.sub(r"[\\*<>\[\]]|(?<![^\W_])_+|_+(?![^\W_])", lambda m: "".join("\\" + c for c in m.group()),
                          parts[i])
    return "`".join(parts).replace("|", "\\|")


def _count(x: float | None) -> str:
    return "-" if x is None else f"{x:.0f}"


def _bandwidth_text(x: float | None) -> str:
    """`` at 1.2 GB/s``, or nothing when there were too few reads to give a rate."""
    return "" if x is None else f" at {human_bytes(x)}/s"


def _iops_text(io: dict) -> str:
    ops = io["read_ops"] + io["write_ops"]
    if io["iops"] is None:
        return f"{ops} reads/writes (too few, or too short, for an IOPS figure)" if ops else "no reads/writes"
    return f"{io['iops']:.0f} IOPS"


def accounting_lines(t: dict | None) -> list[str]:
    """The wall time in parts that add up: inside the root, traced outside it, untraced."""
    if not t or not t.get("wall_s"):
        return []
    wall = t["wall_s"]

    def part(seconds: float | None) -> str:
        return "-" if seconds is None else f"{seconds:.2f} s ({seconds / wall:.0%})"

    lines = [f"wall {wall:.2f} s = inside the root {part(t['inside_root_s'])}"
             f" + traced outside the root {part(t['traced_outside_root_s'])}"
             f" + untraced {part(t['untraced_s'])}"]
    if t.get("untraced_before_s") is not None:
        lines.append(f"untraced: {t['untraced_before_s']:.2f} s before the first event (start-up, imports, set-up "
                     f"before initialization), {t['untraced_after_s']:.2f} s after the last (finalize, shutdown)")
    if not t.get("root"):
        lines.append("no root region in the trace (ML-R1)")
    return lines


def io_lines(a: dict) -> list[str]:
    """The I/O the trace holds: the intercepted calls when there are any (dftracer records
    them under DFTRACER_DATA_DIR only: "read 0 B" of a run that set none would be false),
    and the I/O regions the annotation placed, with the bytes they measured."""
    io = a["io"]
    if any(c["cat"] in ("POSIX", "STDIO") for c in a["categories"]):
        out = [f"I/O (POSIX/STDIO): read {human_bytes(io['read_bytes'])}{_bandwidth_text(io['read_bandwidth'])}, "
               f"wrote {human_bytes(io['write_bytes'])}, {_iops_text(io)}, {io['metadata_ops']} metadata calls"]
    else:
        out = ["I/O (POSIX/STDIO): not traced (dftracer intercepts the calls on files under DFTRACER_DATA_DIR: "
               "`dftpass trace --data-dir DIR`)"]
    regions = [r for r in a["top"] if ".io." in r["name"] or r["name"].startswith("io.")]
    if regions:
        out.append("I/O regions: " + ", ".join(
            f"{r['name']} {r['count']}" + (f" ({human_bytes(r['bytes'])})" if r.get("bytes") else "") for r in regions))
    return out


def pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f}%"


def _overlap_line(o: dict | None) -> str:
    if not o:
        return "overlap: not computed"
    stall = o.get("fetch_stall_share")
    # the verdict's reason may already say it (a stall verdict is about the wait)
    said = "waits for data" in (o.get("reason") or "")
    stall_text = f"; the batch loop waited for data {pct(stall)} of its time" if stall is not None and not said else ""
    workers = plural(o["loading_workers"], "worker process", "worker processes")
    return (f"overlap of loading and compute (whole run): {o['verdict']} ({o['reason']}){stall_text}; "
            f"{workers} with loading events")


def repeats_line(a: dict) -> str:
    """Which repeat the tables show, and the spread of the wall time over the repeats."""
    reps = a["repeats"]
    walls = [r["wall_s"] for r in reps if r.get("wall_s") is not None]
    median = a["metrics"].get("wall_s")
    if len(reps) < 2 or not walls or median is None:
        return ""
    shown = a.get("shown_repeat", reps[0]["repeat"])
    shown_wall = next((r["wall_s"] for r in reps if r["repeat"] == shown), None)
    # with an even number of repeats the median lies between two: the one shown is the lower
    which = "the median one" if shown_wall is None or abs(shown_wall - median) < 5e-3 else \
        f"wall {shown_wall:.2f} s, the lower of the two middle ones"
    return (f"{len(reps)} repeats: median wall {median:.2f} s (from {min(walls):.2f} to {max(walls):.2f} s); "
            f"the tables and the breakdown of the wall time show repeat {shown} ({which})")


#: the columns of the per-phase table: (header, key, format)
PHASE_COLUMNS = (("phase", "phase", "{}"), ("time s", "span_s", "{:.3f}"), ("batches", "batches", "{}"),
                 ("batches/s", "batches_per_s", "{:.1f}"), ("compute s", "compute_s", "{:.3f}"),
                 ("loop waits s", "fetch_wait_s", "{:.3f}"), ("waits %", "fetch_stall_share", "pct"),
                 ("first batches s", "first_fetch_s", "{:.3f}"), ("loading, workers s", "loading_workers_s", "{:.3f}"),
                 ("loading, main s", "loading_main_s", "{:.3f}"), ("verdict", "verdict", "{}"))


def _phase_cells(p: dict) -> list[str]:
    out = []
    for _, key, fmt in PHASE_COLUMNS:
        value = p.get(key)
        out.append(pct(value) if fmt == "pct" else "-" if value is None else fmt.format(value))
    return out


def _phases(a: dict) -> list[dict]:
    o = a.get("overlap") or {}
    return list((o.get("phases") or {}).values())


def _diagnosis_lines(a: dict) -> list[str]:
    d = a.get("diagnosis") or {}
    neck = d.get("bottleneck")
    if not neck:
        return []
    lines = [f"bottleneck: {neck['kind']} in {neck['phase']} ({neck['overlap']}): {neck['text']}"]
    if neck.get("remedy"):
        lines.append(f"  what to do: {neck['remedy']}")
    return lines


def _cause_lines(a: dict, code: str = "") -> list[str]:
    out = []
    for c in a.get("causes", []):
        mark = "cause" if c.get("explains") else "also"
        out.append(f"{mark} {code}{c['id']}{code} at {code}{c.get('location') or c['path']}{code}: {c['message']}")
    return out


#: the rule whose findings restate the diagnosis (bottleneck, causes, overlap): the summary
#: shows those lines once, above; JSON, Markdown and SARIF keep the findings. Its errors are
#: listed all the same: they set the exit code, and a user must see what failed it.
DIAGNOSIS_RULE = "ML-R24"


def _findings_lines(a: dict, diagnosis_shown: bool = False) -> list[str]:
    findings = [f for f in a["findings"] if f["severity"] != "info"
                and not (diagnosis_shown and f["rule"] == DIAGNOSIS_RULE and f["severity"] != "error")]
    if not findings:
        return []
    lines = ["", "findings:"]
    for f in findings:
        where = f"{f['path']}:{f['line']}" if f["line"] else f["path"]
        lines.append(f"  {f['severity']}: {f['rule']} {where}: {f['message']}")
    return lines


def sampling_lines(a: dict) -> list[str]:
    """``1 step in 8 traced (...); totals estimated``, and where the estimate may mislead."""
    sampling = a.get("sampling") or {}
    if not sampling.get("text"):
        return []
    return [sampling["text"], *(f"caution: {w}" for w in sampling.get("warnings", []))]


def _problem_lines(a: dict) -> list[str]:
    return ["", "trace problems:"] + [f"  {p}" for p in a["problems"]] if a["problems"] else []


def _resource_lines(a: dict) -> list[str]:
    """Exit code, CPU time and peak memory of each repeat (what a baseline run records)."""
    out = []
    for r in a["repeats"]:
        res = r.get("resources") or {}
        cpu = (res.get("cpu_user_s") or 0) + (res.get("cpu_system_s") or 0)
        out.append(f"  repeat {r['repeat']}: exit code {r.get('exit_code')}, wall {r.get('wall_s') or 0:.2f} s"
                   + (f", CPU {cpu:.2f} s, peak memory {res['max_rss_mb']:.0f} MB" if res else ""))
    return out


def _detail_tables(a: dict, top: int) -> list[str]:
    """The tables behind ``-v``: time by category, the top events, the processes."""
    lines = [""] + table(["category", Col("events", True), Col("time s", True), Col("sum s*", True)],
                         [[c["cat"], c["count"], f"{c['total_s']:.3f}", f"{c.get('sum_s', c['total_s']):.3f}"]
                          for c in a["categories"]])
    lines += ["  time: nested events of a category counted once, added over processes; "
              "* sum: every event's duration added up"]
    lines += [""] + table([Col("event", max_width=40), Col("count", True), Col("sum s", True), Col("mean ms", True),
                           Col("p99 ms", True)],
                          [[f"{r['cat']}/{r['name']}", r["count"], f"{r['total_s']:.3f}", f"{1e3 * r['mean_s']:.2f}",
                            f"{1e3 * r['p99_s']:.2f}"] for r in a["top"][:top]])
    procs = a.get("process_table", [])
    if procs:
        lines += [""] + table(["process", "role", Col("events", True), Col("in events s", True), Col("span s", True),
                               Col("bytes", True)],
                              [[f"pid {p['pid']}", p["role"] or "-", p["events"], f"{p['busy_s']:.3f}",
                                f"{p['span_s']:.3f}", human_bytes(p["bytes"])] for p in procs[:8]])
        if len(procs) > 8:
            lines.append(f"  ... {len(procs) - 8} more processes (--format json lists all)")
    return lines


def text(a: dict, top: int = 12, verbose: bool = False) -> str:
    """The one-screen summary; ``verbose`` (``-v``) adds the tables by category, event and
    process."""
    m = a["metrics"]
    wall = m.get("wall_s")
    reps = len(a["repeats"])
    head = (f"run {a['label']}: {reps} repeat{'s' if reps > 1 else ''}, wall {wall:.2f} s" if wall else
            f"traces {a['label']}")
    if not a["events"] and a.get("baseline"):
        return "\n".join([head.replace(":", ": a baseline (no tracing),", 1), *_resource_lines(a)]
                          + _findings_lines(a) + _problem_lines(a))
    if not a["events"]:  # empty tables would only hide the reason
        return "\n".join([head] + _findings_lines(a) + _problem_lines(a))
    lines = [head, *([f"  {repeats_line(a)}"] if repeats_line(a) else []),
             f"  {a['events']} events from {plural(a['processes']['count'], 'process', 'processes')} "
             f"({', '.join(f'{n} {r}' for r, n in sorted(a['processes']['roles'].items()))}), "
             f"traced span {a['span_s']:.2f} s",
             *[f"  {line}" for line in sampling_lines(a)],
             *[f"  {line}" for line in accounting_lines(a.get("time_accounting"))]]
    lines += ["", *_diagnosis_lines(a)]
    phases = _phases(a)
    if phases:
        lines += [""] + table([Col(h, right=0 < i < len(PHASE_COLUMNS) - 1) for i, (h, _, _) in enumerate(PHASE_COLUMNS)],
                              [_phase_cells(p) for p in phases])
    if a.get("causes"):
        lines += [""] + [f"  {line}" for line in _cause_lines(a)]
    if verbose:
        lines += _detail_tables(a, top)
    lines += ["", _overlap_line(a["overlap"]), *io_lines(a)]
    lines += _findings_lines(a, diagnosis_shown=True)
    if a["proposals"]:
        lines += ["", "proposals (app / system impact %, weighted), the first answers the top cause:"]
        for p in a["proposals"][:5]:
            lines.append(f"  [{p['level']} {p['component']}] {p['title']}: {p['app_impact_pct']:.1f} / "
                         f"{p['system_impact_pct']:.1f} -> {p['weighted_score']:.1f}  ({p['id']})")
            if p.get("estimate", {}).get("formula"):
                lines.append(f"      estimate: {p['estimate']['formula']} -> {p['estimate'].get('app_pct', '')}")
    lines += _problem_lines(a)
    if not verbose:
        lines += ["", "(-v adds the time by category, the top events and the processes)"]
    return "\n".join(lines)


def markdown(a: dict, figures: list[tuple[str, str]] = ()) -> str:
    """The run's section; ``figures`` ((alt text, source) of pictures) go right under its
    headline figures, before the tables: the timeline is what a reader looks at first."""
    m = a["metrics"]
    out = [f"## Run `{a['label']}`", ""]
    if not a["events"]:
        wall = f"wall time {m['wall_s']:.2f} s over {len(a['repeats'])} repeat(s); " if m.get("wall_s") else ""
        return "\n".join(out + [f"- {wall}no trace events: an un-annotated run (only its wall time is compared), "
                                 "or a run whose traces are empty"] + [f"- {p}" for p in a["problems"]])
    if m.get("wall_s"):
        out.append(f"- wall time: {m['wall_s']:.2f} s (median of {len(a['repeats'])} repeat(s))")
    if repeats_line(a):
        out.append(f"- {repeats_line(a)}")
    out += [f"- {a['events']} events, {plural(a['processes']['count'], 'process', 'processes')} "
            f"({', '.join(f'{n} {r}' for r, n in sorted(a['processes']['roles'].items()))}), "
            f"traced span {a['span_s']:.2f} s"]
    out += [f"- {line}" for line in sampling_lines(a)]
    out += [f"- {line}" for line in accounting_lines(a.get("time_accounting"))]
    out += [f"- {line}" for line in _diagnosis_lines(a)]
    out += [f"- {_overlap_line(a['overlap'])}"]
    for alt, src in figures:
        out += ["", f"![{cell(alt)}]({src})"]
    phases = _phases(a)
    if phases:
        out += ["", "### Phases", "", "| " + " | ".join(h for h, _, _ in PHASE_COLUMNS) + " |",
                "|---|" + "---:|" * (len(PHASE_COLUMNS) - 2) + "---|"]
        out += ["| " + " | ".join(cell(c) for c in _phase_cells(p)) + " |" for p in phases]
    if a.get("causes"):
        out += ["", "### Diagnosis", ""] + [f"- {line}" for line in _cause_lines(a, "`")]
    out += ["", "### Time by category", "",
            "Time: a category's nested events counted once, added over processes; sum: every event's duration.",
            "", "| category | events | time s | sum s |", "|---|---:|---:|---:|"]
    out += [f"| {cell(c['cat'])} | {c['count']} | {c['total_s']:.3f} | {c.get('sum_s', c['total_s']):.3f} |"
            for c in a["categories"]]
    out += ["", "| event | count | sum s | mean ms | p50 ms | p99 ms | bytes |", "|---|---:|---:|---:|---:|---:|---:|"]
    out += [f"| {cell(r['cat'])}/{cell(r['name'])} | {r['count']} | {r['total_s']:.3f} | {1e3 * r['mean_s']:.2f} | "
            f"{1e3 * r['p50_s']:.2f} | {1e3 * r['p99_s']:.2f} | {human_bytes(r['bytes']) if r['bytes'] else ''} |"
            for r in a["top"]]
    if a.get("process_table"):
        out += ["", "Time in events sums a process's events (nested ones too).", "",
                "| process | role | host | events | in events s | span s | bytes | read B/s | IOPS | metadata ops |",
                "|---|---|---|---:|---:|---:|---:|---:|---:|---:|"]
        out += [f"| {p['pid']} (`{p['file']}`) | {p['role'] or '-'} | {p['host'] or '-'} | {p['events']} | "
                f"{p['busy_s']:.3f} | {p['span_s']:.3f} | {human_bytes(p['bytes'])} | "
                f"{human_bytes(p['read_bandwidth'])} | {_count(p['iops'])} | {p['metadata_ops']} |"
                for p in a["process_table"]]
    if a["findings"]:
        out += ["", "### Findings", ""]
        for f in a["findings"]:
            where = f"`{f['path']}:{f['line']}`" if f["line"] else f"`{f['path']}`"
            out.append(f"- **{f['severity']}** {f['rule']} {where}: {cell(f['message'])}")
    out += ["", "### Proposals", ""]
    if a["proposals"]:
        out += ["| # | level | component | strategy | change | app impact % | system impact % | score | status |",
                "|---|---|---|---|---|---:|---:|---:|---|"]
        for i, p in enumerate(a["proposals"], 1):
            actual = f" (measured {p['actual_app_pct']:.1f})" if p.get("actual_app_pct") is not None else ""
            out.append(f"| {i} | {p['level']} | {p['component']} | {cell(p['title'])} | {cell(p['change'])} | "
                       f"{p['app_impact_pct']:.1f}{actual} | {p['system_impact_pct']:.1f} | {p['weighted_score']:.1f} | "
                       f"{p['status']} |")
        out.append("")
        for p in a["proposals"]:
            out.append(f"- **{p['id']}**: {p['why']}. " + " ".join(f"[{c}]" for c in p["citations"]))
            est = p.get("estimate") or {}
            if est.get("formula"):
                out.append(f"  - estimate: {est['formula']}; {est.get('app_pct', '')}")
            for pre in p.get("preconditions", []):
                out.append(f"  - holds: {pre}")
    else:
        out.append("No measured bottleneck calls for a change.")
    out += ["", "### Checklist", "", "| component | dimension | verdict |", "|---|---|---|"]
    out += [f"| {cell(v['component'])} | {cell(v['title'])} | {cell(v['verdict'])} |" for v in a["checklist"]]
    if a["problems"]:
        out += ["", "### Trace problems", ""] + [f"- {p}" for p in a["problems"]]
    return "\n".join(out)


_MARK = {"improved": "+", "regressed": "-", "neutral": "=", "info": " "}


def fmt_value(value: float | None, unit: str) -> str:
    if value is None:
        return "-"
    if unit in ("B", "B/s"):
        return human_bytes(value) + ("/s" if unit == "B/s" else "")
    if unit == "s":
        return f"{value:.3f} s"
    if unit == "":
        return f"{value:.3g}" if abs(value) < 1 else f"{value:,.0f}"
    return f"{value:,.1f} {unit}"


def _cell(c: dict, unit: str) -> str:
    text = fmt_value(c["value"], unit)
    if c.get("change_pct") is None:
        return text
    mark = _MARK[c["cls"]] + ("~" if c.get("within_noise") else "")
    return f"{text} ({c['change_pct']:+.1f}% {mark})"


def compare_text(cmp: dict) -> str:
    """The comparison's table and verdicts (coloured on a terminal by :func:`core.console.emit`)."""
    lines = table([Col("metric", max_width=24)] + [Col(label, max_width=34) for label in cmp["labels"]],
                  [[row["metric"]] + [_cell(c, row["unit"]) for c in row["cells"]] for row in cmp["rows"]], indent=0)
    lines += ["", f"+ improved, - regressed (beyond ±{cmp['threshold_pct']:.0f}% in the metric's direction), "
                  "= neutral, ~ within the spread between repeats"]
    lines += [""] + cmp["verdicts"]
    lines += [f"sampled: {text}" for text in cmp.get("sampled", [])]
    lines += judgement_lines(cmp)
    lines += [impact_line(imp) for imp in cmp["proposal_impacts"]]
    return "\n".join(lines)


def judgement_lines(cmp: dict, bullet: str = "") -> list[str]:
    """Same work and same output, per compared run, and repeats that disagree."""
    out = []
    for label, j in zip(cmp["labels"][1:], cmp.get("judgements", [])):
        for what, key in (("work", "same_work"), ("output", "same_output")):
            v = j[key]
            word = {True: "same", False: "DIFFERENT", None: "cannot tell"}[v["same"]]
            out.append(f"{bullet}{label}: {what} {word}: {v['reason']}")
    out += [f"{bullet}note: {reason}" for reason in cmp.get("unsteady", [])]
    return out


def impact_line(imp: dict, code: str = "") -> str:
    """One applied proposal: its estimated and its measured share of wall time."""
    est = "-" if imp["estimated_app_pct"] is None else f"{imp['estimated_app_pct']:.1f}%"
    act = "-" if imp["actual_app_pct"] is None else f"{imp['actual_app_pct']:.1f}%"
    q = code
    text = (f"proposal {q}{imp['proposal']}{q} in {q}{imp['run']}{q} (against {q}{imp['against']}{q}): "
            f"estimated {est} of wall time, measured {act}")
    if imp.get("metric") and imp.get("measured_saved_s") is not None and imp.get("estimated_saved_s") is not None:
        text += (f"; {imp['metric']}: estimated {imp['estimated_saved_s']:.3g} s saved, measured "
                 f"{imp['measured_saved_s']:.3g} s")
    if imp.get("formula"):
        text += f" (estimate: {imp['formula']})"
    return text


#: words, not emoji: an emoji renders as an empty box where no emoji font is installed
_BADGE = {"improved": "(better)", "regressed": "(worse)", "neutral": "(same)", "info": ""}


def compare_markdown(cmp: dict) -> str:
    labels = cmp["labels"]
    out = ["| metric | " + " | ".join(labels) + " |", "|---|" + "---:|" * len(labels)]
    for row in cmp["rows"]:
        cells = []
        for c in row["cells"]:
            text = fmt_value(c["value"], row["unit"])
            if c.get("change_pct") is not None:
                noise = " (noise)" if c.get("within_noise") else ""
                text += f" {c['change_pct']:+.1f}% {_BADGE[c['cls']]}{noise}"
            cells.append(text)
        out.append(f"| {cell(row['metric'])} | " + " | ".join(cells) + " |")
    out += ["", f"better / worse: beyond ±{cmp['threshold_pct']:.0f}% in the metric's direction (lower time, higher "
                f"bandwidth is better); same: within ±{cmp['threshold_pct']:.0f}%.", ""]
    out += [f"- {v}" for v in cmp["verdicts"]]
    out += [f"- sampled: {text}" for text in cmp.get("sampled", [])]
    out += judgement_lines(cmp, bullet="- ")
    out += [f"- {impact_line(imp, code='`')}" for imp in cmp["proposal_impacts"]]
    return "\n".join(out)


def optimize_markdown(doc: dict) -> str:
    """``dftpass optimize``'s attempts: the change, the estimate beside the measured ratio and
    its interval (untraced, paired), same work, same output, the decision with its reason, and
    the kept changes confirmed together against the original."""
    def ratio(series: dict | None) -> str:
        if not series or series.get("ratio") is None:
            return "-"
        return f"{series['ratio']:.3f}x [{series['low']:.3f}, {series['high']:.3f}]"

    base = doc.get("baseline") or {}
    out = []
    if base.get("wall_s") is not None:
        out.append(f"Baseline `{base.get('run')}`: {base['wall_s']:.2f} s (median of {base.get('repeats')}); "
                   f"{cell(base.get('bottleneck') or 'no bottleneck named')}.")
        if base.get("sampling"):
            out.append(f"Its trace: {cell(base['sampling'])}; the work is counted by the loop itself.")
    out += ["", "| # | proposal | decision | estimate | program | wall | pairs | same work | "
            "same output | why |", "|---:|---|---|---:|---:|---:|---:|---|---|---|"]
    verdict = {True: "same", False: "differs", None: "-"}
    for i, a in enumerate(doc.get("attempts", []), 1):
        t = a.get("timing") or {}
        est = "-" if a.get("estimate_pct") is None else f"{a['estimate_pct']:+.1f}%"
        out.append(f"| {i} | `{a['proposal']}` | {'**kept**' if a['kept'] else 'not kept'} | {est} | "
                   f"{ratio(t.get('program'))} | {ratio(t.get('wall'))} | {a.get('repeats', 0)} | "
                   f"{verdict[a.get('same_work')]} | {verdict[a.get('outputs_same')]} | {cell(a.get('why', ''))} |")
    changes = [f"- `{a['proposal']}`: {cell(a['change'])}" for a in doc.get("attempts", []) if a.get("kept")]
    if changes:
        out += ["", "Kept changes:", *changes]
    confirmation = doc.get("confirmation")
    if confirmation:
        out += ["", f"**{cell(confirmation.get('headline') or confirmation.get('text', ''))}**"]
    if doc.get("stopped"):
        out += ["", f"Stopped: {cell(doc['stopped'])}."]
    if doc.get("optimized"):
        out += ["", f"The optimized copy: `{doc['optimized']}`; the patch: `{doc.get('patch')}`."]
    over = doc.get("overhead") or {}
    if over:
        out += ["", f"{doc.get('seconds', 0):.0f} s in all; {over.get('runs')} runs took {over.get('runs_s', 0):.0f} s, "
                    f"annotation, analysis and judging {over.get('beyond_runs_s', 0):.1f} s. Ratios are after over "
                    "before (below 1: faster), geometric means of untraced alternating pairs, with their 95% "
                    "interval [low, high]."]
    return "\n".join(out)
