"""What a run produced, recorded so that two runs can be shown to compute the same thing.

A traced run (``dftpass trace``) keeps, per repeat, under ``<run>/outputs/rep-<k>/``:

* the program's **standard output**, as printed, in ``stdout.txt`` (it is still shown on the
  terminal: the run's output goes to both), and the same text with timing-like numbers
  masked in ``stdout.masked.txt`` (:data:`DEFAULT_MASKS`, overridable with ``outputs.mask``);
* a **fingerprint of every file the program wrote**: the files under its working folder and
  under the folders its arguments name that changed during the repeat. A PyTorch file
  (``torch.save``) is fingerprinted tensor by tensor after ``torch.load``, since its archive
  is not byte-stable (it records names and alignment that vary between identical saves);
  every other file by its bytes;
* the result of the user's own **check command** (``--check``), its exit code and masked
  output.

:mod:`dftpass.analysis.judge` compares these records. Nothing here reads the traces.
"""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import threading
import zipfile
from pathlib import Path
from typing import IO, Iterable, Sequence

from dftpass.core.config import DEFAULT_MASKS  # the default of ``outputs.mask``, with its setting
MASK = "<T>"
STDOUT, MASKED = "stdout.txt", "stdout.masked.txt"
#: what is fingerprinted at most per repeat (files, bytes): a run that writes a data set is
#: not hashed in full every repeat
MAX_FILES, MAX_BYTES = 200, 2 << 30
#: the most entries looked at per repeat: a run started in a home folder is not walked whole
MAX_SCANNED = 100_000
#: folders never looked into for outputs
_SKIP_DIRS = {"__pycache__", ".git", ".dftpass", ".dftpass-cache", "traces", "outputs", "node_modules", ".venv"}
_TORCH_SUFFIXES = (".pt", ".pth", ".ckpt", ".tar", ".bin")


def mask(text: str, patterns: Sequence[str] = DEFAULT_MASKS) -> str:
    for pattern in patterns:
        text = re.sub(pattern, MASK, text)
    return text


def tee(stream: IO[bytes], target: Path, echo: IO[bytes] | None) -> threading.Thread:
    """Copy ``stream`` to ``target`` and to ``echo`` (the terminal) as it arrives."""
    def pump() -> None:
        terminal = echo
        with open(target, "wb") as out:
            for chunk in iter(lambda: stream.read1(65536), b""):
                out.write(chunk)
                if terminal is not None:
                    try:
                        terminal.write(chunk)
                        terminal.flush()
                    except (OSError, ValueError):
                        terminal = None  # the terminal went away; keep recording
        stream.close()
    thread = threading.Thread(target=pump, daemon=True)
    thread.start()
    return thread


def watched_folders(command: Sequence[str], cwd: Path, extra: Iterable[str] = ()) -> list[Path]:
    """Where a run's output files may land: its working folder, every folder its arguments
    name (``--out /tmp/run``, ``--checkpoint=ckpt/model.pt``: the file's folder), and the
    ``--outputs`` the user named."""
    found = [cwd.resolve()]
    for arg in list(command[1:]) + list(extra):
        value = arg.split("=", 1)[1] if arg.startswith("-") and "=" in arg else arg
        if not value or value.startswith("-") or len(value) > 4096:
            continue
        path = Path(value) if os.path.isabs(value) else cwd / value
        try:
            folder = path if path.is_dir() else path.parent if (path.parent.is_dir() and os.sep in value) else None
        except OSError:
            continue
        if folder is not None:
            found.append(folder.resolve())
    # a folder inside another is looked at once
    unique = sorted(set(found), key=lambda p: len(p.parts))
    return [p for i, p in enumerate(unique) if not any(p.is_relative_to(q) for q in unique[:i])]


def changed_files(folders: Sequence[Path], since_ns: int, exclude: Sequence[Path] = ()) -> list[Path]:
    """Files under ``folders`` modified at or after ``since_ns`` (the repeat's start)."""
    excluded = [e.resolve() for e in exclude]
    out: list[Path] = []
    scanned = 0
    for folder in folders:
        for root, dirs, files in os.walk(folder):
            scanned += len(dirs) + len(files)
            if scanned > MAX_SCANNED:
                return out
            here = Path(root)
            if any(here.is_relative_to(e) for e in excluded):
                dirs[:] = []
                continue
            dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith(".")
                             and not d.endswith("-dftpass"))
            for name in sorted(files):
                path = here / name
                try:
                    if path.is_file() and path.stat().st_mtime_ns >= since_ns:
                        out.append(path)
                except OSError:
                    continue
                if len(out) >= MAX_FILES:
                    return out
    return out


