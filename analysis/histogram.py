"""Latency histograms with log-spaced buckets: mergeable, bounded, and accurate to 0.5 %.

A value `x > 0` (milliseconds) falls in bucket `i = floor(ln(x) / ln(GAMMA))`, which holds
`[GAMMA**i, GAMMA**(i+1))`. A percentile is reported as its bucket's geometric middle,
`GAMMA**(i + 0.5)`, so it is within `sqrt(GAMMA) - 1` (0.499 %) of the exact nearest-rank
percentile of the same values, whatever their distribution. Zero (and anything not above
zero) has a bucket of its own and is reported exactly.

Why a histogram: it merges by adding counts (partial results from workers combine
exactly), and its size depends on the spread of the values, not their number: 1 ms to
10 minutes is about 1,340 buckets at most.

Histograms are plain `dict[int, int]` (bucket -> count) so the hot loops can update them
without a method call.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from typing import Final

#: Ratio between bucket edges.
GAMMA: Final = 1.01

#: Largest relative difference between a reported percentile and the exact one.
RELATIVE_ERROR: Final = math.sqrt(GAMMA) - 1

#: Multiply ln(x) by this and floor it to get x's bucket (hot loops inline it).
SCALE: Final = 1 / math.log(GAMMA)

#: The bucket of zero and of anything not above it.
ZERO: Final = -(2**31)

Histogram = dict[int, int]


def bucket(x: float) -> int:
    """The bucket of one value."""
    if x <= 0:
        return ZERO
    return math.floor(math.log(x) * SCALE)


def add(hist: Histogram, x: float) -> None:
    b = bucket(x)
    hist[b] = hist.get(b, 0) + 1


def merge_into[K: int | None](dst: dict[K, int], src: Mapping[K, int]) -> dict[K, int]:
    """Add `src`'s counts to `dst`; returns `dst`."""
    get = dst.get
    for b, n in src.items():
        dst[b] = get(b, 0) + n
    return dst


def merged(hists: Iterable[Mapping[int, int]]) -> Histogram:
    out: Histogram = {}
    for h in hists:
        merge_into(out, h)
    return out


def value_of(b: int) -> float:
    """The value a bucket reports: the geometric middle of its edges."""
    if b == ZERO:
        return 0.0
    return float(GAMMA ** (b + 0.5))  # float ** float is typed Any: it may be complex


def quantiles(hist: Mapping[int, int], qs: Sequence[float]) -> list[float | None]:
    """Nearest-rank percentiles (`q` in 0..1): the value at rank ceil(q * n), 1-based.

    None for an empty histogram.
    """
    n = sum(hist.values())
    if n == 0:
        return [None] * len(qs)
    ranks = [max(1, math.ceil(q * n - 1e-9)) for q in qs]
    out: list[float | None] = [None] * len(qs)
    order = sorted(range(len(qs)), key=lambda i: ranks[i])
    seen = 0
    k = 0
    for b in sorted(hist):
        seen += hist[b]
        while k < len(order) and ranks[order[k]] <= seen:
            out[order[k]] = value_of(b)
            k += 1
        if k == len(order):
            break
    return out
