"""Writing results: the annotated copy, in-place edits with backups, patches and reports.

Rules that keep users' files safe, enforced here and nowhere else:

* every write goes to a temporary file in the target's folder, is flushed to disk and then
  renamed over the target (``os.replace``): a file is either the old one or the new one;
* every path written is checked to lie inside the one root the command may write to (the
  output folder, or the project for ``--in-place``), after resolving links;
* ``--in-place`` keeps a copy of every file it changes under ``.dftpass/backup/<stamp>/``
  before replacing it.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import structlog

from dftpass.core import provenance
from dftpass.core.errors import UserError
from dftpass.core.findings import Finding, Severity
from dftpass.core.pipeline import AnnotateResult
from dftpass.core.project import TOOL
from dftpass.core.provenance import Records

log = structlog.get_logger("dftpass")

STATE_DIR = ".dftpass"  # dftpass's own folder inside a tree it wrote
_COPY_IGNORE = {".git", ".hg", ".svn", "__pycache__", STATE_DIR, ".mypy_cache", ".pytest_cache", ".ruff_cache"}


class UnsafeWrite(UserError):
    """A write would land outside the allowed root."""


def _check_inside(path: Path, root: Path) -> None:
    resolved = path.resolve()
    root = root.resolve()
    if resolved != root and root not in resolved.parents:
        raise UnsafeWrite(f"refusing to write {path}: outside {root}")


def umask_mode() -> int:
    """What a new file gets from the umask, as any tool's would (mkstemp makes 0600)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


def atomic_write(path: Path, data: bytes, root: Path, mode: int | None = None) -> None:
    """Write ``data`` to ``path`` atomically; ``path`` must resolve inside ``root``. The file
    keeps ``mode`` (the original's, for a rewritten file) or follows the umask."""
    _check_inside(path.parent, root)
    if path.is_symlink():
        raise UnsafeWrite(f"refusing to write through the link {path}")
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".dftpass-tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            os.fsync(fh.fileno())
        os.chmod(tmp, mode if mode is not None else umask_mode())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except FileNotFoundError:
            pass
        raise


def _is_virtualenv(path: Path) -> bool:
    return (path / "pyvenv.cfg").is_file()


def is_dftpass_output(path: Path) -> bool:
    return (path / STATE_DIR / "report.json").is_file()


def copy_project(src: Path, dst: Path) -> list[Finding]:
    """Copy the project to ``dst``: links stay links (never followed), VCS folders, caches and
    virtualenvs stay out, and only regular files are copied (a FIFO would block). What cannot
    be copied (an unreadable file or folder, a socket) is returned as findings; the rest is
    copied all the same."""
    src, dst = src.resolve(), dst.resolve()
    problems: list[Finding] = []

    def skipped(path: str, why: str) -> None:
        rel = os.path.relpath(path, src).replace(os.sep, "/")
        problems.append(Finding(TOOL, f"not copied to the output: {why}", rel, severity=Severity.WARNING))

    def walk(folder: str) -> None:
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            skipped(folder, f"cannot read the folder ({exc.strerror or exc})")
            return
        target_dir = os.path.join(dst, os.path.relpath(folder, src))
        os.makedirs(target_dir, exist_ok=True)
        for entry in entries:
            if entry.name in _COPY_IGNORE or entry.name.endswith(".pyc"):
                continue
            target = os.path.join(target_dir, entry.name)
            try:
                if entry.is_symlink():
                    os.symlink(os.readlink(entry.path), target)
                elif entry.is_dir(follow_symlinks=False):
                    if os.path.realpath(entry.path) != str(dst) and not _is_virtualenv(Path(entry.path)):
                        walk(entry.path)
                elif entry.is_file(follow_symlinks=False):
                    shutil.copy2(entry.path, target, follow_symlinks=False)
                else:
                    skipped(entry.path, "not a regular file (a FIFO, socket or device)")
            except OSError as exc:
                skipped(entry.path, exc.strerror or str(exc))

    walk(str(src))
    return problems


def prepare_output(project: Path, out: Path) -> None:
    """Make ``out`` an empty place for the copy, refusing to clobber anything that is not ours."""
    project, out = project.resolve(), out.resolve()
    if out == project or out in project.parents:
        raise UnsafeWrite(f"--out {out} would contain or be the project itself; choose another folder")
    if out.exists():
        if not out.is_dir() or (any(out.iterdir()) and not is_dftpass_output(out)):
            raise UnsafeWrite(f"{out} exists and is not a dftpass output; remove it or choose another --out")
        shutil.rmtree(out)


