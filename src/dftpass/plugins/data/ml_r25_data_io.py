"""ML-R25: ``ai.data.io.open/read/write/close`` around the sample reads of the data path."""

from __future__ import annotations

import attrs

from dftpass.api import (
    call_chain, CallSite, Case, data_path, does_io, Expect, FileSummary, Finding, FunctionSummary, HANDLE_NAME,
    Handles, is_node, OPENERS, Pass, PassKind, run_inside, Severity, StmtPath, torch_name, unwrappable,
    WrapStmt,
)

#: calls that read data and return it, by qualified name -> what they return (a kind of
#: :data:`dftpass.core.emitter.IMAGE_SIZE`)
READS: dict[str, str] = {
    "numpy.load": "maybe_array",  # an array, an NpzFile (.npz); anything with allow_pickle=True
    "numpy.fromfile": "ndarray",
    "numpy.loadtxt": "ndarray",
    "numpy.genfromtxt": "ndarray",
    "cv2.imread": "maybe_array",  # None when the file cannot be read
    "torchvision.io.read_image": "tensor",
    "torchvision.io.read_file": "tensor",
    "pandas.read_parquet": "frame",
    "pandas.read_feather": "frame",
    "pandas.read_csv": "frame",  # a reader, not a frame, with chunksize=/iterator=: see _kind_of_read
    "pyarrow.parquet.read_table": "table",
    "imageio.imread": "ndarray",
    "imageio.v2.imread": "ndarray",
    "imageio.v3.imread": "ndarray",
    "tifffile.imread": "ndarray",
    "skimage.io.imread": "ndarray",
    # one sample's tensor(s), in the data path (checkpoints are ML-R26's): the tensors of
    # whatever structure it holds
    "torch.load": "state",
    # audio: a (samples, rate) pair (AUDIO_SAMPLES says which element holds the samples)
    "scipy.io.wavfile.read": "ndarray",
    "soundfile.read": "ndarray",
    "librosa.load": "ndarray",
    "torchaudio.load": "tensor",
}
#: reads that return a tuple: the position of the samples in it (its bytes are the read's size)
AUDIO_SAMPLES = {"scipy.io.wavfile.read": 1, "soundfile.read": 0, "librosa.load": 0, "torchaudio.load": 0}
#: methods that only convert what a read returned (the statement is still the read)
CONVERSIONS = frozenset({"astype", "copy", "reshape", "transpose", "squeeze", "convert", "decode"})
#: conversions that turn a numpy array into a numpy array
ARRAY_METHODS = frozenset({"astype", "copy", "reshape", "transpose", "squeeze"})
#: methods of a file handle that read (their result: bytes or str)
FILE_READS = frozenset({"read", "read_bytes", "read_text"})
#: methods that copy a memmap's slice into memory (where the pages are read)
MEMMAP_COPIES = frozenset({"astype", "copy", "tolist"})
#: calls that copy their first argument (a memmap's slice) into memory
COPY_CALLS = frozenset({"numpy.array", "numpy.copy", "torch.tensor"})
#: calls that decode a lazily opened image into an array (``np.asarray(Image.open(p))``)
DECODE_CALLS = frozenset({"numpy.array", "numpy.asarray"})
#: calls that make a tensor of an array a read returned (the statement is still the read)
TENSOR_OF = frozenset({"torch.from_numpy", "torch.as_tensor", "torch.tensor", "torch.FloatTensor"})
#: the name a returned read is bound to, so that its size can be measured in the region
READ_NAME = "_dft_read"
#: calls that write data, by qualified name -> index of the argument whose bytes are written
WRITES: dict[str, int] = {"numpy.save": 1, "numpy.savez": 1, "numpy.savez_compressed": 1, "cv2.imwrite": 1}

_NAME = HANDLE_NAME


@attrs.define
class DataIOOptions:
    #: measure ``image_size`` after each read (``X.update(image_size=...)`` inside the region)
    image_size: bool = True


@attrs.frozen
class _Region:
    """One statement to wrap: its node, what holds the bytes it moved (and their kind)."""

    path: StmtPath
    line: int
    op: str  # open | read | write | close
    what: str
    holder: str | None = None
    kind: str = "any"
    #: the statement is ``return READ``
    returned: bool = False


