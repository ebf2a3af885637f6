"""The quantile sketch: exact counts, bounded relative error, merge = add."""

from __future__ import annotations

import numpy as np
import pytest

from dftpass.traces.sketch import RELATIVE_ERROR, LogHistogram, bins_of, bucket_mid


def sketch_of(values: np.ndarray) -> LogHistogram:
    return LogHistogram.from_dense(np.bincount(bins_of(values), minlength=1024))


@pytest.mark.parametrize("q", [0.01, 0.5, 0.9, 0.99, 1.0])
def test_quantiles_within_the_documented_error(q):
    values = np.random.default_rng(1).lognormal(12, 2, 50_000).astype(np.int64) + 1
    exact = np.sort(values)[int(np.ceil(q * len(values))) - 1]
    assert abs(sketch_of(values).quantile(q) - exact) <= RELATIVE_ERROR * exact


def test_merge_equals_the_sketch_of_all():
    values = np.random.default_rng(2).integers(0, 10**9, 10_000)
    merged = sketch_of(values[:3000])
    merged.merge(sketch_of(values[3000:]))
    whole = sketch_of(values)
    assert merged.total == whole.total == 10_000
    assert merged.offset == whole.offset and np.array_equal(merged.counts, whole.counts)


def test_zero_and_empty():
    assert bins_of(np.array([0, -5, 1])).tolist()[:2] == [0, 0]
    assert bucket_mid(0) == 0.0
    assert sketch_of(np.zeros(5, np.int64)).quantile(0.99) == 0.0
    assert np.isnan(LogHistogram().quantile(0.5))


def test_quantiles_never_leave_the_observed_range():
    """One event of 4207 ms showed a p99 of 4290 ms (its bucket's midpoint)."""
    one = LogHistogram.from_dense(np.bincount(bins_of(np.array([4_207_000_000])), minlength=1024),
                                  4_207_000_000, 4_207_000_000)
    assert one.quantile(0.99) == one.quantile(0.5) == 4_207_000_000
    values = np.array([1_000, 1_030, 4_207_000_000])
    many = LogHistogram.from_dense(np.bincount(bins_of(values), minlength=1024), 1_000, 4_207_000_000)
    assert 1_000 <= many.quantile(0.01) and many.quantile(1.0) == 4_207_000_000
    other = LogHistogram.from_dense(np.bincount(bins_of(np.array([5])), minlength=1024), 5, 5)
    many.merge(other)
    assert (many.min_ns, many.max_ns) == (5, 4_207_000_000) and many.quantile(0.01) == 5


def test_a_summary_s_p99_of_one_event_is_that_event(tmp_path):
    from dftpass.traces import summarize

    from tests.analysis.helpers import event, write_trace

    path = write_trace(tmp_path / "t-0000000000000001-app.pfw", [event("compute", "forward", 10, 4_207_000)])
    stats = summarize([path]).by_key[("compute", "forward")]
    assert stats.p99_s == stats.p50_s == pytest.approx(4.207, abs=1e-12)
