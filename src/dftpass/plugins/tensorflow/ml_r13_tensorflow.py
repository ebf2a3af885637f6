"""ML-R13: TensorFlow and Keras: the Python calls of compiled steps, and the loops of ``fit``."""

from __future__ import annotations

from dftpass.api import (
    AddArgument, calls_at, CallSite, Case, FileSummary, Finding, FunctionSummary, has_region, InsertAfter,
    InsertBefore, is_backward, is_node, is_optimizer_step, MODEL_NAME, normalize_compiler as normalize, Pass,
    PassKind, PYTHON_BRIDGES, recognize, Severity, sibling, step_calls, WrapBody, WrapStmt,
)

#: Keras model methods that run a phase, and its node (``fit`` also gets the callback)
PHASE_METHODS = {"fit": "pipeline.train", "evaluate": "pipeline.evaluate"}
#: compilers of TensorFlow (the ``compiled`` analysis' names)
TF_COMPILERS = frozenset({"tensorflow.function"})
KERAS_MODULES = ("keras", "tensorflow.keras", "tf_keras")
#: ``fit``'s positional parameters up to ``callbacks`` (x, y, batch_size, epochs, verbose, callbacks)
CALLBACKS_POSITION = 5
#: where the callbacks are defined, once (the annotated program imports it)
RUNTIME = "dftpass.runtime"


