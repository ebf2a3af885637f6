"""A mergeable duration histogram with fixed log buckets: exact counts, approximate quantiles.

Why not exact quantiles: they need every duration in memory, and memory must not grow with
the trace. Why this sketch: its buckets are the same everywhere (no data-dependent edges),
so two sketches merge by adding counts, in any order, across processes or a Dask reduce.

Buckets: 0 for durations <= 0, then ``SUB`` = 16 buckets per power of two of nanoseconds
(bucket width = 1/16 of its lower edge). A quantile is reported as the midpoint of the bucket
that holds it, so it lies within ``1/(2*SUB)`` = 3.125% of the true sample quantile, and
clamped to the exact smallest and largest duration seen (one event of 4207 ms is a p99 of
4207 ms, not its bucket's midpoint of 4290 ms). 1024 buckets cover up to 2^63 ns; a sketch
stores only its non-empty range.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

SUB = 16
NBINS = 64 * SUB
RELATIVE_ERROR = 1 / (2 * SUB)


def bins_of(values_ns: np.ndarray) -> np.ndarray:
    """The bucket of each duration (int64 array)."""
    mantissa, exponent = np.frexp(np.maximum(values_ns, 0).astype(np.float64))
    bins = exponent.astype(np.int64) * SUB + ((mantissa - 0.5) * (2 * SUB)).astype(np.int64)
    return np.maximum(bins, 0)  # frexp(0) = (0, 0) lands below 0: bucket 0


def bucket_mid(index: int) -> float:
    """The representative value (midpoint, ns) of a bucket."""
    if index <= 0:
        return 0.0
    exponent, step = divmod(index, SUB)
    low = math.ldexp(1.0 + step / SUB, exponent - 1)
    return low * (1 + 0.5 / SUB)


@dataclass
class LogHistogram:
    """Counts of durations per bucket, stored as ``counts`` for buckets ``offset...``."""

    counts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64))
    offset: int = 0
    #: the exact smallest and largest duration counted (ns); None when not known
    min_ns: int | None = None
    max_ns: int | None = None

    @classmethod
    def from_dense(cls, dense: np.ndarray, min_ns: int | None = None, max_ns: int | None = None) -> LogHistogram:
        """From a full ``NBINS`` array, keeping only the non-empty range."""
        nonzero = np.flatnonzero(dense)
        if not len(nonzero):
            return cls()
        lo, hi = int(nonzero[0]), int(nonzero[-1]) + 1
        return cls(dense[lo:hi].astype(np.int64, copy=True), lo, min_ns, max_ns)

    @property
    def total(self) -> int:
        return int(self.counts.sum())

    def merge(self, other: LogHistogram) -> None:
        if not len(other.counts):
            return
        if not len(self.counts):
            self.counts, self.offset = other.counts.copy(), other.offset
            self.min_ns, self.max_ns = other.min_ns, other.max_ns
            return
        # a bound is known only when both sides know theirs
        self.min_ns = None if self.min_ns is None or other.min_ns is None else min(self.min_ns, other.min_ns)
        self.max_ns = None if self.max_ns is None or other.max_ns is None else max(self.max_ns, other.max_ns)
        lo = min(self.offset, other.offset)
        hi = max(self.offset + len(self.counts), other.offset + len(other.counts))
        merged = np.zeros(hi - lo, np.int64)
        merged[self.offset - lo:self.offset - lo + len(self.counts)] += self.counts
        merged[other.offset - lo:other.offset - lo + len(other.counts)] += other.counts
        self.counts, self.offset = merged, lo

    def quantile(self, q: float) -> float:
        """The q-quantile (0 < q <= 1) in ns: the smallest bucket holding ceil(q*n) values."""
        n = self.total
        if not n:
            return math.nan
        rank = max(1, math.ceil(q * n))
        if rank == n and self.max_ns is not None:  # the largest and smallest values are known exactly
            return float(self.max_ns)
        if rank == 1 and self.min_ns is not None:
            return float(self.min_ns)
        index = int(np.searchsorted(np.cumsum(self.counts), rank))
        value = bucket_mid(self.offset + index)
        if self.max_ns is not None:
            value = min(value, float(self.max_ns))
        if self.min_ns is not None:
            value = max(value, float(self.min_ns))
        return value
