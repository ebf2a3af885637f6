"""Small local stand-ins for the data the scoreboard's programs would download.

    python bench/scoreboard_data.py PROGRAM WORKDIR

writes, in the program's working copy (the folder it runs from, as docs/realworld.md says),
files of the same format as the real data set, from a fixed seed (the same bytes every time):

    char_rnn            input.txt: 150,000 bytes of the text in /usr/share/common-licenses
    x_transformers      data/enwik8.gz: 90,065,536 bytes of that text (the script reads 95e6
                        bytes and splits at 90e6: the rest is the validation set)
    jax_mnist           /tmp/jax_example_data/*-idx?-ubyte.gz (the fixed path examples/datasets.py
                        reads): 2,000 train and 500 test images, gzip'd IDX
    dcgan               data/mnist/MNIST/raw/* (dcgan.py runs two folders below): 512 / 128 images
    lit_mnist           MNIST/raw/*: 60,000 train images (the template splits 55,000 / 5,000)
    pytorch_template    data/MNIST/raw/* (512 / 128) and config_small.json (2 epochs)
    simclr              datasets/cifar-10-batches-py/*: 64 images per batch file (the pickles)
    improved_diffusion  data/img_NNN.png: 32 random 32x32 images
    diffusers_uncond    data/img_NNN.png: 16 random 32x32 images, and unet_small.json
    iterable_stream     tiny_stories_{train,valid}.bin: int16 token memmaps of that text

torchvision's MNIST only checks that its raw files exist, so it downloads nothing; its CIFAR10
also checks their md5s, which a stand-in cannot match: SimCLR runs with a ``sitecustomize``
that accepts the files (docs/realworld.md). None of the programs' code is here.
"""

from __future__ import annotations

import gzip
import json
import os
import pickle
import struct
import sys
from pathlib import Path

import numpy as np

LICENSES = Path("/usr/share/common-licenses")


def text(size: int) -> bytes:
    """``size`` bytes of the regular files of /usr/share/common-licenses, repeated to fill."""
    corpus = b"".join(p.read_bytes() for p in sorted(LICENSES.iterdir()) if p.is_file() and not p.is_symlink())
    return (corpus * (size // len(corpus) + 1))[:size]


def write(path: Path, data: bytes, compress: bool = False) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    if compress:
        with open(path, "wb") as raw, gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as fh:
            fh.write(data)
    else:
        path.write_bytes(data)
    print(f"wrote {path} ({path.stat().st_size} bytes)")


def mnist(folder: Path, n_train: int, n_test: int, compress: bool = False) -> None:
    """The four IDX files of MNIST (random pixels, labels 0-9)."""
    rng = np.random.RandomState(1234)
    suffix = ".gz" if compress else ""
    for split, n in (("train", n_train), ("t10k", n_test)):
        images = struct.pack(">IIII", 0x803, n, 28, 28) + rng.randint(0, 256, (n, 28, 28), dtype=np.uint8).tobytes()
        labels = struct.pack(">II", 0x801, n) + rng.randint(0, 10, n, dtype=np.uint8).tobytes()
        write(folder / f"{split}-images-idx3-ubyte{suffix}", images, compress)
        write(folder / f"{split}-labels-idx1-ubyte{suffix}", labels, compress)


def pngs(folder: Path, n: int, size: int) -> None:
    from PIL import Image

    rng = np.random.RandomState(1234)
    folder.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        Image.fromarray(rng.randint(0, 256, (size, size, 3), dtype=np.uint8), "RGB").save(folder / f"img_{i:03d}.png")
    print(f"wrote {n} PNG images of {size}x{size} in {folder}")


def cifar10(root: Path, n: int) -> None:
    folder = root / "cifar-10-batches-py"
    rng = np.random.RandomState(1234)
    for name in [f"data_batch_{i}" for i in range(1, 6)] + ["test_batch"]:
        entry = {"batch_label": name, "labels": [int(x) for x in rng.randint(0, 10, n)],
                 "data": rng.randint(0, 256, (n, 3072), dtype=np.uint8), "filenames": [f"{i}.png" for i in range(n)]}
        write(folder / name, pickle.dumps(entry, protocol=4))
    meta = {"num_cases_per_batch": n, "num_vis": 3072, "label_names": ["airplane", "automobile", "bird", "cat",
                                                                        "deer", "dog", "frog", "horse", "ship", "truck"]}
    write(folder / "batches.meta", pickle.dumps(meta, protocol=4))


def tokens(path: Path, count: int, offset: int) -> None:
    """A byte-level token stream (id = byte + 3; 0-2 kept for unk/bos/eos) as the int16
    memmap gau-nernst/gpt's tokenizer writes."""
    data = np.frombuffer(text(count + offset)[offset:], dtype=np.uint8).astype(np.int16) + 3
    path.parent.mkdir(parents=True, exist_ok=True)
    out = np.memmap(path, np.int16, "w+", 0, count)
    out[:] = data[:count]
    out.flush()
    print(f"wrote {path} ({count} tokens)")


def main(program: str, workdir: Path) -> None:
    if program == "char_rnn":
        write(workdir / "input.txt", text(150_000))
    elif program == "x_transformers":
        write(workdir / "data" / "enwik8.gz", text(90_000_000 + 65_536), compress=True)
    elif program == "jax_mnist":
        mnist(Path("/tmp/jax_example_data"), 2000, 500, compress=True)
    elif program == "dcgan":
        mnist(workdir / "data" / "mnist" / "MNIST" / "raw", 512, 128)
    elif program == "lit_mnist":
        mnist(workdir / "MNIST" / "raw", 60_000, 256)
    elif program == "pytorch_template":
        mnist(workdir / "data" / "MNIST" / "raw", 512, 128)
        config = json.loads((workdir / "config.json").read_text())
        config["trainer"].update(epochs=2, save_period=1)
        config["data_loader"]["args"]["batch_size"] = 64
        write(workdir / "config_small.json", json.dumps(config, indent=4).encode())
    elif program == "simclr":
        cifar10(workdir / "datasets", 64)
    elif program == "improved_diffusion":
        pngs(workdir / "data", 32, 32)
    elif program == "diffusers_uncond":
        pngs(workdir / "data", 16, 32)
        unet = {"_class_name": "UNet2DModel", "sample_size": 32, "in_channels": 3, "out_channels": 3,
                "layers_per_block": 1, "block_out_channels": [32, 64], "norm_num_groups": 8, "attention_head_dim": 8,
                "down_block_types": ["DownBlock2D", "AttnDownBlock2D"], "up_block_types": ["AttnUpBlock2D", "UpBlock2D"]}
        write(workdir / "unet_small.json", json.dumps(unet, indent=2).encode())
    elif program == "iterable_stream":
        tokens(workdir / "tiny_stories_train.bin", 200_000, 0)
        tokens(workdir / "tiny_stories_valid.bin", 20_000, 250_000)
    else:
        raise SystemExit(f"unknown program {program!r} (see this file's docstring)")


if __name__ == "__main__":
    if len(sys.argv) != 3:
        raise SystemExit(__doc__)
    main(sys.argv[1], Path(sys.argv[2]))
    os.sync()