class TensorFlowLoops(Pass):
    """Time TensorFlow's compiled steps where Python calls them, and what Keras' ``fit`` runs.

    What it does:
        * A statement that calls a ``tf.function`` once per batch (``loss =
          train_step(x, y)``, ``metric.update_state(test_step(x, y))``) gets ``with
          ai.compute:`` around it; the ``tf.function`` itself is never decorated (the
          ``compiled`` analysis drops any region on it, or on a ``tf.data`` map function).
        * Outside compiled code (eager mode), ``grads = tape.gradient(loss, variables)``
          gets ``with ai.compute.backward:`` and ``optimizer.apply_gradients(...)``
          ``ai.compute.step.start()``/``.stop()``.
        * ``model.fit(...)`` of a Keras model gets ``with ai.pipeline.train:`` and a callback
          in ``callbacks=`` (added to the list, or as the keyword):
          ``_dft_runtime.KerasCallback()`` (``TfKerasCallback`` for ``tf.keras``), defined once
          in :mod:`dftpass.runtime` (``import dftpass.runtime as _dft_runtime``), opens
          ``ai.pipeline.epoch`` per epoch, ``ai.compute``
          per training batch (``on_train_batch_begin`` to ``on_train_batch_end``), and
          ``ai.pipeline.evaluate`` around the validation of each epoch, with epoch and
          step on the events. ``model.evaluate(...)`` gets ``with ai.pipeline.evaluate:``.
          The batch loop and custom loops' ``for step, (x, y) in enumerate(dataset)`` are
          ML-R6's (``tf.data`` datasets are loaders); checkpoints (``tf.train.Checkpoint``,
          ``CheckpointManager.save``, ``model.save``) ML-R18's.

    Why:
        A ``tf.function`` runs its Python body once, to trace it: a region inside would
        time the tracing and then nothing. Keras runs the epoch and batch loops of ``fit``
        itself; a callback is the way in that Keras offers, on every backend.

    Example:
        ``history = model.fit(ds, epochs=2, callbacks=[ckpt])`` becomes ``with
        ai.pipeline.train:`` / ``history = model.fit(ds, epochs=2, callbacks=[ckpt,
        _dft_runtime.KerasCallback()])``.

    Fix safety:
        Safe: the callback only starts and stops regions and has no state Keras saves;
        ``callbacks=cbs`` (a name) becomes ``callbacks=[*(cbs or []), _dft_runtime.KerasCallback()]``,
        a new list, so the program's own list is not changed. A ``fit`` called with
        ``**kwargs`` or with its callbacks given by position is not changed (a note says
        so). On a GPU, TensorFlow returns from a step before the device finishes it; the
        region then ends at the first read of the result outside it (``float(loss)``).
        ``strip`` removes the class, the callback and the regions.

    Options:
        None.
    """

    id = "ML-R13"
    title = "TensorFlow and Keras"
    kind = PassKind.TRANSFORM
    requires = ("callgraph", "loops", "compiled")
    frameworks = ("tensorflow",)
    tags = ("compute", "pipeline", "tensorflow")

    VALID = [
        # already timed at the call site
        "import tensorflow as tf\nfrom dftracer.python import ai\n\n\n@tf.function\ndef step(x):\n    return x + 1\n\n\n"
        "def train(dataset):\n    for x in dataset:\n        with ai.compute:\n            y = step(x)\n",
        # scikit-learn's fit is no Keras phase
        "from sklearn.linear_model import LinearRegression\nimport tensorflow as tf\n\n\n"
        "def fit(x, y):\n    model = LinearRegression()\n    model.fit(x, y)\n",
    ]
    INVALID = [
        Case(
            # a custom loop: the tf.function steps are timed where Python calls them, even
            # inside another call; the dataset is a loader (ML-R6's)
            "import tensorflow as tf\n\n\ndef main(model, optimizer, xs, ys, metric):\n"
            "    train_ds = tf.data.Dataset.from_tensor_slices((xs, ys)).batch(8)\n"
            "    val_ds = tf.data.Dataset.from_tensor_slices((xs, ys)).batch(8)\n"
            "    @tf.function\n    def train_step(x, y):\n        with tf.GradientTape() as tape:\n"
            "            loss = tf.reduce_mean((model(x) - y) ** 2)\n"
            "        grads = tape.gradient(loss, model.trainable_variables)\n"
            "        optimizer.apply_gradients(zip(grads, model.trainable_variables))\n        return loss\n\n"
            "    @tf.function\n    def test_step(x, y):\n        return tf.reduce_mean((model(x) - y) ** 2)\n\n"
            "    for step, (x, y) in enumerate(train_ds):\n        loss = train_step(x, y)\n"
            "    for x, y in val_ds:\n        metric.update_state(test_step(x, y))\n",
            "from dftracer.python import ai\nimport tensorflow as tf\n\n\n"
            "def main(model, optimizer, xs, ys, metric):\n"
            "    train_ds = tf.data.Dataset.from_tensor_slices((xs, ys)).batch(8)\n"
            "    val_ds = tf.data.Dataset.from_tensor_slices((xs, ys)).batch(8)\n"
            "    @tf.function\n    def train_step(x, y):\n        with tf.GradientTape() as tape:\n"
            "            loss = tf.reduce_mean((model(x) - y) ** 2)\n"
            "        grads = tape.gradient(loss, model.trainable_variables)\n"
            "        optimizer.apply_gradients(zip(grads, model.trainable_variables))\n        return loss\n\n"
            "    @tf.function\n    def test_step(x, y):\n        return tf.reduce_mean((model(x) - y) ** 2)\n\n"
            "    for step, (x, y) in enumerate(train_ds):\n        with ai.compute:\n"
            "            loss = train_step(x, y)\n    for x, y in val_ds:\n        with ai.compute:\n"
            "            metric.update_state(test_step(x, y))\n",
        ),
        Case(
            # eager mode: the backward pass and the optimizer step are Python calls
            "import tensorflow as tf\n\n\ndef train(model, optimizer, loader):\n    for x, y in loader:\n"
            "        with tf.GradientTape() as tape:\n            loss = tf.reduce_mean((model(x) - y) ** 2)\n"
            "        grads = tape.gradient(loss, model.trainable_variables)\n"
            "        optimizer.apply_gradients(zip(grads, model.trainable_variables))\n",
            "from dftracer.python import ai\nimport tensorflow as tf\n\n\ndef train(model, optimizer, loader):\n"
            "    for x, y in loader:\n"
            "        with tf.GradientTape() as tape:\n            loss = tf.reduce_mean((model(x) - y) ** 2)\n"
            "        with ai.compute.backward:\n            grads = tape.gradient(loss, model.trainable_variables)\n"
            "        ai.compute.step.start()\n"
            "        optimizer.apply_gradients(zip(grads, model.trainable_variables))\n"
            "        ai.compute.step.stop()\n",
        ),
        Case(
            # a sample read in Python through tf.numpy_function, from tf.data's threads: a
            # region of its own per call; the map function itself is traced (nothing inside)
            "import numpy as np\nimport tensorflow as tf\n\n\ndef read_sample(path):\n"
            "    return np.load(path.decode())\n\n\ndef load(path):\n"
            "    return tf.numpy_function(read_sample, [path], tf.float32)\n\n\n"
            "def pipeline(paths):\n    return tf.data.Dataset.from_tensor_slices(paths).map(load).batch(8)\n",
            "from dftracer.python import dft_fn\nimport numpy as np\nimport tensorflow as tf\n\n\n"
            "def read_sample(path):\n    with dft_fn(\"data\", name=\"item\"):\n        return np.load(path.decode())\n\n\n"
            "def load(path):\n    return tf.numpy_function(read_sample, [path], tf.float32)\n\n\n"
            "def pipeline(paths):\n    return tf.data.Dataset.from_tensor_slices(paths).map(load).batch(8)\n",
        ),
        Case(
            # Keras fit: the callback joins the program's list; evaluate is a phase
            "import keras\n\n\ndef main(train_ds, val_ds, test_ds):\n"
            "    model = keras.Sequential([keras.layers.Dense(1)])\n    model.compile(loss='mse')\n"
            "    history = model.fit(train_ds, validation_data=val_ds, epochs=2,\n"
            "                        callbacks=[keras.callbacks.ModelCheckpoint('m.keras')])\n"
            "    model.evaluate(test_ds)\n    return history\n",
            "import dftpass.runtime as _dft_runtime\nfrom dftracer.python import ai\nimport keras\n\n\n"
            "def main(train_ds, val_ds, test_ds):\n"
            "    model = keras.Sequential([keras.layers.Dense(1)])\n    model.compile(loss='mse')\n"
            "    with ai.pipeline.train:\n"
            "        history = model.fit(train_ds, validation_data=val_ds, epochs=2,\n"
            "                            callbacks=[keras.callbacks.ModelCheckpoint('m.keras'), _dft_runtime.KerasCallback()])\n"
            "    with ai.pipeline.evaluate:\n        model.evaluate(test_ds)\n    return history\n",
        ),
        Case(
            # a script: one line changes
            'import keras\nimport numpy as np\n\nmodel = keras.Sequential([keras.layers.Dense(1)])\nmodel.compile(loss="mse")\nmodel.fit(np.zeros((8, 2)), np.zeros((8, 1)), epochs=1)\n',
            "import dftpass.runtime as _dft_runtime\nfrom dftracer.python import ai\nimport keras\nimport numpy as np\n\n"
            'model = keras.Sequential([keras.layers.Dense(1)])\nmodel.compile(loss="mse")\n'
            "with ai.pipeline.train:\n"
            "    model.fit(np.zeros((8, 2)), np.zeros((8, 1)), epochs=1, callbacks=[_dft_runtime.KerasCallback()])\n",
        ),
    ]

    def run(self, ctx) -> None:
        graph, loops, compiled = ctx.analysis("callgraph"), ctx.analysis("loops"), ctx.analysis("compiled")
        for function_id, index in step_calls(graph, loops):
            self._step_call(ctx, graph, compiled, function_id, index)
        self._python_readers(ctx, graph, compiled)
        for function_id, (fs, fn) in sorted(graph.functions.items()):
            if compiled.hard(function_id) or not _uses_keras(fs):
                continue
            for call in fn.calls:
                node = PHASE_METHODS.get(call.method)
                if node is None or not call.receiver or not _is_keras_model(graph, function_id, fs, call.receiver):
                    continue
                if call.stmt_kind in ("expr", "assign") and not any(is_node(fs, w, node) for w in call.withs):
                    ctx.add_edit(fs.relpath, WrapStmt(self.id, call.line, f"{node.split('.')[1]} phase: "
                                                      f"{call.callee}()", call.stmt, ctx.names(fs.relpath).node(node)))
                if call.method == "fit":
                    self._callback(ctx, fs, fn, call)

    # -- custom loops --------------------------------------------------------------------------
    def _step_call(self, ctx, graph, compiled, function_id: str, index: int) -> None:
        fs, fn = graph.functions[function_id]
        call = fn.calls[index]
        if compiled.hard(function_id) or call.stmt_kind == "with":
            return
        names = ctx.names(fs.relpath)
        if any(compiled.compiler_of(t) in TF_COMPILERS for t in graph.targets(function_id, index)):
            if not any(is_node(fs, w, "compute") for w in call.withs) and _simple_statement(fn, call):
                ctx.add_edit(fs.relpath, WrapStmt(self.id, call.line, f"tf.function step {call.callee}()",
                                                  call.stmt, names.node("compute")))
            return
        if not _in_tensorflow_file(fs):
            return
        if call.stmt_kind == "assign" and is_backward(call, graph, fs) and call.method == "gradient":
            if not any(is_node(fs, w, "compute.backward") for w in call.withs):
                ctx.add_edit(fs.relpath, WrapStmt(self.id, call.line, f"backward pass {call.callee}()", call.stmt,
                                                  names.node("compute.backward")))
        elif call.stmt_kind == "expr" and call.method == "apply_gradients" and \
                is_optimizer_step(graph, fs, fn, call):
            if any(is_node(fs, c.callee, "compute.step", "start") for c in calls_at(fn, sibling(call.stmt, -1))):
                return
            why = f"optimizer step {call.callee}()"
            ctx.add_edit(fs.relpath, InsertBefore(self.id, call.line, why, call.stmt, names.start("compute.step")))
            ctx.add_edit(fs.relpath, InsertAfter(self.id, call.line, why, call.stmt, names.stop("compute.step")))

    # -- tf.data's Python readers ---------------------------------------------------------------
    def _python_readers(self, ctx, graph, compiled) -> None:
        """A project function that a ``tf.data`` map calls through ``tf.numpy_function`` /
        ``tf.py_function`` reads one sample in Python: its body gets a data item region of
        its own per call (tf.data calls it from several threads at once)."""
        done: set[str] = set()
        for function_id, (fs, fn) in graph.functions.items():
            for call in fn.calls:
                if normalize(graph.qualify(fs, call.callee)) not in PYTHON_BRIDGES or not call.args:
                    continue
                if call.args[0] is None and ctx.mode != "validate":  # a lambda (the summaries drop its text)
                    ctx.report(Finding(self.id, f"{call.callee}() runs an inline function: its reads are not timed "
                                       "(define it with def to get a data item region)", fs.relpath, call.line,
                                       severity=Severity.INFO))
                    continue
                reader = graph.resolve_name(fs, call.args[0] or "")
                if reader is None or reader not in graph.functions or reader in done or compiled.hard(reader):
                    continue
                done.add(reader)
                rfs, rfn = graph.functions[reader]
                if rfn.is_generator or rfn.is_async or has_region(rfs, rfn, "data.item"):
                    continue
                if any(recognize(rfs, w.split("(", 1)[0]) == "dft_fn" for w in rfn.withs):
                    continue  # a region of its own already
                region = ctx.names(rfs.relpath).threaded_region("data.item")
                ctx.add_edit(rfs.relpath, WrapBody(self.id, rfn.line, f"reads one sample for tf.data "
                                                   f"({call.callee}() in {fn.name})", rfn.stmt, with_item=region))

    # -- Keras fit -----------------------------------------------------------------------------
    def _callback(self, ctx, fs: FileSummary, fn: FunctionSummary, call: CallSite) -> bool:
        """Add the callback to ``fit``'s ``callbacks``; False if it cannot go there."""
        names = ctx.names(fs.relpath)
        given = dict(call.keywords)
        if any(a is not None and a.startswith("**") for a in call.args) or "**" in call.callee or \
                len(call.args) > CALLBACKS_POSITION:
            if ctx.mode != "validate":
                ctx.report(Finding(self.id, f"{call.callee}() takes its callbacks by position or through **kwargs: "
                                   "no dftracer callback added (pass callbacks= by keyword)", fs.relpath,
                                   call.line, severity=Severity.INFO))
            return False
        name = _callback_name(fs)
        if any(c.callee.endswith(f".{name}") and c.stmt == call.stmt for c in fn.calls):
            return False  # added already
        callback = f"{names.module(RUNTIME)}.{name}"
        ctx.add_edit(fs.relpath, AddArgument(self.id, call.line, "the epochs and steps of fit, from a callback",
                                             call.stmt, call.callee, "callbacks", f"{callback}()",
                                             new="callbacks" not in given))
        return True