class DataIO(Pass):
    """Time the reads of each sample with ``ai.data.io.read`` (and open, write, close), with
    ``image_size``.

    What it does:
        In the data path (each data set's ``__getitem__`` and the readers it dispatches to,
        the functions a batch producer calls per sample, the batch producers of
        ``X, Y = get_batch()`` loops: ML-R9's and ML-R6's targets, and the project functions
        they call), each statement that reads a sample gets ``with ai.data.io.read:`` and,
        inside the region after the statement, ``ai.data.io.read.update(image_size=...)``
        with the bytes of what it read, measured in memory: ``nbytes`` (numpy, and anything
        that has it), ``element_size() * nelement()`` (tensors), ``len(buf)`` (bytes),
        ``width * height * bands`` (decoded PIL images: ``len(img.tobytes())`` would copy the
        image), ``memory_usage`` (DataFrames); never the file's size or the path's length.
        Where the type is not certain (``np.load`` may return an ``NpzFile``, ``cv2.imread``
        returns None for a bad file) one call measures it when it runs:
        ``dftpass.runtime.nbytes(x)`` (an ``NpzFile``'s members, 0 for None): a size is always a
        count of bytes, never ``-1``. Where nothing names what was read, no size is written.

        The reads: ``x = np.load(p)``, ``np.fromfile``, ``cv2.imread``,
        ``torchvision.io.read_image``, ``pd.read_parquet``/``read_csv``, ``imageio``/``tifffile``
        reads, ``torch.load`` of a sample, each possibly followed by a conversion
        (``.astype(...)``, ``[..., ::-1]``) or made a tensor at once
        (``torch.from_numpy(np.load(p))``); audio reads that return a pair, measured by the
        samples (``rate, data = wavfile.read(p)``: ``data``; ``soundfile.read``,
        ``librosa.load``, ``torchaudio.load``: the first); ``img = Image.open(p).convert('RGB')`` (the decode),
        and ``img.load()`` after a lazy ``img = Image.open(f)``;
        ``buf = f.read()`` on a file; ``x = f[key][i]`` on an ``h5py.File`` (or ``ds[i]`` on
        one of its data sets, a zarr array); and the statement that copies slices out of an
        ``np.memmap`` (``x = torch.stack([torch.from_numpy(data[i:i+n].astype(np.int64)) for i
        in ix])`` in nanoGPT's ``get_batch``: slicing a memmap reads nothing, the copy reads
        the pages; ``image_size`` is then the batch in memory, int64, 4x the uint16 bytes on
        disk). ``with ai.data.io.open:`` goes around ``f = open(p, 'rb')``, ``h = h5py.File(p)``,
        ``data = np.memmap(...)``, ``np.load(p, mmap_mode='r')`` and a lazy ``img =
        Image.open(p)``; ``with ai.data.io.close:`` around ``f.close()`` of such a handle;
        ``with ai.data.io.write:`` around ``np.save(p, x)``/``cv2.imwrite``/``f.write(buf)``
        (a sample cache).

    Why:
        ``item`` events (ML-R9) say how long a sample takes; the io events say how much of it
        is storage, and with ``image_size`` the bandwidth each read gets: what tells an I/O
        bound data stall from a decode or augmentation bound one.

    Example:
        ``array = np.load(path)`` becomes ``with ai.data.io.read:`` / ``array = np.load(path)``
        / ``ai.data.io.read.update(image_size=_dft_runtime.nbytes(array))``. The size
        expression follows what the statement gives: ``x.nbytes`` for what is always an array
        (``np.fromfile``, ``imageio.imread``, a memmap slice's ``astype``),
        ``x.element_size() * x.nelement()`` for a tensor (``torch.stack`` of the slices), the
        tensors of a ``torch.load``; ``dftpass.runtime.nbytes(x)`` where it may be something
        else (``np.load`` of an ``.npz`` archive, ``cv2.imread`` of an unreadable file, an
        h5py read).

    Fix safety:
        Safe: the region is a ``with`` (an exception in the read still ends it), and the
        measure cannot raise. ``update`` on one node costs ~0.4 µs with tracing off and ~1.4 µs
        on (the ~15/65 µs of ``ai.update`` are for the whole tree), and the region ~6-9 µs on:
        worth it for reads of ~100 µs and more, which sample reads from storage are; for reads
        of a few µs (a sample already in memory) switch the measure off or the rule off.
        A read whose value is returned at once (``return np.load(p)``, DLIO's readers) is
        named inside the region (``_dft_read = np.load(p)``, measured, then ``return
        _dft_read`` after the region); ``strip`` gives the ``return`` back.
        Not wrapped: a read that is only part of the value returned (``return np.load(p),
        label``: nothing names it); the open of a ``with open(p) as f:`` block (a ``with`` region would cover the
        whole block, start/stop would stay open when the open raises; the read inside is
        wrapped); a statement that calls a project function doing I/O itself, and anything
        reached from inside an ``ai.data.io`` region already (the node is not re-entrant);
        statements already in an ``ai.data.io`` region. ``f[a][b]`` on an ``h5py.File`` is
        taken as data set ``a``, element ``b`` unless the result is subscripted into another
        name (``ds = f['group']['images']`` then ``x = ds[i]``: a group lookup, and a handle).
        Open and close events carry no ``image_size`` (they move no bytes).

    Options:
        image_size: measure ``image_size`` after each read (default true). Off: no
            ``update`` line; reads whose value is returned are wrapped too, reads written
            without a call (``x = f[key][i]``) are not (nothing would find the region again).
    """

    id = "ML-R25"
    title = "Data I/O phases"
    kind = PassKind.TRANSFORM
    requires = ("callgraph", "loops", "batch_provenance", "checkpoints")
    tags = ("data", "io")
    Options = DataIOOptions

    VALID = [
        # a read outside the data path (the data set's __init__ reads its index once)
        "import numpy as np\nfrom torch.utils.data import Dataset\n\n\nclass Samples(Dataset):\n"
        "    def __init__(self, root):\n        self.labels = np.load(root + '/labels.npy')\n\n"
        "    def __len__(self):\n        return len(self.labels)\n\n    def __getitem__(self, i):\n"
        "        return self.labels[i]\n",
        # already annotated
        "from dftracer.python import ai\nimport numpy as np\nfrom torch.utils.data import Dataset\n\n\n"
        "class Samples(Dataset):\n    def __getitem__(self, i):\n        with ai.data.io.read:\n"
        "            x = np.load(f'{i}.npy')\n            ai.data.io.read.update(image_size=x.nbytes)\n"
        "        return x\n",
        # the reader is called from inside a read region: its reads would nest in it
        "from dftracer.python import ai\nimport numpy as np\nfrom torch.utils.data import Dataset\n\n\n"
        "def load(path):\n    x = np.load(path)\n    return x * 2\n\n\nclass Samples(Dataset):\n"
        "    def __getitem__(self, i):\n        with ai.data.io.read:\n            x = load(f'{i}.npy')\n"
        "        return x\n",
        # the value read is only part of what is returned: nothing names it to measure
        "import numpy as np\nfrom torch.utils.data import Dataset\n\n\nclass Samples(Dataset):\n"
        "    def __getitem__(self, i):\n        return np.load(f'{i}.npy'), i\n",
    ]
    INVALID = [
        Case(
            # audio reads (tacotron2): a (rate, samples) pair unpacked from scipy's wavfile.read, measured by
            # its samples; a read inside the tensor it is turned into (torch.from_numpy(np.load(p)))
            'import numpy as np\nimport torch\nfrom scipy.io.wavfile import read\n'
            'from torch.utils.data import DataLoader, Dataset\n\n\ndef load_wav(path):\n'
            '    rate, data = read(path)\n'
            '    return torch.FloatTensor(data.astype(np.float32)), rate\n\n\n'
            'class Speech(Dataset):\n    def __init__(self, paths, mels):\n'
            '        self.paths, self.mels = paths, mels\n\n    def __len__(self):\n'
            '        return len(self.paths)\n\n    def __getitem__(self, i):\n'
            '        if self.mels:\n'
            '            return torch.from_numpy(np.load(self.paths[i]))\n'
            '        audio, rate = load_wav(self.paths[i])\n        return audio\n\n\n'
            'def fit(model, opt, paths):\n'
            '    for x in DataLoader(Speech(paths, False), batch_size=1):\n'
            '        model(x).sum().backward()\n        opt.step()\n',
            'from dftracer.python import ai\nimport numpy as np\nimport torch\n'
            'from scipy.io.wavfile import read\n'
            'from torch.utils.data import DataLoader, Dataset\n\n\ndef load_wav(path):\n'
            '    with ai.data.io.read:\n        rate, data = read(path)\n'
            '        ai.data.io.read.update(image_size=data.nbytes)\n'
            '    return torch.FloatTensor(data.astype(np.float32)), rate\n\n\n'
            'class Speech(Dataset):\n    def __init__(self, paths, mels):\n'
            '        self.paths, self.mels = paths, mels\n\n    def __len__(self):\n'
            '        return len(self.paths)\n\n    def __getitem__(self, i):\n'
            '        if self.mels:\n            with ai.data.io.read:\n'
            '                _dft_read = torch.from_numpy(np.load(self.paths[i]))\n'
            '                ai.data.io.read.update(image_size=_dft_read.element_size() * _dft_read.nelement())\n'
            '            return _dft_read\n        audio, rate = load_wav(self.paths[i])\n'
            '        return audio\n\n\ndef fit(model, opt, paths):\n'
            '    for x in DataLoader(Speech(paths, False), batch_size=1):\n'
            '        model(x).sum().backward()\n        opt.step()\n',
        ),
        Case(
            # a member of an archive is an array: its size plainly; with pickles allowed the
            # load can return any object: the guarded size
            "import numpy as np\nfrom torch.utils.data import Dataset\n\n\nclass Pairs(Dataset):\n"
            "    def __getitem__(self, i):\n        x = np.load(f'{i}.npz')['x']\n"
            "        meta = np.load(f'{i}.meta.npy', allow_pickle=True)\n        return x, meta\n",
            'import dftpass.runtime as _dft_runtime\nfrom dftracer.python import ai\nimport numpy as np\n'
            'from torch.utils.data import Dataset\n\n\nclass Pairs(Dataset):\n    def __getitem__(self, i):\n'
            "        with ai.data.io.read:\n            x = np.load(f'{i}.npz')['x']\n"
            '            ai.data.io.read.update(image_size=x.nbytes)\n        with ai.data.io.read:\n'
            "            meta = np.load(f'{i}.meta.npy', allow_pickle=True)\n"
            '            ai.data.io.read.update(image_size=_dft_runtime.nbytes(meta))\n        return x, meta\n',
        ),
        Case(
            # the value read is returned at once (DLIO's readers): it is named inside the
            # region, measured there, and returned after it; a comment stays on its line
            "import numpy as np\nfrom PIL import Image\nfrom torch.utils.data import Dataset\n\n\nclass NpyReader:\n    def open(self, filename):\n"
            "        return np.load(filename)  # one sample a file\n\n\nclass ImageReader:\n"
            "    def open(self, filename):\n        return np.asarray(Image.open(filename))\n\n\n"
            "class Samples(Dataset):\n    def __init__(self, kind):\n        self.reader = NpyReader() if kind == 'npy' "
            "else ImageReader()\n\n    def __getitem__(self, i):\n        return self.reader.open(f'{i}')\n",
            'import dftpass.runtime as _dft_runtime\nfrom dftracer.python import ai\nimport numpy as np\n'
            'from PIL import Image\nfrom torch.utils.data import Dataset\n\n\nclass NpyReader:\n'
            '    def open(self, filename):\n        with ai.data.io.read:\n'
            '            _dft_read = np.load(filename)  # one sample a file\n'
            '            ai.data.io.read.update(image_size=_dft_runtime.nbytes(_dft_read))\n'
            '        return _dft_read\n\n\nclass ImageReader:\n    def open(self, filename):\n'
            '        with ai.data.io.read:\n            _dft_read = np.asarray(Image.open(filename))\n'
            '            ai.data.io.read.update(image_size=_dft_read.nbytes)\n        return _dft_read\n\n\n'
            'class Samples(Dataset):\n    def __init__(self, kind):\n'
            "        self.reader = NpyReader() if kind == 'npy' else ImageReader()\n\n"
            "    def __getitem__(self, i):\n        return self.reader.open(f'{i}')\n",
        ),
        Case(
            "import os\n\nimport numpy as np\nimport torch\nfrom torch.utils.data import Dataset\n\n\n"
            "class NpySamples(Dataset):\n    def __init__(self, root, items):\n"
            "        self.root, self.items = root, items\n\n"
            "    def __len__(self):\n        return len(self.items)\n\n    def __getitem__(self, index):\n"
            "        key, label = self.items[index]\n        # one .npy file per sample\n"
            "        array = np.load(os.path.join(self.root, key))\n        return torch.from_numpy(array), label\n",
            'import dftpass.runtime as _dft_runtime\nfrom dftracer.python import ai\nimport os\n\n'
            'import numpy as np\nimport torch\nfrom torch.utils.data import Dataset\n\n\n'
            'class NpySamples(Dataset):\n    def __init__(self, root, items):\n'
            '        self.root, self.items = root, items\n\n    def __len__(self):\n'
            '        return len(self.items)\n\n    def __getitem__(self, index):\n'
            '        key, label = self.items[index]\n        # one .npy file per sample\n'
            '        with ai.data.io.read:\n            array = np.load(os.path.join(self.root, key))\n'
            '            ai.data.io.read.update(image_size=_dft_runtime.nbytes(array))\n'
            '        return torch.from_numpy(array), label\n',
        ),
        Case(
            # torchvision's ImageFolder shape: the read is in a loader the data set calls; the
            # decode is the read (Image.open alone reads the header); raw bytes from a file
            "from PIL import Image\nfrom torch.utils.data import Dataset\n\n\ndef pil_loader(path):\n"
            "    img = Image.open(path).convert('RGB')\n    return img\n\n\ndef raw_loader(path):\n"
            "    with open(path, 'rb') as f:\n        buf = f.read()\n    return buf\n\n\n"
            "class Folder(Dataset):\n    def __init__(self, paths, transform):\n"
            "        self.paths, self.transform = paths, transform\n\n    def __getitem__(self, i):\n"
            "        img = pil_loader(self.paths[i])\n        meta = raw_loader(self.paths[i] + '.json')\n"
            "        return self.transform(img), meta\n",
            "from dftracer.python import ai\nfrom PIL import Image\nfrom torch.utils.data import Dataset\n\n\n"
            "def pil_loader(path):\n    with ai.data.io.read:\n        img = Image.open(path).convert('RGB')\n"
            "        ai.data.io.read.update(image_size=img.width * img.height * len(img.getbands()))\n"
            "    return img\n\n\ndef raw_loader(path):\n    with open(path, 'rb') as f:\n"
            "        with ai.data.io.read:\n            buf = f.read()\n"
            "            ai.data.io.read.update(image_size=len(buf))\n    return buf\n\n\n"
            "class Folder(Dataset):\n    def __init__(self, paths, transform):\n"
            "        self.paths, self.transform = paths, transform\n\n    def __getitem__(self, i):\n"
            "        img = pil_loader(self.paths[i])\n        meta = raw_loader(self.paths[i] + '.json')\n"
            "        return self.transform(img), meta\n",
        ),
        Case(
            # nanoGPT's get_batch: np.memmap only maps the file (open); the copy of the slices
            # out of it is the read
            "import numpy as np\nimport torch\n\nblock_size, batch_size = 8, 4\n\n\ndef get_batch(split):\n"
            "    data = np.memmap(f'{split}.bin', dtype=np.uint16, mode='r')\n"
            "    ix = torch.randint(len(data) - block_size, (batch_size,))\n"
            "    x = torch.stack([torch.from_numpy((data[i:i+block_size]).astype(np.int64)) for i in ix])\n"
            "    y = torch.stack([torch.from_numpy((data[i+1:i+1+block_size]).astype(np.int64)) for i in ix])\n"
            "    return x, y\n\n\ndef train(model, optimizer, steps):\n    for it in range(steps):\n"
            "        X, Y = get_batch('train')\n        loss = model(X, Y)\n        loss.backward()\n"
            "        optimizer.step()\n",
            'from dftracer.python import ai\nimport numpy as np\nimport torch\n\n'
            'block_size, batch_size = 8, 4\n\n\ndef get_batch(split):\n    with ai.data.io.open:\n'
            "        data = np.memmap(f'{split}.bin', dtype=np.uint16, mode='r')\n"
            '    ix = torch.randint(len(data) - block_size, (batch_size,))\n    with ai.data.io.read:\n'
            '        x = torch.stack([torch.from_numpy((data[i:i+block_size]).astype(np.int64)) for i in ix])\n'
            '        ai.data.io.read.update(image_size=x.element_size() * x.nelement())\n'
            '    with ai.data.io.read:\n'
            '        y = torch.stack([torch.from_numpy((data[i+1:i+1+block_size]).astype(np.int64)) for i in ix])\n'
            '        ai.data.io.read.update(image_size=y.element_size() * y.nelement())\n    return x, y\n\n\n'
            'def train(model, optimizer, steps):\n    for it in range(steps):\n'
            "        X, Y = get_batch('train')\n        loss = model(X, Y)\n        loss.backward()\n"
            '        optimizer.step()\n',
        ),
        Case(
            # HDF5: the file opened once in __init__ (not the data path), read per sample;
            # a handle opened per sample gets open and close regions
            "import h5py\nimport torch\n\n\nclass H5Samples(torch.utils.data.Dataset):\n"
            "    def __init__(self, path):\n        self.h5 = h5py.File(path, 'r')\n        self.path = path\n\n"
            "    def __getitem__(self, i):\n        image = self.h5['images'][i]\n"
            "        f = h5py.File(self.path + '.labels', 'r')\n        labels = f['labels']\n"
            "        label = labels[i]\n        f.close()\n        return torch.from_numpy(image), int(label)\n",
            'import dftpass.runtime as _dft_runtime\nfrom dftracer.python import ai\nimport h5py\n'
            'import torch\n\n\nclass H5Samples(torch.utils.data.Dataset):\n    def __init__(self, path):\n'
            "        self.h5 = h5py.File(path, 'r')\n        self.path = path\n\n"
            '    def __getitem__(self, i):\n        with ai.data.io.read:\n'
            "            image = self.h5['images'][i]\n"
            '            ai.data.io.read.update(image_size=_dft_runtime.nbytes(image))\n'
            "        with ai.data.io.open:\n            f = h5py.File(self.path + '.labels', 'r')\n"
            "        labels = f['labels']\n        with ai.data.io.read:\n            label = labels[i]\n"
            '            ai.data.io.read.update(image_size=_dft_runtime.nbytes(label))\n'
            '        with ai.data.io.close:\n            f.close()\n'
            '        return torch.from_numpy(image), int(label)\n',
        ),
        Case(
            # OpenCV, raw arrays and parquet in one sample; the index read in __init__ is not
            # the data path; the colour conversion after the read is not part of it
            "import cv2\nimport numpy as np\nimport pandas as pd\nfrom torch.utils.data import Dataset\n\n\n"
            "class Frames(Dataset):\n    def __init__(self, index_path):\n"
            "        self.index = pd.read_csv(index_path)\n\n"
            "    def __len__(self):\n        return len(self.index)\n\n    def __getitem__(self, i):\n"
            "        row = self.index.iloc[i]\n        image = cv2.imread(row.path)\n"
            "        image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)\n"
            "        depth = np.fromfile(row.depth, dtype=np.float32).reshape(480, 640)\n"
            "        table = pd.read_parquet(row.meta)\n        return image, depth, table.values\n",
            'import dftpass.runtime as _dft_runtime\nfrom dftracer.python import ai\nimport cv2\n'
            'import numpy as np\nimport pandas as pd\nfrom torch.utils.data import Dataset\n\n\n'
            'class Frames(Dataset):\n    def __init__(self, index_path):\n'
            '        self.index = pd.read_csv(index_path)\n\n    def __len__(self):\n'
            '        return len(self.index)\n\n    def __getitem__(self, i):\n'
            '        row = self.index.iloc[i]\n        with ai.data.io.read:\n'
            '            image = cv2.imread(row.path)\n'
            '            ai.data.io.read.update(image_size=_dft_runtime.nbytes(image))\n'
            '        image = cv2.cvtColor(image, cv2.COLOR_BGR2RGB)\n        with ai.data.io.read:\n'
            '            depth = np.fromfile(row.depth, dtype=np.float32).reshape(480, 640)\n'
            '            ai.data.io.read.update(image_size=depth.nbytes)\n        with ai.data.io.read:\n'
            '            table = pd.read_parquet(row.meta)\n'
            '            ai.data.io.read.update(image_size=int(table.memory_usage(index=True).sum()))\n'
            '        return image, depth, table.values\n',
        ),
        Case(
            # h5py opened lazily in each worker (a handle does not survive fork); the slice after
            # the read is not a read; a read inside try/except keeps its handler
            "import h5py\nimport torch\nfrom torch.utils.data import Dataset\n\n\nclass Lazy(Dataset):\n"
            "    def __init__(self, path):\n        self.path = path\n        self.h5 = None\n\n"
            "    def __getitem__(self, i):\n        if self.h5 is None:\n"
            "            self.h5 = h5py.File(self.path, 'r')\n"
            "        x = self.h5['x'][i]\n        x = x[..., ::-1]\n        try:\n"
            "            y = torch.load(f'{i}.pt')\n"
            "        except FileNotFoundError:\n            y = None\n        return x, y\n",
            'import dftpass.runtime as _dft_runtime\nfrom dftracer.python import ai\nimport h5py\n'
            'import torch\nfrom torch.utils.data import Dataset\n\n\nclass Lazy(Dataset):\n'
            '    def __init__(self, path):\n        self.path = path\n        self.h5 = None\n\n'
            '    def __getitem__(self, i):\n        if self.h5 is None:\n            with ai.data.io.open:\n'
            "                self.h5 = h5py.File(self.path, 'r')\n        with ai.data.io.read:\n"
            "            x = self.h5['x'][i]\n"
            '            ai.data.io.read.update(image_size=_dft_runtime.nbytes(x))\n        x = x[..., ::-1]\n'
            "        try:\n            with ai.data.io.read:\n                y = torch.load(f'{i}.pt')\n"
            '                ai.data.io.read.update(image_size=sum(t.element_size() * t.nelement() for t in torch.utils._pytree.tree_flatten(y)[0] if torch.is_tensor(t)))\n'
            '        except FileNotFoundError:\n            y = None\n        return x, y\n',
        ),
        Case(
            # image_size off: no measure, and a returned read is wrapped too
            "import torchvision\nfrom torch.utils.data import Dataset\n\n\nclass Images(Dataset):\n"
            "    def __getitem__(self, i):\n        return torchvision.io.read_image(f'{i}.png')\n",
            "from dftracer.python import ai\nimport torchvision\nfrom torch.utils.data import Dataset\n\n\n"
            "class Images(Dataset):\n    def __getitem__(self, i):\n        with ai.data.io.read:\n"
            "            return torchvision.io.read_image(f'{i}.png')\n",
            options={"image_size": False},
        ),
        Case(
            # the data the batches are cut from, read once before training (batch provenance):
            # the read statement gets the region and its size; the 16-byte header read does not
            "import gzip\n\nimport numpy as np\nimport torch\n\n\ndef parse(path):\n"
            "    with gzip.open(path, 'rb') as fh:\n        header = fh.read(16)\n"
            "        return np.frombuffer(fh.read(), dtype=np.uint8).copy()\n\n\n"
            "def batches(data):\n    while True:\n        for i in range(0, len(data) - 8, 8):\n"
            "            yield torch.from_numpy(data[i:i + 8])\n\n\n"
            "def main(model, opt):\n    it = batches(parse('train.gz'))\n    for step in range(10):\n"
            "        x = next(it)\n        model(x.float()).sum().backward()\n        opt.step()\n",
            "from dftracer.python import ai\nimport gzip\n\nimport numpy as np\nimport torch\n\n\ndef parse(path):\n"
            "    with gzip.open(path, 'rb') as fh:\n        header = fh.read(16)\n        with ai.data.io.read:\n"
            "            _dft_read = np.frombuffer(fh.read(), dtype=np.uint8).copy()\n"
            "            ai.data.io.read.update(image_size=_dft_read.nbytes)\n        return _dft_read\n\n\n"
            "def batches(data):\n    while True:\n        for i in range(0, len(data) - 8, 8):\n"
            "            yield torch.from_numpy(data[i:i + 8])\n\n\n"
            "def main(model, opt):\n    it = batches(parse('train.gz'))\n    for step in range(10):\n"
            "        x = next(it)\n        model(x.float()).sum().backward()\n        opt.step()\n",
        ),
        Case(
            # a lazy Image.open reads the header (open), load() the pixels (read, with their bytes)
            'import numpy as np\nfrom PIL import Image\nfrom torch.utils.data import DataLoader, Dataset\n\n\n'
            'class Images(Dataset):\n    def __init__(self, paths, size):\n'
            '        self.paths, self.size = paths, size\n\n    def __len__(self):\n'
            '        return len(self.paths)\n\n    def __getitem__(self, i):\n'
            '        with open(self.paths[i], "rb") as f:\n            img = Image.open(f)\n'
            '            img.load()\n        img = img.resize((self.size, self.size), resample=Image.BICUBIC)\n'
            '        arr = np.array(img.convert("RGB"))\n        arr = arr.astype(np.float32) / 127.5 - 1\n'
            '        return np.transpose(arr, [2, 0, 1])\n\n\ndef fit(model, opt, paths):\n'
            '    for x in DataLoader(Images(paths, 32), batch_size=4):\n        model(x).sum().backward()\n'
            '        opt.step()\n',
            'from dftracer.python import ai\nimport numpy as np\nfrom PIL import Image\n'
            'from torch.utils.data import DataLoader, Dataset\n\n\nclass Images(Dataset):\n'
            '    def __init__(self, paths, size):\n        self.paths, self.size = paths, size\n\n'
            '    def __len__(self):\n        return len(self.paths)\n\n    def __getitem__(self, i):\n'
            '        with open(self.paths[i], "rb") as f:\n            with ai.data.io.open:\n'
            '                img = Image.open(f)\n            with ai.data.io.read:\n'
            '                img.load()\n'
            '                ai.data.io.read.update(image_size=img.width * img.height * len(img.getbands()))\n'
            '        img = img.resize((self.size, self.size), resample=Image.BICUBIC)\n'
            '        arr = np.array(img.convert("RGB"))\n        arr = arr.astype(np.float32) / 127.5 - 1\n'
            '        return np.transpose(arr, [2, 0, 1])\n\n\ndef fit(model, opt, paths):\n'
            '    for x in DataLoader(Images(paths, 32), batch_size=4):\n        model(x).sum().backward()\n'
            '        opt.step()\n',
        ),
    ]

    def run(self, ctx) -> None:
        graph = ctx.analysis("callgraph")
        loops = ctx.analysis("loops")
        path_functions = data_path(graph, loops)
        covered = run_inside(graph, _io_node)
        for function_id, why in sorted(path_functions.items()):
            fs, fn = graph.functions[function_id]
            if fn.is_module or function_id in covered:
                continue
            if any(_io_node(fs, d) for d in fn.decorators):
                continue
            for region in _regions(graph, function_id, self.options.image_size):
                self._emit(ctx, graph, function_id, region, why)
        # the reads a step's batches are cut from, once (batch provenance): a corpus read with
        # ``open().read()``, a whole data set read from a gzip file before training
        checkpoint_ops = ctx.analysis("checkpoints").ops
        for function_id, stmts in sorted(ctx.analysis("batch_provenance").loads().items()):
            if function_id in path_functions or function_id in covered:
                continue
            fs, fn = graph.functions[function_id]
            # a checkpoint's load is the checkpoint's read (ML-R18/ML-R26), even where a step's
            # value (the iteration it resumes from) is derived from it
            stmts = stmts - {fn.calls[op.index].stmt for op in checkpoint_ops.get(function_id, ())}
            found = {r.path: r for r in _regions(graph, function_id, self.options.image_size)}
            for path in sorted(stmts):
                region = found.get(path) or _load_region(graph, function_id, path)
                if region is not None:
                    self._emit(ctx, graph, function_id, region,
                               "reads the data the batches are cut from (batch provenance)")

    def _emit(self, ctx, graph, function_id: str, region: _Region, why: str) -> None:
        fs, fn = graph.functions[function_id]
        calls = [c for c in fn.calls if c.stmt == region.path]
        # already in a region (its calls, or the update line beside it, are inside one)
        if any(_io_node(fs, w) for c in fn.calls if c.stmt[:-1] == region.path[:-1] or c.stmt == region.path
               for w in c.withs):
            return
        if any(unwrappable(fs, fn, c) for c in calls):
            return
        # a project function that does I/O itself would nest its regions in this one
        for i, call in enumerate(fn.calls):
            if call.stmt == region.path and any(
                    does_io(graph, t) or any(does_io(graph, r) for r in graph.reachable(t) if r in graph.functions)
                    for t in graph.targets(function_id, i)):
                return
        # a size only where something holds the bytes and its type says how to measure them
        measure = self.options.image_size and region.op in ("read", "write") and region.kind != "unknown" \
            and bool(region.returned or region.holder)
        bind = READ_NAME if region.returned and measure else ""
        names = ctx.names(fs.relpath)
        node = f"data.io.{region.op}"
        holder = bind or region.holder or ""
        kind, torch = region.kind, torch_name(fs, region.what)
        if kind == "state" and torch is None:
            kind = "any"  # the tensors' walk needs the file's name for torch
        size = names.image_size(holder, kind, torch or "torch") if measure else None
        tail = (names.node_update(node, image_size=size),) if size else ()
        ctx.add_edit(fs.relpath, WrapStmt(self.id, region.line, f"{region.what}: {why}", region.path,
                                          names.node(node), tail, bind))


