"""`retries`: how each client retried, and whether its retries made sense.

Definitions (see docs/cli.md):

- a failed call is a request record whose outcome is not SUCCESS, TOOL_SUCCESS or
  INPUT_REQUIRED; it was retried when a later record's `retryOf` names it;
- a logical call is a chain of attempts linked by `retryOf` (its first has none);
- a futile retry repeats an attempt answered JSONRPC_ERROR -32602 (invalid params): the
  retry has the same method and params, so it cannot succeed;
- a session ended by 404 has a request answered 404 last or a `session_end` with
  `endReason` not_found; it was re-initialised when a later `initialize` names it in
  `previousSession`;
- an input-required result was continued when a later record's `continues` names it; the
  continuation chain (further input-required turns, retries of a turn) completed when it
  ended in SUCCESS or TOOL_SUCCESS.

The figures are queries (`queries.retry_*`): sums over the matched request records, and
figures that follow `retryOf`, `continues` and `previousSession` links in input order
(window functions, self-joins and, for continuation chains, a recursive CTE). This module
gathers them per group and formats them.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from mcp_layers_core.record import RETRY_ORIGINS

from . import forensics, queries
from .filters import Filters
from .histogram import value_of
from .load import Engine
from .render import Cell, Millis, Ratio
from .schema import outcome_rank
from .summary import label

HEADERS_TAIL: Final = ("figure", "value", "of", "share")


@dataclass(slots=True)
class Counts:
    """The sums one group's records add up to (kept by each worker, then added)."""

    requests: int = 0
    failed: dict[str | None, int] = field(default_factory=dict)
    logical: int = 0
    retries: int = 0
    second_attempts: int = 0
    max_attempt: int = 0
    delay_p50: float | None = None
    delay_p95: float | None = None
    origins: dict[str, int] = field(default_factory=dict)
    retry_after: int = 0
    honoured: int = 0
    not_honoured: int = 0
    unsafe: int = 0
    input_required: int = 0


@dataclass(slots=True)
class Links:
    """What following links found for one group (kept by the main process)."""

    retried: dict[str | None, int] = field(default_factory=dict)
    futile: int = 0
    ended_404: int = 0
    reinitialised: int = 0
    continued: int = 0
    completed: int = 0


# --------------------------------------------------------------------- figures


@dataclass(frozen=True, slots=True)
class Figure:
    """One figure: `value`, and for a part of a whole, the whole (`of`)."""

    name: str
    value: float | int | None
    of: int | None = None
    unit: str = "count"  # count, ms or mean

    @property
    def share(self) -> float | None:
        if self.of is None or not self.of or self.value is None:
            return None
        return self.value / self.of


def figures(c: Counts, links: Links, outcomes: Iterable[str | None] | None = None) -> list[Figure]:
    """Every retries figure of one group, in the order tables list them.

    `outcomes` lists the failed outcomes to give a row each (default: this group's), so
    that groups side by side can have the same rows.
    """
    failed = sum(c.failed.values())
    retried = sum(links.retried.values())
    p50, p95 = c.delay_p50, c.delay_p95
    out = [
        Figure("calls", c.requests),
        Figure("failed calls", failed, c.requests),
        Figure("failed calls retried", retried, failed),
    ]
    for outcome in sorted(
        c.failed if outcomes is None else outcomes, key=lambda o: outcome_rank(o or "")
    ):
        out.append(
            Figure(
                f"failed calls retried: {label(outcome)}",
                links.retried.get(outcome, 0),
                c.failed.get(outcome, 0),
            )
        )
    out += [
        Figure("logical calls", c.logical),
        Figure(
            "attempts per logical call", c.requests / c.logical if c.logical else None, unit="mean"
        ),
        Figure("most attempts of one call", c.max_attempt or None),
        Figure("logical calls retried", c.second_attempts, c.logical),
        Figure("retries", c.retries),
        Figure("retry delay p50", p50, unit="ms"),
        Figure("retry delay p95", p95, unit="ms"),
    ]
    for origin in (*RETRY_ORIGINS, *sorted(set(c.origins) - set(RETRY_ORIGINS))):
        if origin in RETRY_ORIGINS or c.origins.get(origin):
            out.append(Figure(f"retries: {origin}", c.origins.get(origin, 0), c.retries))
    out += [
        Figure("responses with Retry-After", c.retry_after),
        Figure("Retry-After honoured", c.honoured, c.honoured + c.not_honoured),
        Figure("unsafe retries", c.unsafe, c.retries),
        Figure("futile retries (-32602 repeated)", links.futile, c.retries),
        Figure("sessions ended by 404", links.ended_404),
        Figure(
            "sessions ended by 404, never re-initialised",
            links.ended_404 - links.reinitialised,
            links.ended_404,
        ),
        Figure("input-required results", c.input_required),
        Figure("input-required results continued", links.continued, c.input_required),
        Figure("continued results whose chain completed", links.completed, links.continued),
    ]
    return out


