"""Aggregation is set by dftpass, one way or the other, whatever the environment says, and a
trace dftracer aggregated reads as the same counts (the real wheel, a real traced program)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from dftpass.traces import problems as P
from dftpass.traces import summarize

PROGRAM = '''
import os
from dftracer.python import ai, dftracer

log = dftracer.initialize_log(logfile=os.environ.get("DFTRACER_LOG_FILE"), data_dir=None, process_id=-1)
try:
    total = 0
    for batch in ai.dataloader.fetch.iter(range(200)):
        with ai.compute.forward:
            total += batch
    print("total", total)
finally:
    log.finalize()
'''


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    root = tmp_path_factory.mktemp("aggregation")
    (root / "prog.py").write_text(PROGRAM)
    # the user's environment asks for aggregation: dftpass sets it off unless --aggregate
    env = {**os.environ, "DFTRACER_ENABLE_AGGREGATION": "1"}
    for label, extra in (("plain", []), ("aggregated", ["--aggregate"])):
        subprocess.run([sys.executable, "-m", "dftpass", "-q", "trace", "--label", label, "--workspace",
                        str(root / "ws"), *extra, "--", sys.executable, "prog.py"], cwd=root, env=env, check=True,
                       capture_output=True)
    return root / "ws"


def _run(ws, label):
    return json.loads((ws / label / "run.json").read_text()), ws / label / "traces" / "compact" / "rep-1"


def test_aggregation_is_off_unless_asked_and_run_json_says_so(runs):
    record, traces = _run(runs, "plain")
    assert record["aggregation"] == {"enabled": False, "set_by": "dftpass (the default: every event written)"}
    assert record["repeats"][0]["environment"]["DFTRACER_ENABLE_AGGREGATION"] == "0"
    summary = summarize([traces])
    assert summary.by_key[("compute", "forward")].count == 200
    assert P.AGGREGATED not in {p.kind for p in summary.problems}


def test_an_aggregated_trace_from_dftracer_reads_as_the_same_counts(runs):
    record, traces = _run(runs, "aggregated")
    assert record["aggregation"] == {"enabled": True, "type": "SELECTIVE", "set_by": "--aggregate"}
    summary = summarize([traces])
    # dftracer folded the 200 forwards and fetches into ph 3 records; the reader counts them back
    assert summary.by_key[("compute", "forward")].count == 200
    assert summary.by_key[("dataloader", "fetch.iter")].count == 200
    assert P.AGGREGATED in {p.kind for p in summary.problems}
    plain = summarize([_run(runs, "plain")[1]])
    assert set(summary.by_key) == set(plain.by_key)
