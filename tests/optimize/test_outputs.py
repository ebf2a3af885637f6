"""What a run produced: masked standard output and fingerprints of the files it wrote, with
real torch.save files (whose archives are not byte-stable)."""

from __future__ import annotations

import os
import time

import torch

from dftpass.runs import outputs


def test_timings_dates_and_addresses_are_masked_results_are_not():
    text = ("epoch 1 train_loss 0.3141592650 time 1.23 s\n"
            "2026-12-02 13:05:51,123 | 512.4 samples/s | ms/batch 34.50 | took 12ms\n"
            "<Model object at 0x7f3a2b1c9d00> acc=0.8125\n")
    masked = outputs.mask(text)
    assert "0.3141592650" in masked and "acc=0.8125" in masked
    for varying in ("1.23", "13:05:51", "512.4", "34.50", "12ms", "0x7f3a2b1c9d00"):
        assert varying not in masked, varying


def test_torch_files_compare_tensor_by_tensor(tmp_path):
    state = {"w": torch.arange(6, dtype=torch.float32).reshape(2, 3), "step": 3}
    torch.save(state, tmp_path / "a.pt")
    torch.save(state, tmp_path / "b.pt")
    # the archive names its records after the file: the bytes differ, the tensors do not
    assert (tmp_path / "a.pt").read_bytes() != (tmp_path / "b.pt").read_bytes()
    fa, fb = outputs.fingerprint(tmp_path / "a.pt"), outputs.fingerprint(tmp_path / "b.pt")
    assert fa["kind"] == "torch" and fa["tensors"] == fb["tensors"]
    torch.save({**state, "w": state["w"] + 1e-6}, tmp_path / "c.pt")
    assert outputs.fingerprint(tmp_path / "c.pt")["tensors"]["w"] != fa["tensors"]["w"]


def test_files_changed_during_the_run_in_the_folders_its_arguments_name(tmp_path):
    cwd, out, elsewhere = tmp_path / "proj", tmp_path / "out", tmp_path / "other"
    for d in (cwd, out, elsewhere):
        d.mkdir()
    (cwd / "old.txt").write_text("before")
    since = time.time_ns()
    os.utime(cwd / "old.txt", ns=(since - 10**9, since - 10**9))
    (out / "results.json").write_text("{}")
    (elsewhere / "x.txt").write_text("not named")
    (cwd / "__pycache__").mkdir()
    (cwd / "__pycache__" / "m.pyc").write_bytes(b"x")
    files = outputs.record_files(["python", "train.py", "--out", str(out)], cwd, since)
    assert list(files) == [str(out / "results.json")]
    assert files[str(out / "results.json")]["kind"] == "bytes"


def test_a_progress_bar_is_masked_whole_with_its_redraws():
    """Lightning and tqdm on stdout: how many redraws a line gets depends on timing."""
    one = "Epoch 0:   0%|          | 0/12 [00:00<?, ?it/s]\rEpoch 0:  50%|#####     | 6/12 [00:01<00:01, 5.1it/s]\n"
    two = "Epoch 0:   0%|          | 0/12 [00:00<?, ?it/s]\rEpoch 0:  58%|#####8    | 7/12 [00:01<00:01, 5.3it/s]\n"
    assert outputs.mask(one + "test_acc 0.8125\n") == outputs.mask(two + "test_acc 0.8125\n")
    assert "test_acc 0.8125" in outputs.mask(one + "test_acc 0.8125\n")
    assert outputs.mask("accuracy 95% | loss 0.1\n") == "accuracy 95% | loss 0.1\n"  # a table is not a bar