def all_figures(
    engine: Engine, by: Sequence[str], filters: Filters, *, same_rows: bool = False
) -> dict[tuple[Any, ...], list[Figure]]:
    """Group tuple -> figures, for every group with records, in group order.

    `same_rows` gives every group a row for each failed outcome any group has.
    """
    dims = len(by)
    counts: dict[tuple[Any, ...], Counts] = {}
    links: dict[tuple[Any, ...], Links] = {}

    def c_of(g: tuple[Any, ...]) -> Counts:
        return counts.setdefault(g, Counts())

    def l_of(g: tuple[Any, ...]) -> Links:
        return links.setdefault(g, Links())

    for row in engine.rows(queries.retry_counts(by, filters)):
        c = c_of(row[:dims])
        (
            c.requests,
            c.input_required,
            c.logical,
            c.retries,
            c.second_attempts,
            c.max_attempt,
            c.retry_after,
            c.honoured,
            c.not_honoured,
            c.unsafe,
        ) = (int(x) for x in row[dims:])
    for row in engine.rows(queries.retry_failed(by, filters)):
        c_of(row[:dims]).failed[row[dims]] = int(row[dims + 1])
    for row in engine.rows(queries.retry_origins(by, filters)):
        c_of(row[:dims]).origins[row[dims]] = int(row[dims + 1])
    for row in engine.rows(queries.retry_delays(by, filters)):
        c = c_of(row[:dims])
        c.delay_p50, c.delay_p95 = (None if b is None else value_of(b) for b in row[dims:])
    for row in engine.rows(queries.retry_retried(by, filters)):
        l_of(row[:dims]).retried[row[dims]] = int(row[dims + 1])
    for row in engine.rows(queries.retry_links(by, filters)):
        lk = l_of(row[:dims])
        lk.futile, lk.ended_404, lk.reinitialised, lk.continued, lk.completed = (
            int(x) for x in row[dims:]
        )
    groups = set(counts) | set(links)
    outcomes = {o for c in counts.values() for o in c.failed} if same_rows else None
    return {
        g: figures(counts.get(g, Counts()), links.get(g, Links()), outcomes)
        for g in sorted(groups, key=group_sort_key)
    }


def add_stalls(
    figs: dict[tuple[Any, ...], list[Figure]],
    groups: dict[tuple[Any, ...], tuple[int, int, int | None]],
) -> None:
    """Hang forensics, in the groups where a client went silent after a failure or a cut
    stream: how often, and the longest silence (groups without a stall get no rows).
    `groups`: `forensics.stall_groups`."""
    for key, (count, stalls, longest) in groups.items():
        if not stalls or key not in figs:
            continue
        figs[key] += [
            Figure(
                f"failures and cut streams followed by a stall (>= {forensics.STALL_MS // 1000} s "
                "without a request)",
                stalls,
                count,
            ),
            Figure("longest silence after a failure or cut stream", longest, unit="ms"),
        ]


def group_sort_key(group: tuple[Any, ...]) -> tuple[str, ...]:
    return tuple(label(g) for g in group)


def headers(by: Sequence[str]) -> tuple[str, ...]:
    return (*by, *HEADERS_TAIL)


def rows(figs: dict[tuple[Any, ...], list[Figure]]) -> Iterator[list[Cell]]:
    for group, fs in figs.items():
        lead: list[Cell] = [label(g) for g in group]
        for f in fs:
            yield [*lead, f.name, cell(f), f.of, None if f.share is None else Ratio(f.share)]


def cell(f: Figure) -> Cell:
    if f.value is None:
        return None
    if f.unit == "ms":
        return Millis(round(f.value, 3))
    return f.value