#: what the outermost call of a load statement returns, by qualified name -> image_size kind
_LOAD_KINDS = {"numpy.array": "ndarray", "numpy.asarray": "ndarray", "numpy.frombuffer": "ndarray",
               "numpy.fromfile": "ndarray", "numpy.load": "maybe_array", "torch.tensor": "tensor",
               "torch.from_numpy": "tensor", "torch.stack": "tensor", "torch.cat": "tensor",
               "torch.load": "state"}
#: a read of fewer bytes than this, given as a literal, is a header's (``fh.read(16)``), not data
_HEADER_BYTES = 1024


def _load_region(graph, function_id: str, path: StmtPath) -> _Region | None:
    """A region for a statement batch provenance found reading the data in, where the shapes
    ML-R25 knows do not say it (``file = unidecode(open(p).read())``, ``return
    np.array(array.array('B', fh.read()))``): the statement is the read, and the size is that
    of what it binds or returns when its outermost call says the type; otherwise no size."""
    fs, fn = graph.functions[function_id]
    calls = [c for c in fn.calls if c.stmt == path]
    if not calls or any(unwrappable(fs, fn, c) for c in calls):
        return None
    reads = [c for c in calls if c.method in FILE_READS]
    if reads and all(len(c.args) == 1 and (c.args[0] or "").isdigit() and int(c.args[0]) < _HEADER_BYTES
                     for c in reads):
        return None  # ``struct.unpack('>II', fh.read(8))``: a header
    first = min(calls, key=lambda c: (c.line, c.col))
    chain = call_chain(first.callee + "()")
    qualified = graph.qualify(fs, chain[0]) if chain else ""
    kind = _LOAD_KINDS.get(qualified)
    if kind is None and first.method in FILE_READS or qualified in ("unidecode.unidecode", "str", "bytes"):
        kind = "bytes"
    if kind == "ndarray" and chain and chain[1] and not all(m in ARRAY_METHODS for m in chain[1]):
        kind = None
    if first.stmt_kind == "return":
        return _Region(path, first.line, "read", f"{first.callee}()", None, kind or "unknown", returned=bool(kind))
    assigned = [a for a in fn.assigns if a.stmt == path and _NAME.match(a.target)]
    holder = assigned[0].target if len(assigned) == 1 and kind else None
    return _Region(path, first.line, "read", f"{first.callee}()", holder, kind or "unknown")


