"""Run a command with dftracer switched on, in the canonical layout, and record what ran.

``dftpass trace --label NAME -- CMD ...`` sets the tracing environment (from
:mod:`dftpass.core.emitter`), points ``DFTRACER_LOG_FILE`` into the run's own
``traces/raw/rep-<k>/``, runs the command (``--repeat N`` times), compacts the traces, and
writes ``run.json``. A command that fails is recorded all the same, with its exit code and
whatever traces it left: a crashed run is evidence too.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import platform
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Sequence

import attrs
import structlog

from dftpass.core import emitter
from dftpass.core.writer import atomic_write
from dftpass.runs import outputs
from dftpass.runs.clock import clock_env, read_clock
from dftpass.runs.compact import compact_dir
from dftpass.runs.layout import RunDir, run_dir

log = structlog.get_logger("dftpass")

#: environment worth recording: what changes how a training job runs
_ENV_PREFIXES = (emitter.ENV_PREFIX, "DFTPASS_SAMPLE_", "OMP_", "MKL_", "CUDA_", "HIP_", "ROCR_", "NCCL_", "TORCH_", "PYTORCH_",
                 "SLURM_", "FLUX_", "MASTER_", "WORLD_SIZE", "RANK", "LOCAL_RANK", "LD_PRELOAD", "PYTHONPATH")


def _now() -> str:
    return dt.datetime.now(dt.timezone.utc).isoformat(timespec="milliseconds")


def _revision(cwd: Path) -> dict | None:
    """The project's git revision and whether the tree had uncommitted changes."""
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True, timeout=10)
        if commit.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=cwd, capture_output=True, text=True, timeout=30)
        return {"commit": commit.stdout.strip(), "dirty": bool(dirty.stdout.strip())}
    except (OSError, subprocess.TimeoutExpired):
        return None


def _relevant_env(env: dict[str, str]) -> dict[str, str]:
    return {k: v for k, v in sorted(env.items()) if k.startswith(_ENV_PREFIXES)}


def _dftracer_version() -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(emitter.PIP_PACKAGE)
    except PackageNotFoundError:
        return None


_HAZARD_IMPORT = re.compile(rb"^\s*(?:import|from)\s+(" + b"|".join(m.encode() for m in emitter.POSIX_HAZARDS)
                            + rb")\b", re.MULTILINE)
#: how many files of the project :func:`posix_hazard` reads at most
_HAZARD_SCAN_FILES = 2000


def posix_hazard(command: Sequence[str], cwd: Path) -> str | None:
    """Why dftracer's POSIX interception must stay out of this run, or None: the project
    (the command's working folder, or its script's) imports a library whose file I/O fails
    under it (orbax's checkpoints, through tensorstore's file locks). A run with a data
    folder (``--data-dir``) keeps it: the user asked for file I/O events."""
    folders = [cwd] + [(cwd / a).parent for a in command if a.endswith(".py")]
    seen = 0
    for folder in dict.fromkeys(f.resolve() for f in folders if f.is_dir()):
        for path in folder.rglob("*.py"):
            seen += 1
            if seen > _HAZARD_SCAN_FILES:
                return None
            try:
                found = _HAZARD_IMPORT.search(path.read_bytes())
            except OSError:
                continue
            if found:
                return (f"{path.name} imports {found.group(1).decode()}, whose file locks fail under dftracer's "
                        "POSIX interception (orbax checkpoints: 'Failed to lock file: Bad address'); no POSIX "
                        "events are traced (pass --data-dir to trace them anyway)")
    return None


@attrs.frozen
class OutputOptions:
    """What a repeat's outputs record (:mod:`dftpass.runs.outputs`): the masks of its
    standard output, extra places its files land, the user's check command, and whether the
    program's output is also shown on the terminal."""

    masks: tuple[str, ...] = outputs.DEFAULT_MASKS
    places: tuple[str, ...] = ()
    check: str | None = None
    echo: bool = True


def _wait(proc: subprocess.Popen):
    """The child's exit code and its resource use (``os.wait4``: its own CPU time and peak
    memory, not those of other children); ``proc.wait()`` where ``wait4`` is missing."""
    if not hasattr(os, "wait4"):
        return proc.wait(), None
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    return proc.returncode, usage


def _resources(usage) -> dict | None:
    if usage is None:
        return None
    # ru_maxrss is KiB on Linux, bytes on macOS
    rss_mb = usage.ru_maxrss / (1024 * 1024 if sys.platform == "darwin" else 1024)
    return {"cpu_user_s": round(usage.ru_utime, 3), "cpu_system_s": round(usage.ru_stime, 3),
            "max_rss_mb": round(rss_mb, 1)}


