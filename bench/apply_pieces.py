"""The apply stage of ``dftpass plan`` two ways, side by side, on the same edits:
regenerating only the statements that hold an edit (core/pieces.py, the default) and
regenerating whole files (the fallback, and the test oracle).

    .venv/bin/python bench/apply_pieces.py FOLDER [--repeats 3]

Plans FOLDER once (every rule, ``project.kind=program``, ``--jobs 1``), then applies the
same edit sets both ways, alternating, ``--repeats`` times, and says: the medians of each,
their ratio, and whether every file came out byte-identical (the number of files that
differ must be 0; files whose pieces could not be cut are transformed whole and counted).
"""

from __future__ import annotations

import argparse
import gc
import statistics
import sys
import time
from pathlib import Path

import dftpass.core.pieces as pieces
from dftpass.core import apply, pipeline
from dftpass.core.config import cli_overrides, load_config


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path)
    parser.add_argument("--repeats", type=int, default=3)
    args = parser.parse_args()

    root = args.folder.resolve()
    config = load_config(root, cli_overrides(None, None, 1, ["project.kind=program"]))
    captured = []
    real_apply = pipeline._apply_all
    pipeline._apply_all = lambda r, items, jobs: captured.extend(items) or []
    result = pipeline.annotate(root, config, "plan", jobs=1)
    pipeline._apply_all = real_apply
    sources = {rel: (root / rel).read_bytes() for rel, _, _ in captured}
    print(f"{root}: {result.n_files} files read, {len(sources)} with edits, "
          f"{sum(len(es.edits) for _, es, _ in captured)} edits, {sum(map(len, sources.values())):,} bytes")

    cut_by = pieces.apply_in_pieces
    whole_file = (lambda *a: None)  # noqa: E731 - the fallback path: transform the whole file

    def run(cut) -> tuple[float, dict[str, bytes | None], int]:
        pieces.apply_in_pieces = cut
        gc.disable()
        start = time.perf_counter()
        out = {rel: apply.apply_edits(rel, sources[rel], es, anchor) for rel, es, anchor in captured}
        seconds = time.perf_counter() - start
        gc.enable()
        pieces.apply_in_pieces = cut_by
        return seconds, {rel: a.new for rel, a in out.items()}, sum(1 for a in out.values() if a.error)

    timings: dict[str, list[float]] = {"pieces": [], "whole files": []}
    outputs = {}
    for _ in range(args.repeats):
        for name, cut in (("pieces", cut_by), ("whole files", whole_file)):
            seconds, outputs[name], errors = run(cut)
            timings[name].append(seconds)
    cut_fallbacks = sum(1 for rel, es, anchor in captured if _uncut(sources[rel], es, anchor))
    differ = [rel for rel in sources if outputs["pieces"][rel] != outputs["whole files"][rel]]
    print("\n| apply stage | median s |\n|---|---|")
    for name, values in timings.items():
        print(f"| {name} | {statistics.median(values):.2f} |")
    ratio = statistics.median(timings["whole files"]) / statistics.median(timings["pieces"])
    print(f"\npieces are {ratio:.1f}x faster; files that differ: {len(differ)}; files transformed whole "
          f"(not cut): {cut_fallbacks}; files left untouched (errors, both ways): {errors}")
    for rel in differ[:10]:
        print(f"  differs: {rel}")
    return 1 if differ else 0


def _uncut(source: bytes, edit_set, anchor: int) -> bool:
    try:
        return pieces.apply_in_pieces(source, edit_set, anchor) is None
    except Exception:  # noqa: BLE001 - the whole-file transform then reports it
        return True


if __name__ == "__main__":
    sys.exit(main())