def _io_node(fs: FileSummary, text: str | None) -> bool:
    return any(is_node(fs, text, f"data.io.{op}") for op in ("open", "read", "write", "close"))


def _regions(graph, function_id: str, measure: bool) -> list[_Region]:
    """The I/O statements of one function of the data path."""
    fs, fn = graph.functions[function_id]
    handles = Handles(graph, function_id)
    out: dict[StmtPath, _Region] = {}
    assigned: dict[StmtPath, list] = {}
    for a in fn.assigns:
        assigned.setdefault(a.stmt, []).append(a)
    for path, group in assigned.items():
        a = group[0]
        if not _NAME.match(a.target) or len(group) > 1 and any(g.value != a.value for g in group):
            continue
        found = _read_or_open(graph, fs, fn, handles, a.value, a.call_keywords, path, a.call_args)
        if found is None:
            found = _memmap_copy(graph, fs, fn, handles, path)
        if found is None:
            continue
        op, what, kind = found
        chain = call_chain(a.value)
        if op == "read" and (chain is None or graph.qualify(fs, chain[0]) == "h5py.File") \
                and _subscripted_later(fn, a.target, a.line):
            continue  # ``ds = f['group']['name']``: a lookup that hands back a handle
        if not measure and not any(c.stmt == path for c in fn.calls):
            continue  # a region with no call in it is found again only by its update line
        if op == "read":
            kind = _bound_kind(graph, fs, a.value) or kind
            chain = call_chain(a.value)
            if chain and graph.qualify(fs, chain[0]) in AUDIO_SAMPLES:
                continue  # ``pair = read(p)``: a (samples, rate) tuple, measured below when unpacked
        out[path] = _Region(path, a.line, op, what, a.target if op == "read" else None, kind)
    for call in fn.calls:
        # ``rate, data = wavfile.read(p)``: the samples are one element of the pair
        position = AUDIO_SAMPLES.get(graph.qualify(fs, call.callee))
        if position is not None and call.stmt not in out and call.stmt_kind == "assign" \
                and len(call.assigned_to) > position and _NAME.match(call.assigned_to[position]):
            out[call.stmt] = _Region(call.stmt, call.line, "read", f"{call.callee}()", call.assigned_to[position],
                                     READS[graph.qualify(fs, call.callee)])
    for call in fn.calls:
        if call.stmt in out or call.stmt_kind not in ("expr", "return"):
            continue
        region = _call_region(graph, fs, fn, handles, call)
        if region is not None:
            out[call.stmt] = region
    return [out[p] for p in sorted(out)]


