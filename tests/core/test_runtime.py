"""dftpass.runtime: the framework callbacks an annotated program imports, defined once."""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import pytest

from dftpass.core.emitter import NODES


def test_the_runtime_imports_nothing_it_does_not_need():
    """An annotated Keras program imports ``dftpass.runtime``: that must not import the rest
    of dftpass (libcst, the pass manager), nor Lightning, nor dftracer before the program's
    own import prelude has run."""
    code = ("import sys, dftpass.runtime\n"
            "bad = [m for m in sys.modules if m.startswith(('dftpass.core', 'dftpass.plugins', 'libcst', "
            "'lightning', 'keras', 'dftracer'))]\nprint(bad)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_runtime_spells_the_nodes_the_emitter_spells():
    """One place per fact: the runtime cannot import the emitter (it would pull in libcst), so
    its node paths are held to :data:`dftpass.core.emitter.NODES` here."""
    pytest.importorskip("dftracer.python", reason="the dftracer package is not installed")
    from dftracer.python import ai

    from dftpass.runtime import regions

    for path, node in regions.PATHS.items():
        assert path in NODES, path
        found = ai
        for part in path.split("."):
            found = getattr(found, part)
        assert found is node, path


def test_regions_open_and_close_once_whatever_the_order():
    pytest.importorskip("dftracer.python", reason="the dftracer package is not installed")
    from dftpass.runtime.regions import Regions

    class Node:
        def __init__(self):
            self.calls = []

        def start(self):
            self.calls.append("start")

        def stop(self):
            self.calls.append("stop")

    node, regions = Node(), Regions()
    regions.close(node)  # a hook that ends what was never begun (validation before an epoch)
    regions.open(node)
    regions.open(node)
    assert regions.is_open(node)
    regions.set(node, False)
    regions.close(node)
    assert node.calls == ["start", "stop"] and not regions.is_open(node)


def test_an_unknown_name_is_an_attribute_error():
    import dftpass.runtime

    with pytest.raises(AttributeError, match="NoSuchCallback"):
        dftpass.runtime.NoSuchCallback  # noqa: B018


@pytest.mark.lightning
def test_the_lightning_callback_is_a_lightning_callback_and_pickles():
    pytest.importorskip("lightning", reason="lightning is in the frameworks extra")
    import lightning.pytorch as pl

    import dftpass.runtime

    callback = dftpass.runtime.LightningCallback()
    assert isinstance(callback, pl.Callback)
    assert dftpass.runtime.LightningCallback is type(callback)  # made once
    # a spawned DDP worker or a deep copy of the trainer pickles its callbacks
    again = pickle.loads(pickle.dumps(callback))
    assert type(again) is type(callback)


@pytest.mark.lightning
def test_the_pytorch_lightning_callback_derives_from_that_package():
    pl = pytest.importorskip("pytorch_lightning", reason="pytorch_lightning (the older package name) is not installed")
    import dftpass.runtime

    assert isinstance(dftpass.runtime.PytorchLightningCallback(), pl.Callback)


@pytest.mark.tensorflow
def test_the_keras_callback_is_a_keras_callback():
    keras = pytest.importorskip("keras", reason="keras is in the frameworks extra")
    import dftpass.runtime

    assert isinstance(dftpass.runtime.KerasCallback(), keras.callbacks.Callback)


def test_the_lightning_hooks_take_the_arguments_pytorch_lightning_1_5_passes():
    """pytorch-lightning 1.5 (the Lightning project template needs it) passes
    ``optimizer_idx`` and ``dataloader_idx`` to hooks that 2.x calls without them, and keeps
    the checkpoint I/O on ``trainer.training_type_plugin`` (there is no ``strategy``): the
    annotated program crashed in ``setup`` before this."""
    pytest.importorskip("dftracer.python", reason="the dftracer package is not installed")
    from types import SimpleNamespace

    from dftpass.runtime.lightning import Hooks

    written = []
    io = SimpleNamespace(save_checkpoint=lambda checkpoint, path: written.append(path))
    trainer = SimpleNamespace(training_type_plugin=SimpleNamespace(checkpoint_io=io), current_epoch=0,
                              global_step=0, sanity_checking=False, state=SimpleNamespace(fn="fit"))
    hooks = Hooks()
    hooks.setup(trainer, None)  # 1.5: stage is optional
    hooks.on_train_epoch_start(trainer, None)
    hooks.on_train_batch_start(trainer, None, "batch", 0, 0)  # + dataloader_idx
    hooks.on_before_optimizer_step(trainer, None, "optimizer", 0)  # + optimizer_idx
    hooks.on_train_batch_end(trainer, None, {}, "batch", 0, 0)
    hooks.on_train_epoch_end(trainer, None)
    io.save_checkpoint({"w": []}, "last.ckpt")  # the wrapped write still writes
    assert written == ["last.ckpt"] and getattr(io.save_checkpoint, "_dft", False)
    Hooks().setup(SimpleNamespace(), None, "fit")  # no checkpoint I/O to time: nothing to do


def test_nbytes_measures_what_io_moved_and_is_never_negative(tmp_path):
    """``dftpass.runtime.nbytes``: the size an I/O region records when its type is known only
    when the program runs (dftpass writes it for np.load, cv2.imread, a write's buffer, a
    file object): a count of bytes for every object, never -1, never an exception."""
    np = pytest.importorskip("numpy")
    torch = pytest.importorskip("torch")
    from PIL import Image

    from dftpass.runtime import nbytes

    array = np.zeros((4, 8), dtype=np.float32)
    np.savez(tmp_path / "a.npz", x=array, y=np.ones(3, dtype=np.int64))
    with np.load(tmp_path / "a.npz") as archive:  # an NpzFile: its members' bytes, nothing read
        assert nbytes(archive) == array.nbytes + 24 + 2 * 128  # the .npy headers count: they are in the file
    assert nbytes(array) == 128 and nbytes(torch.ones(3, 2)) == 24
    assert nbytes(b"abcd") == 4 and nbytes("ab") == 2 and nbytes(None) == 0 and nbytes(object()) == 0
    assert nbytes(Image.new("RGB", (5, 4))) == 60
    assert nbytes({"model": {"w": torch.ones(2)}, "epoch": 3, "log": [b"xy"]}) == 8 + 2
    model = torch.nn.Linear(3, 2)
    assert nbytes(model) == (6 + 2) * 4
    with open(tmp_path / "f.txt", "w") as f:
        f.write("hello")
        assert nbytes(f) == 5  # a file object: its position
    assert nbytes(f) == 0  # closed: tell() would raise


def test_the_sampling_gate_spells_what_the_emitter_spells():
    """The sampled subtrees, the clock, the environment and the metadata prefix the runtime
    uses are the ones the trace analysis and ``dftpass trace`` read (core/emitter.py)."""
    from dftpass.core import emitter as E
    from dftpass.runtime import sampling

    assert sampling.GATED == E.SAMPLED_SUBTREES and sampling.CLOCK == E.SAMPLING_CLOCK
    assert (sampling.ENV_EVERY, sampling.ENV_WARMUP) == (E.SAMPLING_ENV_EVERY, E.SAMPLING_ENV_WARMUP)
    assert sampling.META_PREFIX == E.SAMPLING_META_PREFIX
    for path in (*sampling.GATED, sampling.CLOCK):
        assert any(n == path or n.startswith(path + ".") for n in NODES), path


def test_the_gate_traces_warm_up_first_last_and_every_kth_step():
    from dftpass.runtime.sampling import Gate

    gate = Gate(every=4, warmup=2)
    traced = [gate.tick(first=i == 0, last=i == 19) for i in range(20)]
    assert [i for i, on in enumerate(traced) if on] == [0, 1, 2, 6, 10, 14, 18, 19]
    assert (gate.steps, gate.traced) == (20, 8)
    gate.untick(gate.tick())  # a tick for a batch that never came is taken back
    assert (gate.steps, gate.traced) == (20, 8)


def test_an_update_on_an_untraced_step_is_dropped_and_a_traced_steps_applies():
    """The step's own update runs after its batch: on a traced step it reaches the events; on
    an untraced one it costs an attribute test (deferring it cost 4.5% of a 1 ms step in situ)."""
    pytest.importorskip("dftracer.python", reason="the dftracer package is not installed")
    code = (
        "import os\nos.environ['DFTRACER_ENABLE'] = '1'\n"
        "from dftracer.python import ai, dftracer\n"
        "from dftpass.runtime import sampling\n"
        "log = dftracer.initialize_log(logfile=os.environ['LOG'], data_dir=None, process_id=-1)\n"
        "gate = sampling.install(4, warmup=0, log=log)\n"
        "seen = []\n"
        "for step, _ in enumerate(ai.dataloader.fetch.iter(range(8))):\n"
        "    ai.compute.update(step=step)\n"
        "    seen.append((gate.on, ai.compute.forward.profiler._arguments_int.get('step')))\n"
        "print(seen)\nlog.finalize()\n")
    import os
    import tempfile

    with tempfile.TemporaryDirectory() as folder:
        env = {**os.environ, "LOG": os.path.join(folder, "trace")}
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, env=env)
    seen = eval(out.stdout.strip().splitlines()[-1])
    on = [s for s, (traced, _) in enumerate(seen) if traced]
    assert on == [0, 4, 7]  # every 4th, the pass's last
    # the step on the events: the last traced step's (an untraced step's update went nowhere)
    assert [value[1] for _, value in seen] == [max(s for s in on if s <= step) for step in range(8)], seen


