"""Odd trees and odd bytes never crash, hang or change what was not edited."""

from __future__ import annotations

import builtins
import json
import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

TRAIN = ("import torch\n\n\ndef train(model, loader, opt):\n    for x in loader:\n        model(x).sum().backward()\n"
         "        opt.step()\n\n\nif __name__ == '__main__':\n    train(None, torch.utils.data.DataLoader([]), None)\n")


def dftpass(*args, cwd: Path | None = None, timeout: int = 60) -> subprocess.CompletedProcess:
    """The real command in a process of its own (a hang is a failure, not a stuck suite)."""
    return subprocess.run([sys.executable, "-m", "dftpass", *map(str, args)], cwd=cwd, capture_output=True,
                          timeout=timeout)


def test_a_fifo_named_py_is_skipped_never_opened(project, tmp_path):
    root = project({"train.py": TRAIN})
    os.mkfifo(root / "pipe.py")
    for command in (["plan", root], ["validate", root], ["detect", root], ["run", root, "--out", tmp_path / "out"]):
        r = dftpass(*command, timeout=60)
        assert r.returncode in (0, 1), (command, r.stderr)
    assert b"pipe.py: warning: dftpass skipped: not a regular file (a FIFO)" in r.stdout
    assert (tmp_path / "out" / ".dftpass" / "report.json").is_file() and not (tmp_path / "out" / "pipe.py").exists()


def test_a_link_loop_is_a_finding_and_the_run_goes_on(project, tmp_path):
    root = project({"train.py": TRAIN})
    os.symlink("b.py", root / "a.py")
    os.symlink("a.py", root / "b.py")
    os.symlink("loopdir", root / "loopdir")
    r = dftpass("run", root, "--out", tmp_path / "out", "--set", "project.kind=program")
    assert r.returncode == 1, r.stderr
    assert b"a.py: error: dftpass skipped: a link that leads nowhere" in r.stdout
    assert os.path.islink(tmp_path / "out" / "a.py")  # links are copied as links, loops too
    assert os.path.islink(tmp_path / "out" / "loopdir")
    assert b"ai.dataloader.fetch.iter" in (tmp_path / "out" / "train.py").read_bytes()
    assert (tmp_path / "out" / ".dftpass" / "report.json").is_file()


@pytest.fixture
def unreadable(monkeypatch):
    """Make paths unreadable: with chmod where permissions count, and where they do not (root
    reads anything) by making the system calls fail as they would for an ordinary user."""
    made: list[Path] = []

    def make(*paths: Path) -> None:
        made.extend(paths)
        if os.geteuid() != 0:
            for p in paths:
                p.chmod(0)
            return
        blocked = {str(p) for p in paths}
        real_scandir, real_open, real_copy2 = os.scandir, builtins.open, shutil.copy2

        def deny(path):
            if isinstance(path, (str, bytes, os.PathLike)) and os.fsdecode(path) in blocked:
                raise PermissionError(13, "Permission denied", os.fspath(path))

        monkeypatch.setattr(os, "scandir", lambda p=".": deny(p) or real_scandir(p))
        monkeypatch.setattr(builtins, "open", lambda p, *a, **k: deny(p) or real_open(p, *a, **k))
        monkeypatch.setattr(shutil, "copy2", lambda s, d, **k: deny(s) or real_copy2(s, d, **k))

    yield make
    for p in made:
        p.chmod(0o755)


def test_an_unreadable_file_and_folder_are_findings_and_the_rest_is_annotated(project, tmp_path, cli, unreadable):
    root = project({"train.py": TRAIN, "hidden.py": "x = 1\n", "secret/inner.py": "y = 2\n"})
    unreadable(root / "hidden.py", root / "secret")
    out = tmp_path / "out"
    r = cli("run", root, "--out", out, "--set", "project.kind=program")
    assert r.code == 1, r.err
    assert "hidden.py: error: dftpass cannot read the file" in r.out
    assert "secret: error: dftpass skipped: cannot read the folder" in r.out
    assert "ai.dataloader.fetch.iter" in (out / "train.py").read_text()
    assert (out / ".dftpass" / "report.json").is_file()
    again = cli("run", root, "--out", out, "--set", "project.kind=program")
    assert again.code == 1, again.err  # a re-run over its own output is accepted