def _read_or_open(graph, fs, fn, handles: Handles, value: str | None, keywords, path: StmtPath,
                  args: tuple = ()):
    """(op, what, kind of the result) if the value of an assignment reads or opens data."""
    chain = call_chain(value)
    if chain is not None:
        base, methods, subs = chain
        qualified = graph.qualify(fs, base)
        if qualified in DECODE_CALLS and not methods and not subs and args:
            inner = call_chain(args[0])  # ``np.asarray(Image.open(p))``: the decode reads the file
            if inner and not inner[1] and not inner[2] and OPENERS.get(graph.qualify(fs, inner[0])) == "image":
                return "read", f"{base}({inner[0]}())", "ndarray"
        if qualified in TENSOR_OF and not subs and all(m in CONVERSIONS or m in ("float", "long") for m in methods) \
                and args:
            inner = call_chain(args[0])  # ``torch.from_numpy(np.load(p))``: the statement is the read
            if inner and not inner[1] and not inner[2] and READS.get(graph.qualify(fs, inner[0])) in ("ndarray",
                                                                                                     "maybe_array"):
                return "read", f"{base}({inner[0]}())", "tensor"
        if qualified in READS and all(m in CONVERSIONS for m in methods):
            kind = READS[qualified] if not methods and not subs else "any"
            if qualified == "numpy.load":
                kind = _numpy_load_kind(keywords, methods, subs)
            if READS[qualified] == "ndarray" and not subs and all(m in ARRAY_METHODS for m in methods):
                kind = "ndarray"  # ``np.fromfile(p, dtype=...).reshape(h, w)`` is still an array
            if qualified == "pandas.read_csv" and any(k in ("chunksize", "iterator") for k, _ in keywords):
                return None  # a reader of chunks: the reads happen as it is iterated
            if qualified == "numpy.load" and any(k == "mmap_mode" and v not in (None, "None") for k, v in keywords):
                return ("open", "np.load(mmap_mode=...) maps the file", "any") if not methods and not subs else None
            return "read", f"{base}()", kind
        opened = OPENERS.get(qualified)
        if opened is not None:
            if not methods and not subs:
                return "open", f"{base}()", "any"
            if opened == "image" and methods[0] in ("convert", "copy") and all(m in CONVERSIONS for m in methods) \
                    and not subs:
                return "read", f"{base}().{methods[0]}()", "image"
            if opened in ("h5file", "zarr") and not methods and subs >= (2 if opened == "h5file" else 1):
                return "read", f"{base}()[...]", "maybe_array"
            return None
        # a method of a handle: ``buf = f.read()``, ``img = img.convert('RGB')``
        receiver, _, method = base.rpartition(".")
        if receiver and _NAME.match(receiver) and not subs:
            handle = handles.kind(receiver, path)
            if handle == "file" and method in FILE_READS and all(m == "decode" for m in methods):
                return "read", f"{base}()", "bytes"
            if handle == "image" and method in ("convert", "copy") and all(m in CONVERSIONS for m in methods):
                return "read", f"{base}()", "image"
        # a handle's slice copied: ``x = self.mm[i:j].astype(np.int64)``
        if "[]." in base:
            holder, _, method = base.partition("[].")
            if _NAME.match(holder) and method in MEMMAP_COPIES and handles.kind(holder, path) == "memmap":
                return "read", f"{holder}[...].{method}()", "maybe_array"
        return None
    # a subscript of a handle: ``x = f['images'][i]``, ``y = ds[i]``
    if value and value.endswith("[]"):
        holder = value.split("[]", 1)[0]
        subs = value.count("[]")
        if _NAME.match(holder) and value == holder + "[]" * subs:
            handle = handles.kind(holder, path)
            if handle == "h5file" and subs >= 2 or handle in ("h5dataset", "zarr"):
                return "read", f"{holder}[...]", "maybe_array"
    return None


