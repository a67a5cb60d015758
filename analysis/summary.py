"""`summary`: per group (a client, by default), what happened to its calls and how long they took.

Counts request records: every attempt is a call here (`retries` tells attempts from logical
calls). The figures are one query (`queries.summary`); this module names the columns and
formats the cells.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Final

from . import histogram
from .filters import Filters
from .load import Engine, Row
from .queries import DIMENSIONS, summary
from .render import Cell, Millis, Ratio

__all__ = ["DIMENSIONS", "HEADERS_TAIL", "headers", "label", "millis", "rows", "tallies"]

ORGANIC: Final = "organic"
INJECTED: Final = "injected"
#: A version-negotiation probe (`server/discover`, or a request the server refused so the
#: client fell back to `initialize`): part of a healthy start, never a failure of its own.
PROBE: Final = "probe"

HEADERS_TAIL: Final = (
    "origin",
    "breakdown",
    "key",
    "calls",
    "share",
    "failed",
    "failure_rate",
    "p50_ms",
    "p95_ms",
    "p99_ms",
)


def label(value: Any) -> str:
    """A group value or key as text: None reads `(none)`."""
    return "(none)" if value is None else str(value)


def millis(bucket: int | None) -> Millis | None:
    """A latency bucket as the milliseconds it reports."""
    return None if bucket is None else Millis(round(histogram.value_of(bucket), 3))


def headers(by: Sequence[str]) -> tuple[str, ...]:
    return (*by, *HEADERS_TAIL)


def tallies(engine: Engine, by: Sequence[str], filters: Filters, top: int | None) -> list[Row]:
    """The summary query's rows, as the engine gives them."""
    return engine.rows(summary(by, filters, top))


def rows(engine: Engine, by: Sequence[str], filters: Filters, *, top: int) -> list[list[Cell]]:
    """Rows for `summary`: per group, organic first, then probes, then injected."""
    dims = len(by)
    out: list[list[Cell]] = []
    for row in tallies(engine, by, filters, top):
        group, rest = row[:dims], row[dims:]
        origin, breakdown, key, calls, share, failed, rate, p50, p95, p99 = rest
        out.append(
            [
                *(label(g) for g in group),
                origin,
                breakdown,
                None if breakdown == "all" else label(key),
                calls,
                None if share is None else Ratio(share),
                failed,
                None if rate is None else Ratio(rate),
                millis(p50),
                millis(p95),
                millis(p99),
            ]
        )
    return out