def test_a_file_name_that_is_not_utf8_goes_through_report_patch_and_backup(project):
    root = project({"train.py": TRAIN})
    odd = os.path.join(os.fsencode(root), b"caf\xe9.py")
    with open(odd, "wb") as fh:
        fh.write(TRAIN.encode())
    r = dftpass("run", root, "--in-place", "--set", "project.kind=program")
    assert r.returncode == 0, r.stderr
    report = json.loads((root / ".dftpass" / "report.json").read_bytes())
    assert "caf\udce9.py" in report["files_changed"]
    with open(odd, "rb") as fh:
        assert b"ai.dataloader.fetch.iter" in fh.read()
    patch = (root / ".dftpass" / "patches" / "annotation.patch").read_bytes()
    assert b"+++ b/caf\xe9.py" in patch
    [backup] = (root / ".dftpass" / "backup").iterdir()
    assert os.path.exists(os.path.join(os.fsencode(backup), b"caf\xe9.py"))


def test_a_latin1_file_without_a_coding_cookie_is_left_untouched_and_the_rest_is_annotated(project, tmp_path):
    latin = b"# caf\xe9 au lait\n" + TRAIN.encode()
    root = project({"train.py": TRAIN, "latin.py": latin})
    r = dftpass("run", root, "--out", tmp_path / "out", "--set", "project.kind=program")
    assert r.returncode == 1, r.stderr
    # a sentence with the byte, the line and the way out
    assert (b"latin.py:1:1: error: dftpass left untouched: the file is not valid UTF-8 (byte 0xE9 on line 1); "
            b"save it as UTF-8, or declare its encoding on its first line") in r.stdout
    assert (tmp_path / "out" / "latin.py").read_bytes() == latin
    assert b"ai.dataloader.fetch.iter" in (tmp_path / "out" / "train.py").read_bytes()
    # --exit-zero: the command ran; the error is reported, the exit code is 0 (for a CI step)
    assert dftpass("plan", root, "--no-diff", "--set", "project.kind=program", "--exit-zero").returncode == 0
    # detect names the file it could not read (it was silent about it)
    seen = dftpass("detect", root)
    assert seen.returncode == 0 and b"not read:     latin.py:1: left untouched: the file is not valid UTF-8" in seen.stdout


BODY = ("import torch\n\n\n@torch.no_grad()\ndef evaluate(model, val_loader):\n    for x in val_loader:\n"
        "        model(x)\n\n\ndef train(model, loader, opt):\n    for x in loader:\n        model(x).sum().backward()\n"
        "        opt.step()\n")


def _annotate_bytes(project, tmp_path, data: bytes) -> tuple[bytes, bytes]:
    root = project({"a.py": data})
    r = dftpass("run", root, "--out", tmp_path / "out", "--set", "project.kind=program")
    assert r.returncode == 0, r.stderr
    return data, (tmp_path / "out" / "a.py").read_bytes()


def test_a_form_feed_before_a_decorated_function_is_kept(project, tmp_path):
    _, new = _annotate_bytes(project, tmp_path, BODY.replace("\n@torch", "\n\x0c@torch").encode())
    assert b"\n\x0c@torch.no_grad()\n@ai.pipeline.evaluate\n" in new


def test_a_cr_only_file_keeps_its_last_line_ending(project, tmp_path):
    original, new = _annotate_bytes(project, tmp_path, BODY.replace("\n", "\r").encode())
    assert new.endswith(b"\r") and b"\n" not in new
    compile(new, "a.py", "exec")


def test_mixed_line_endings_stay_where_they_were(project, tmp_path):
    lines = BODY.split("\n")
    original = ("\r\n".join(lines[:3]) + "\r\n" + "\n".join(lines[3:])).encode()
    _, new = _annotate_bytes(project, tmp_path, original)
    head, _, rest = new.partition(b"import torch\r\n")
    assert b"\r\n" not in rest.split(b"@torch.no_grad()")[1]  # the LF part stays LF, inserted lines too
    assert b"ai.pipeline.evaluate\n" in new and b"ai.compute.step.stop()\n" in new


def test_written_files_follow_the_umask(project, tmp_path):
    root = project({"train.py": TRAIN})
    old = os.umask(0o022)
    try:
        r = dftpass("run", root, "--out", tmp_path / "out", "--set", "project.kind=program")
    finally:
        os.umask(old)
    assert r.returncode == 0, r.stderr
    for rel in (".dftpass/report.json", ".dftpass/patches/annotation.patch"):
        assert stat.S_IMODE((tmp_path / "out" / rel).stat().st_mode) == 0o644, rel
