"""Fixtures of the trace tests: a real run traced on the fly (the committed ones are in
``trace_data``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from tests.traces.trace_data import TRACES


@pytest.fixture(scope="session")
def ns_run(tmp_path_factory) -> Path:
    """A real run traced right now, with DFTRACER_TIME_METRIC=NS (one epoch: ~4 s)."""
    out = tmp_path_factory.mktemp("ns_run")
    subprocess.run([sys.executable, str(TRACES / "make_real.py"), str(out), "--epochs", "1", "--time-metric", "NS"],
                   check=True, capture_output=True)
    return out