def _run_once(run: RunDir, k: int, command: Sequence[str], cwd: Path, env: dict[str, str],
              chunk_mb: int, compact: bool, keep: OutputOptions = OutputOptions(), baseline: bool = False,
              clock: bool = False, aggregate: bool = False) -> dict:
    raw = run.raw(k)
    shutil.rmtree(raw, ignore_errors=True)
    shutil.rmtree(run.compact(k), ignore_errors=True)
    shutil.rmtree(run.outputs(k), ignore_errors=True)
    raw.mkdir(parents=True)  # dftracer does not create the folder of DFTRACER_LOG_FILE
    run.outputs(k).mkdir(parents=True)
    data_dir = env.get(emitter.ENV_DATA_DIR)
    hazard = None if data_dir else posix_hazard(command, cwd)
    # a baseline runs as the user runs it: tracing off (an annotated program's regions then
    # cost what they cost switched off)
    child_env = dict(env) if baseline else {
        **env, **emitter.traced_env(str(run.log_prefix(k)), data_dir, posix=hazard is None, aggregate=aggregate)}
    clock_file = run.outputs(k) / "clock.jsonl"
    if clock:  # an untraced run timed from inside: the program's time without its start-up
        child_env = clock_env(child_env, clock_file)
    if hazard:
        log.warning("POSIX interception off", reason=hazard)
    start, t0, since_ns = _now(), time.monotonic(), time.time_ns() - 1_000_000
    interrupted = False
    launch_error = None
    try:
        proc = subprocess.Popen(list(command), cwd=cwd, env=child_env, stdout=subprocess.PIPE)
        pump = outputs.tee(proc.stdout, run.outputs(k) / outputs.STDOUT,
                           getattr(sys.stdout, "buffer", None) if keep.echo else None)
        try:
            code, usage = _wait(proc)
        except KeyboardInterrupt:
            interrupted = True
            proc.send_signal(signal.SIGINT)
            code, usage = _wait(proc)
        pump.join()
    except OSError as exc:
        code, usage = 127, None
        launch_error = f"cannot run {command[0]!r} in {cwd}: {exc.strerror or exc}"
    wall = time.monotonic() - t0
    files = sorted(p for p in raw.iterdir() if p.name.endswith((".pfw", ".pfw.gz")))
    record = {
        "repeat": k,
        "command": list(command),
        "cwd": str(cwd),
        "environment": _relevant_env(child_env),
        "start": start,
        "end": _now(),
        "wall_s": round(wall, 6),
        "exit_code": code,
        "resources": _resources(usage),
        "interrupted": interrupted,
        "launch_error": launch_error,
        "trace_files": [{"name": p.name, "bytes": p.stat().st_size} for p in files],
        "empty_trace_files": [p.name for p in files if p.stat().st_size == 0],
    }
    if clock:
        record["clock"] = read_clock(clock_file)
    if not interrupted and launch_error is None:
        record["outputs"] = {
            "stdout": outputs.record_stdout(run.outputs(k), keep.masks),
            "files": outputs.record_files(command, cwd, since_ns, exclude=[run.path], extra=keep.places),
            "check": outputs.run_check(keep.check, cwd, child_env, keep.masks) if keep.check else None,
        }
    log.info("traced run", label=run.label, repeat=k, exit_code=code, wall_s=round(wall, 3), trace_files=len(files))
    if hazard:
        record["notes"] = [f"{emitter.ENV_DISABLE_POSIX}=1: {hazard}"]
    if not files and launch_error is None and not baseline:
        record["problems"] = [why_no_traces(command, cwd)]
    if compact and files:
        chunks, problems = compact_dir(raw, run.compact(k), chunk_mb)
        record["compact_files"] = [{"name": p.name, "bytes": p.stat().st_size} for p in chunks]
        record["problems"] = [str(p) for p in problems]
    if interrupted:
        raise KeyboardInterrupt
    return record


def machine() -> dict:
    """What the run had to run on: CPUs (all, physical cores, the ones this process may use)
    and the GPUs the machine shows (``/dev/nvidia*``: CUDA; ``/dev/kfd``: ROCm). Advice reads it:
    no mixed precision or pinned memory for a CPU run, workers matched to the cores."""
    cores = None
    try:
        seen = set()
        physical = core = None
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            key, _, value = line.partition(":")
            key = key.strip()
            if key == "physical id":
                physical = value.strip()
            elif key == "core id":
                core = value.strip()
                seen.add((physical, core))
        cores = len(seen) or None
    except OSError:
        pass
    try:
        usable = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        usable = os.cpu_count()
    gpu = "cuda" if any(Path("/dev").glob("nvidia[0-9]*")) else "rocm" if Path("/dev/kfd").exists() else None
    return {"cpus": os.cpu_count(), "physical_cores": cores, "usable_cpus": usable, "gpu": gpu,
            "platform": sys.platform}


def _script(command: Sequence[str], cwd: Path) -> Path | None:
    """The Python script a command runs (``python train.py``), if it names one."""
    return next((Path(cwd, a) for a in command[1:] if a.endswith(".py")), None)


def is_unannotated(command: Sequence[str], cwd: Path) -> bool:
    """The command runs a script that does not import dftracer (the user's original program)."""
    script = _script(command, cwd)
    try:
        return script is not None and script.is_file() and b"dftracer" not in script.read_bytes()
    except OSError:
        return False