def _bound_kind(graph, fs, value: str | None) -> str | None:
    """What the name a read statement binds holds, when the statement's outermost call says
    it (``x = torch.stack([... memmap[i:j].astype(...) ...])``: a tensor; ``x =
    mm[i:j].astype(np.int64)``: an array), whatever the read inside it gave."""
    chain = call_chain(value)
    if chain is None or chain[2]:
        return None
    base, methods = chain[0], chain[1]
    if "[]." in base:  # a memmap's slice copied: astype/copy give an array (tolist a list)
        method = base.rpartition("[].")[2]
        return "ndarray" if method in ("astype", "copy") and all(m in ARRAY_METHODS for m in methods) else None
    kind = _LOAD_KINDS.get(graph.qualify(fs, base))
    if kind in ("ndarray", "tensor") and not methods:
        return kind
    return None


def _numpy_load_kind(keywords, methods, subs: int) -> str:
    """What ``np.load(...)`` gives: without ``allow_pickle=True`` an array or an NpzFile, and a
    member of either (``np.load(p)['x']``) or a conversion of it is an array; with pickles
    allowed it can be any object."""
    if any(k == "allow_pickle" and v not in ("False", None) for k, v in keywords):
        return "any"
    return "ndarray" if methods or subs else "maybe_array"