def _digest(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def _is_torch_file(path: Path) -> bool:
    if not path.name.endswith(_TORCH_SUFFIXES):
        return False
    try:
        with zipfile.ZipFile(path) as archive:
            return any(n.endswith("/data.pkl") or n == "data.pkl" for n in archive.namelist())
    except (zipfile.BadZipFile, OSError):
        return False


def _leaves(value, prefix: str = ""):
    """(path, fingerprint, summary) for every leaf of a loaded object: a tensor by its dtype,
    shape and bytes (and its sum, so a difference can be sized), anything else by repr."""
    import torch

    if isinstance(value, torch.Tensor):
        t = value.detach().cpu().contiguous()
        raw = t.view(torch.uint8).numpy().tobytes() if t.numel() else b""
        total = float(t.double().sum()) if t.is_floating_point() or t.dtype in (torch.int64, torch.int32) else None
        yield prefix or "<tensor>", _digest(f"{t.dtype}{tuple(t.shape)}".encode() + raw), total
    elif isinstance(value, dict):
        for key in sorted(value, key=str):
            yield from _leaves(value[key], f"{prefix}.{key}" if prefix else str(key))
    elif isinstance(value, (list, tuple)):
        for i, item in enumerate(value):
            yield from _leaves(item, f"{prefix}[{i}]")
    else:
        yield prefix or "<value>", _digest(repr(value).encode("utf-8", "replace")), None


def fingerprint(path: Path) -> dict:
    """A file's fingerprint: ``{"kind": "torch", "tensors": {name: digest}, "sums": {...}}``
    or ``{"kind": "bytes", "digest": ..., "bytes": n}``."""
    if _is_torch_file(path):
        try:
            import torch

            try:
                value = torch.load(path, map_location="cpu", weights_only=True)
            except Exception:  # noqa: BLE001 - an optimizer or an argparse Namespace: the program's own file
                value = torch.load(path, map_location="cpu", weights_only=False)
            leaves = list(_leaves(value))
            return {"kind": "torch", "tensors": {k: d for k, d, _ in leaves},
                    "sums": {k: s for k, _, s in leaves if s is not None}}
        except Exception as exc:  # noqa: BLE001 - torch missing or the file unreadable: its bytes then
            reason = f"{type(exc).__name__}: {exc}"[:200]
            out = _bytes_fingerprint(path)
            out["note"] = f"compared by bytes (torch.load failed: {reason})"
            return out
    return _bytes_fingerprint(path)


def _bytes_fingerprint(path: Path) -> dict:
    h = hashlib.blake2b(digest_size=16)
    size = 0
    with open(path, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            h.update(block)
            size += len(block)
    return {"kind": "bytes", "digest": h.hexdigest(), "bytes": size}


def file_key(path: Path, cwd: Path) -> str:
    """A file's name in the record: relative to the working folder when under it (a copy of a
    project run from another folder writes the same names), else absolute."""
    try:
        return path.resolve().relative_to(cwd.resolve()).as_posix()
    except ValueError:
        return str(path.resolve())


def record_files(command: Sequence[str], cwd: Path, since_ns: int, exclude: Sequence[Path] = (),
                 extra: Iterable[str] = ()) -> dict:
    """``{name: fingerprint}`` of the files the repeat wrote."""
    files: dict[str, dict] = {}
    budget = MAX_BYTES
    for path in changed_files(watched_folders(command, cwd, extra), since_ns, exclude):
        try:
            size = path.stat().st_size
            if size > budget:
                files[file_key(path, cwd)] = {"kind": "skipped", "bytes": size,
                                              "note": "over the bytes fingerprinted per repeat"}
                continue
            budget -= size
            files[file_key(path, cwd)] = fingerprint(path)
        except OSError as exc:
            files[file_key(path, cwd)] = {"kind": "unreadable", "note": exc.strerror or str(exc)}
    return files


def run_check(check: str, cwd: Path, env: dict[str, str], patterns: Sequence[str], timeout_s: float = 3600) -> dict:
    """The user's check command (a shell command line), run after a repeat in its folder."""
    try:
        done = subprocess.run(check, shell=True, cwd=cwd, env=env, capture_output=True, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        return {"command": check, "exit_code": None, "output": "", "digest": None,
                "note": f"timed out after {timeout_s:.0f} s"}
    text = mask(done.stdout.decode("utf-8", "replace"), patterns)
    return {"command": check, "exit_code": done.returncode, "digest": _digest(text.encode()),
            "output": text[-2000:]}


def record_stdout(folder: Path, patterns: Sequence[str]) -> dict:
    """The masked standard output of a repeat, written beside the raw one, and its digest."""
    raw = folder / STDOUT
    try:
        text = raw.read_bytes().decode("utf-8", "replace")
    except OSError:
        return {"digest": None, "lines": 0}
    masked = mask(text, patterns)
    (folder / MASKED).write_text(masked, encoding="utf-8")
    return {"digest": _digest(masked.encode()), "lines": masked.count("\n"), "bytes": len(text)}