def why_no_traces(command: Sequence[str], cwd: Path) -> str:
    """The likeliest reason a traced run wrote no trace file (tracing itself was on: the
    run's environment switched it on)."""
    script = _script(command, cwd)
    if script is not None and script.is_file():
        try:
            annotated = b"dftracer" in script.read_bytes()
        except OSError:
            annotated = True  # cannot tell: give the general reason
        if not annotated:
            return (f"no trace files: {script.name} does not import dftracer, so nothing initialized tracing; "
                    "annotate it first (dftpass run), or trace the annotated copy (--cwd PROJECT-dftpass)")
    return ("no trace files: no process initialized dftracer (is the program's entry annotated? `dftpass "
            "validate` on its folder says), or it exited before initializing (os._exit, a crash at start-up)")


def _sampling_record(sample_every: int | None, env: dict[str, str]) -> dict:
    """What ``run.json`` says of the step sampling (``sample_every`` was put in ``env`` already)."""
    given = env.get(emitter.SAMPLING_ENV_EVERY, "")
    if sample_every is not None:
        return {"every": sample_every, "set_by": "--sample-every"}
    if given.isdigit():
        return {"every": int(given), "set_by": emitter.SAMPLING_ENV_EVERY}
    return {"every": None, "set_by": "the program (initialize(sample_every=k) when its annotation chose one)"}


def trace(workspace: Path, label: str, command: Sequence[str], *, cwd: Path | None = None,
          data_dir: str | None = None, repeats: int = 1, append: bool = False, chunk_mb: int = 64,
          compact: bool = True, env: dict[str, str] | None = None, applies: Sequence[str] = (),
          on_repeat=None, keep: OutputOptions = OutputOptions(), baseline: bool | None = None,
          clock: bool = False, aggregate: bool = False, sample_every: int | None = None) -> RunDir:
    """Run ``command`` ``repeats`` times with tracing into ``<workspace>/<label>``; write run.json.

    ``keep`` says what of the program's outputs each repeat records (:class:`OutputOptions`).
    ``baseline``: the reference run, with tracing off (wall time, outputs, resource use);
    None: a traced run, recorded as the baseline when the script it runs does not import
    dftracer and no trace came (the original program). ``clock``: also time the program from
    inside, without its start-up (:mod:`dftpass.runs.clock`; each repeat's ``clock``).
    ``aggregate``: dftracer's selective aggregation on; off otherwise, whatever the caller's
    environment says (recorded as ``aggregation``). ``sample_every``: the step regions of one step
    in k, over the program's own k (``DFTPASS_SAMPLE_EVERY``; recorded as ``sampling``)."""
    run = run_dir(Path(workspace).resolve(), label)
    cwd = Path(cwd or os.getcwd()).resolve()
    command = list(command)
    if os.sep in command[0] and not os.path.isabs(command[0]) and os.path.exists(command[0]):
        command[0] = os.path.abspath(command[0])  # relative to where dftpass runs, not to --cwd
    base_env = dict(os.environ if env is None else env)
    for key in list(base_env):
        if key.startswith(emitter.ENV_PREFIX) and key not in (emitter.ENV_DATA_DIR, emitter.ENV_INIT,
                                                        emitter.ENV_TIME_METRIC):
            # a stale DFTRACER_LOG_FILE must not send traces elsewhere; aggregation is set by
            # dftpass alone (``aggregate``), so that every install traces the same way
            del base_env[key]
    if data_dir:
        base_env[emitter.ENV_DATA_DIR] = data_dir
    if sample_every is not None:
        base_env[emitter.SAMPLING_ENV_EVERY] = str(sample_every)
    previous = run.record() if append and run.exists() else None
    if previous is None and run.path.exists():
        shutil.rmtree(run.path / "traces", ignore_errors=True)
    record = previous or {
        "label": run.label,
        "created": _now(),
        "host": platform.node(),
        "python": platform.python_version(),
        "dftracer": _dftracer_version(),
        "machine": machine(),
        "revision": _revision(cwd),
        "repeats": [],
    }
    if applies:
        record["applies"] = sorted(set(record.get("applies", [])) | set(applies))
    record["baseline"] = bool(baseline)
    record["aggregation"] = None if baseline else (
        {"enabled": True, "type": emitter.AGGREGATION_SELECTIVE, "set_by": "--aggregate"} if aggregate
        else {"enabled": False, "set_by": "dftpass (the default: every event written)"})
    record["sampling"] = None if baseline else _sampling_record(sample_every, base_env)
    first = len(record["repeats"]) + 1
    try:
        for k in range(first, first + repeats):
            rep = _run_once(run, k, command, cwd, base_env, chunk_mb, compact, keep, bool(baseline), clock,
                            aggregate)
            if baseline is None and not rep["trace_files"] and rep.get("launch_error") is None \
                    and is_unannotated(command, cwd):
                # the user's own program, traced as the README's workflow asks for a reference:
                # a baseline, not a mistake (it ran with tracing on, which it does not read)
                record["baseline"] = True
                rep.pop("problems", None)
            record["repeats"].append(rep)
            if on_repeat is not None:
                on_repeat(rep)
    finally:
        run.path.mkdir(parents=True, exist_ok=True)
        atomic_write(run.run_file, json.dumps(record, indent=2).encode("utf-8"), run.workspace)
    return run
