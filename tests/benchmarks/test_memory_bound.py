"""The statistics of benchmarks/memory_bound.py (RSS slope) and benchmarks/serve.py (latency percentiles)."""

from __future__ import annotations

import math

import pytest

from benchmarks.memory_bound import slope_mb_per_step
from benchmarks.serve import percentile


def test_slope_and_percentiles():
    assert slope_mb_per_step([100, 100, 10, 12, 14, 16]) == pytest.approx(2.0)  # the first two are skipped
    assert math.isnan(slope_mb_per_step([5, 5, 7]))  # too few points after the first two
    latencies = [float(value) for value in range(1, 101)]
    assert (percentile(latencies, 0.5), percentile(latencies, 0.9), percentile(latencies, 0.99)) == (50, 90, 99)
    assert percentile([3.0], 0.99) == 3.0 and percentile([2.0, 1.0], 0.5) == 1.0
