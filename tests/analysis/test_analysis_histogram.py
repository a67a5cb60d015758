"""Percentiles from log buckets stay within the documented error, and merge exactly."""

from __future__ import annotations

import math
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st
from mcp_layers_analysis import histogram
from mcp_layers_analysis.histogram import RELATIVE_ERROR

durations = st.floats(0.0, 3_600_000.0, allow_nan=False) | st.sampled_from([0.0, 0.1, 1.0])
qs = st.sampled_from([0.0, 0.01, 0.5, 0.9, 0.95, 0.99, 0.999, 1.0])


def exact(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[max(1, math.ceil(Fraction(str(q)) * len(ordered))) - 1]


@settings(max_examples=500)
@given(values=st.lists(durations, min_size=1, max_size=300), q=qs)
def test_percentiles_are_within_the_relative_error(values: list[float], q: float) -> None:
    hist: histogram.Histogram = {}
    for v in values:
        histogram.add(hist, v)
    (got,) = histogram.quantiles(hist, [q])
    want = exact(values, q)
    assert got is not None
    assert abs(got - want) <= want * RELATIVE_ERROR * (1 + 1e-9)


@given(a=st.lists(durations, max_size=100), b=st.lists(durations, max_size=100))
def test_merging_is_the_same_as_one_histogram(a: list[float], b: list[float]) -> None:
    def of(values: list[float]) -> histogram.Histogram:
        h: histogram.Histogram = {}
        for v in values:
            histogram.add(h, v)
        return h

    assert histogram.merged([of(a), of(b)]) == of(a + b)


def test_the_bound_is_half_a_percent() -> None:
    assert 0.0049 < RELATIVE_ERROR < 0.005


def test_empty_and_zero() -> None:
    assert histogram.quantiles({}, [0.5]) == [None]
    h: histogram.Histogram = {}
    histogram.add(h, 0.0)
    assert histogram.quantiles(h, [0.5, 1.0]) == [0.0, 0.0]


def test_size_depends_on_spread_not_count() -> None:
    h: histogram.Histogram = {}
    for i in range(100_000):
        histogram.add(h, 1.0 + (i % 1000) * 600.0)  # 1 ms .. 10 minutes
    assert len(h) < 1400