def _memmap_copy(graph, fs, fn, handles: Handles, path: StmtPath):
    """(op, what, kind) if the statement copies slices out of a memmap anywhere in its
    expression (nanoGPT's ``torch.stack([torch.from_numpy(data[i:j].astype(...)) for i in ix])``)."""
    for call in fn.calls:
        if call.stmt != path:
            continue
        holder, sep, method = call.callee.partition("[].")
        if sep and _NAME.match(holder) and method in MEMMAP_COPIES and handles.kind(holder, path) == "memmap":
            return "read", f"{holder}[...].{method}()", "maybe_array"
        if graph.qualify(fs, call.callee) in COPY_CALLS and call.args and call.args[0] \
                and call.args[0].endswith("[]") and handles.kind(call.args[0][:-2], path) == "memmap":
            return "read", f"{call.callee}({call.args[0][:-2]}[...])", "maybe_array"
    return None


def _call_region(graph, fs, fn, handles: Handles, call: CallSite) -> _Region | None:
    """A region for a statement that is one call: a write, a close, or a read returned at once."""
    if call.stmt_kind == "return":
        found = _read_or_open(graph, fs, fn, handles, call.callee + "()", call.keywords, call.stmt, call.args)
        if found is None or found[0] != "read":
            return None
        return _Region(call.stmt, call.line, "read", found[1], None, found[2], returned=True)
    qualified = graph.qualify(fs, call.callee)
    if qualified in WRITES:
        index = WRITES[qualified]
        arg = call.args[index] if len(call.args) > index else None
        return _Region(call.stmt, call.line, "write", f"{call.callee}()", *_written(arg))
    receiver, method = call.receiver, call.method
    if not receiver or not _NAME.match(receiver):
        return None
    handle = handles.kind(receiver, call.stmt)
    if method == "close" and handle in ("file", "h5file") and not call.args:
        return _Region(call.stmt, call.line, "close", call.callee + "()")
    if method == "load" and handle == "image" and not call.args:
        # ``img = Image.open(f); img.load()``: the lazy open read the header, load() the pixels
        return _Region(call.stmt, call.line, "read", call.callee + "()", receiver, "image")
    if method == "write" and handle == "file" and len(call.args) == 1:
        return _Region(call.stmt, call.line, "write", call.callee + "()", *_written(call.args[0]))
    return None


def _written(arg: str | None) -> tuple[str | None, str]:
    """(what holds the bytes a write is given, their kind): a name, or nothing to measure."""
    return (arg, "any") if arg and _NAME.match(arg) else (None, "unknown")


def _subscripted_later(fn: FunctionSummary, name: str, line: int) -> bool:
    """Whether ``name`` is subscripted into another name after ``line`` (``x = ds[i]``: then
    it holds an h5py data set, not data). ``img = img[..., ::-1]`` (the same name) is data
    being sliced; a read of ``f[a][b]`` sliced into a new name is taken for a lookup too (the
    summaries do not say what the subscripts are)."""
    return any(a.line > line and a.target != name and a.value == name + "[]" for a in fn.assigns)