def write_copy(result: AnnotateResult, out: Path) -> None:
    prepare_output(result.root, out)
    result.findings.extend(copy_project(result.root, out))
    for f in result.changed():
        target = out / f.relpath
        atomic_write(target, f.new, out, mode=os.stat(result.root / f.relpath).st_mode & 0o7777)
    _write_state(result, out)
    result.out = out.resolve()
    log.info("annotated copy written", out=str(result.out), files_changed=len(result.changed()))


def write_in_place(result: AnnotateResult) -> Path | None:
    """Replace the changed files in the project, after backing each one up. Returns the backup folder."""
    root = result.root
    changed = result.changed()
    backup = None
    if changed:
        backup = _new_backup_dir(root)
        for f in changed:
            atomic_write(backup / f.relpath, f.original, root)
        for f in changed:
            target = root / f.relpath
            atomic_write(target, f.new, root, mode=os.stat(target).st_mode & 0o7777)
    _write_state(result, root)
    result.out = root
    log.info("project annotated in place", root=str(root), files_changed=len(changed), backup=str(backup))
    return backup


def _new_backup_dir(root: Path) -> Path:
    """``.dftpass/backup/<time>``, never one an earlier command of the same second used."""
    base = root / STATE_DIR / "backup" / time.strftime("%Y%m%d-%H%M%S")
    path, n = base, 1
    while path.exists():
        n += 1
        path = base.with_name(f"{base.name}-{n}")
    return path


def _write_state(result: AnnotateResult, root: Path) -> None:
    state = root / STATE_DIR
    patch = state / "patches" / "annotation.patch"
    if result.changed() or not patch.is_file():
        # a run that changes nothing (annotating the annotated project again) keeps the patch
        # of the run that did: it is what a user reads to see what dftpass wrote
        atomic_write(patch, result.diff_bytes(), root)
    atomic_write(state / "report.json", json.dumps(report_dict(result), indent=2).encode("utf-8"), root)
    # what earlier runs wrote into the project (an annotated tree annotated again) stays on record
    records = Records.read(result.root / STATE_DIR) or Records()
    for f in result.changed():
        if f.provenance is not None:
            records.add(f.relpath, f.provenance)
    if records.files:
        atomic_write(state / provenance.FILE, records.to_bytes(), root)


def report_dict(result: AnnotateResult) -> dict:
    return {
        "mode": result.mode,
        "project": str(result.root),
        "files_considered": result.n_files,
        "files_changed": sorted(f.relpath for f in result.changed()),
        "pipeline": result.pipeline,
        "edits": [
            {"rule": e.rule, "path": rel, "line": e.line, "edit": type(e).__name__, "why": e.why}
            for rel, e in result.edits()
        ],
        "findings": [f.to_dict() for f in result.findings],
        "timings": [{"pass": t.pass_id, "seconds": round(t.seconds, 6), "status": t.status} for t in result.timings],
    }


def strip_outputs(result: AnnotateResult, out: Path | None, in_place: bool) -> str:
    """Write what ``strip`` produced: a copy (default ``PROJECT-stripped``) or in place with
    backups. The record of what dftpass wrote goes with the annotations: a stripped tree has
    none left to strip."""
    if in_place:
        root = result.root
        changed = result.changed()
        if changed:
            backup = _new_backup_dir(root)
            for f in changed:
                atomic_write(backup / f.relpath, f.original, root)
            for f in changed:
                target = root / f.relpath
                atomic_write(target, f.new, root, mode=os.stat(target).st_mode & 0o7777)
        _write_strip_state(result, root)
        return "in place"
    out = (out or result.root.with_name(result.root.name + "-stripped")).resolve()
    prepare_output(result.root, out)
    result.findings.extend(copy_project(result.root, out))
    for f in result.changed():
        atomic_write(out / f.relpath, f.new, out, mode=os.stat(result.root / f.relpath).st_mode & 0o7777)
    _write_strip_state(result, out)
    return f"to {out}"


def _write_strip_state(result: AnnotateResult, root: Path) -> None:
    state = root / STATE_DIR
    atomic_write(state / "report.json", json.dumps(report_dict(result), indent=2).encode("utf-8"), root)
    stale = state / provenance.FILE
    if stale.is_file():
        stale.unlink()