def test_a_sampled_loops_first_wait_holds_the_loaders_start(tmp_path):
    """A DataLoader starts its workers when it is iterated: the first step's wait holds that,
    as dftracer's own iter's does (pytorch_template's worker start-up read 0.04 s for 0.11 s
    when the iterator was made before the wait)."""
    pytest.importorskip("dftracer.python", reason="the dftracer package is not installed")
    from tests.e2e.harness import events_of

    code = (
        "import os, time\n"
        "from dftracer.python import ai, dftracer\n"
        "from dftpass.runtime import sampling\n"
        "log = dftracer.initialize_log(logfile=os.environ['DFTRACER_LOG_FILE'], data_dir=None, process_id=-1)\n"
        "sampling.install(4, log=log)\n"
        "class Slow:\n"
        "    def __len__(self):\n        return 8\n"
        "    def __iter__(self):\n        time.sleep(0.05)\n        return iter(range(8))\n"
        "for _ in ai.dataloader.fetch.iter(Slow()):\n    pass\n"
        "log.finalize()\n")
    env = {**os.environ, "DFTRACER_ENABLE": "1", "DFTRACER_INC_METADATA": "1", "DFTRACER_LOG_FILE": str(tmp_path / "trace")}
    subprocess.run([sys.executable, "-c", code], check=True, env=env, capture_output=True, text=True)
    waits = [e for f in tmp_path.glob("trace-*.pfw*") for e in events_of(f) if e.get("name") == "fetch.iter"]
    first = next(e for e in waits if e["args"]["count"] == 1)
    assert first["dur"] >= 50_000, first  # µs
    assert len(waits) < 8  # and the loop was sampled