def _simple_statement(fn: FunctionSummary, call: CallSite) -> bool:
    """The call sits in a statement a ``with`` can wrap (not a loop or ``if`` header)."""
    return call.stmt_kind in ("expr", "assign", "other") and not any(
        lp.stmt == call.stmt for lp in fn.loops)


def _in_tensorflow_file(fs: FileSummary) -> bool:
    return any(q == "tensorflow" or q.startswith("tensorflow.") for q in fs.imports.values())


def _uses_keras(fs: FileSummary) -> bool:
    return any(q.split(".")[0] in ("keras", "tf_keras", "tensorflow") for q in fs.imports.values())


def _is_keras_model(graph, function_id: str, fs: FileSummary, receiver: str) -> bool:
    """A Keras model: what value flow says it holds (a Keras class, a project subclass of
    ``keras.Model``; not another library's estimator), else what its name says (``model``:
    a ``build_model()`` factory's result is opaque)."""
    origins = graph.values.of(function_id, receiver) if graph.values is not None else frozenset()
    for origin in origins:
        kind, _, subject = origin.partition(":")
        if kind == "ext" and subject.startswith((*KERAS_MODULES, "tf.keras")):
            return True
        if kind == "inst" and graph.has_base(subject, ("keras.Model", "Model")):
            return True
    libraries = [o[4:].split(".")[0] for o in origins if o.startswith("ext:") and "." in o]
    if libraries or any(o.startswith("inst:") for o in origins):
        return False  # scikit-learn's estimator, a project class that is no Keras model
    return bool(MODEL_NAME.search(receiver.rsplit(".", 1)[-1]))


def _callback_name(fs: FileSummary) -> str:
    """The callback of the Keras the file uses (``keras``, else ``tf.keras``: in TensorFlow
    before 2.16 that is Keras 2, whose ``Callback`` is another class)."""
    uses_keras = any(q == "keras" or q.startswith("keras.") for q in fs.imports.values())
    return "KerasCallback" if uses_keras else "TfKerasCallback"
