"""`summary`: per group (a client, by default), what happened to its calls and how long they took.

Counts request records: every attempt is a call here (`retries` tells attempts from logical
calls). Workers fold each record into one "cell" per distinct combination of group,
origin (organic, a negotiation probe, or the fault rule that injected it), outcome, layer,
method, tool, JSON-RPC error code and last HTTP status, each holding a latency histogram.
Cells depend on the recordings' vocabulary, not their length, so memory stays flat. Each
worker rolls its cells up into the breakdowns the output lists, and the main process adds
those up.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Final

from . import histogram
from .filters import Filters
from .histogram import SCALE, ZERO
from .inputs import Task
from .render import Cell, Millis, Ratio
from .schema import NOT_FAILED, REQUEST, layer_rank, outcome_rank

#: What `--by` can group on (`cli.BY_CHOICES`), and the record field each reads.
DIMENSIONS: Final = {"client": "client", "version": "protocolVersion", "scenario": "scenario"}

#: Percentiles reported, as fractions.
PERCENTILES: Final = (0.50, 0.95, 0.99)

ORGANIC: Final = "organic"
INJECTED: Final = "injected"
#: A version-negotiation probe (`server/discover`, or a request the server refused so the
#: client fell back to `initialize`): part of a healthy start, never a failure of its own.
PROBE: Final = "probe"
DISCOVER: Final = "server/discover"


def is_probe(r: Any) -> bool:
    """Is this request record a negotiation probe? (It reads `negotiation` and `method`.)"""
    return r.negotiation is True or r.method == DISCOVER


#: Breakdowns in the order rows list them.
BREAKDOWNS: Final = (
    "all",
    "layer",
    "outcome",
    "method",
    "tool",
    "jsonrpc_error",
    "http_status",
    "rule",
)

# A cell key: (group, rule, probe, outcome, layer, method, tool, errorCode, last status).
# `rule` is None for organic calls, else the injecting rule's name ("" when it has none).
CellKey = tuple[
    Any, str | None, bool, str | None, str | None, str | None, str | None, int | None, int | None
]
#: A histogram (bucket -> count) whose None bucket counts the calls that have no duration.
Counts = dict[int | None, int]
Cells = dict[CellKey, Counts]

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


def group_getter(by: Sequence[str]) -> Any:
    """A function from a record to its group: the `--by` value, or a tuple of them.

    One dimension gives the bare value (no tuple to build per record); `as_tuple` below
    turns either form into a tuple.
    """
    return attrgetter(*(DIMENSIONS[d] for d in by))


def as_tuple(group: Any, dims: int) -> tuple[Any, ...]:
    return (group,) if dims == 1 else tuple(group)


def fold(records: list[Any], cells: Cells, group_of: Any, keep: Any) -> None:
    """Add request records to the cells (the hot loop: keep it lean).

    `cells` is a defaultdict of defaultdict(int); `group_of` None means `r.client`, read
    directly as it is by far the most common grouping.
    """
    log = math.log
    floor = math.floor
    for r in records:
        if r.kind != REQUEST:
            continue
        if keep is not None and not keep(r):
            continue
        d = r.durationMs
        if d is None:
            b = None  # counted, but has no latency
        elif d > 0:
            b = floor(log(d) * SCALE)
        else:
            b = ZERO
        j = r.jsonrpc
        st = r.httpStatuses
        inj = r.injected
        cells[
            (
                r.client if group_of is None else group_of(r),
                None if inj is None else (inj.rule or ""),
                r.negotiation is True or r.method == DISCOVER,  # is_probe, inlined
                r.outcome,
                r.layer,
                r.method,
                r.tool,
                None if j is None else j.errorCode,
                st[-1] if st else None,
            )
        ][b] += 1


def new_cells() -> Cells:
    return defaultdict(_new_counts)


def _new_counts() -> Counts:
    return defaultdict(int)


class SummaryJob:
    """The engine job for `summary` (and the summary half of `compare`)."""

    def __init__(self, by: Sequence[str], filters: Filters) -> None:
        self.by = tuple(by)
        self.filters = filters
        base = (
            "kind",
            "durationMs",
            "method",
            "tool",
            "httpStatuses",
            "jsonrpc",
            "outcome",
            "layer",
            "injected",
            "negotiation",
        )
        wanted = (*base, *(DIMENSIONS[d] for d in self.by), *filters.fields())
        self.fields = tuple(dict.fromkeys(wanted))
        self.rolled: Rolled = {}

    # worker side
    def new_state(self) -> Cells:
        self._group = None if self.by == ("client",) else group_getter(self.by)
        self._keep = self.filters.predicate()
        return new_cells()

    def feed(self, state: Cells, records: list[Any], task: Task) -> None:
        fold(records, state, self._group, self._keep)

    def end_task(self, state: Cells, task: Task) -> None:
        return None

    def end_worker(self, state: Cells) -> Rolled:
        # Rolled up here, in parallel, rather than in the main process after the workers
        # are done: the breakdowns are no bigger to send and merge than the cells.
        return roll_up(state, len(self.by))

    # main side
    def consume(self, part: None, task: Task) -> None:
        pass

    def merge(self, result: Rolled) -> None:
        for key, bd in result.items():
            mine = self.rolled.get(key)
            if mine is None:
                self.rolled[key] = bd
            else:
                mine.merge(bd)


# --------------------------------------------------------------------- rolling up


@dataclass(slots=True)
class Tally:
    """Calls, failed calls and latencies of one row."""

    calls: int = 0
    failed: int = 0
    hist: Counts = field(default_factory=dict)

    def add(self, n: int, failed: bool, hist: Counts) -> None:
        self.calls += n
        if failed:
            self.failed += n
        histogram.merge_into(self.hist, hist)

    def merge(self, other: Tally) -> None:
        self.calls += other.calls
        self.failed += other.failed
        histogram.merge_into(self.hist, other.hist)

    def percentiles(self) -> list[float | None]:
        timed = {b: n for b, n in self.hist.items() if b is not None}
        return histogram.quantiles(timed, PERCENTILES)


@dataclass(slots=True)
class Breakdown:
    """One group and origin: a tally per breakdown and key."""

    total: Tally = field(default_factory=Tally)
    parts: dict[str, dict[Any, Tally]] = field(
        default_factory=lambda: {b: {} for b in BREAKDOWNS[1:]}
    )

    def add(self, name: str, key: Any, n: int, failed: bool, hist: Counts) -> None:
        section = self.parts[name]
        t = section.get(key)
        if t is None:
            t = section[key] = Tally()
        t.add(n, failed, hist)

    def merge(self, other: Breakdown) -> None:
        self.total.merge(other.total)
        for name, section in other.parts.items():
            mine = self.parts[name]
            for key, t in section.items():
                if key in mine:
                    mine[key].merge(t)
                else:
                    mine[key] = t


#: (group tuple, origin) -> breakdown.
Rolled = dict[tuple[Any, str], Breakdown]


def roll_up(cells: Cells, dims: int) -> Rolled:
    """(group tuple, origin) -> breakdown; origin is "organic", "probe" or "injected".

    A probe's refusal is how negotiation works, so probes never count as failed."""
    out: Rolled = {}
    for (raw_group, rule, probe, outcome, layer, method, tool, code, status), hist in cells.items():
        group = as_tuple(raw_group, dims)
        origin = INJECTED if rule is not None else PROBE if probe else ORGANIC
        bd = out.get((group, origin))
        if bd is None:
            bd = out[(group, origin)] = Breakdown()
        n = sum(hist.values())
        failed = origin != PROBE and outcome not in NOT_FAILED
        bd.total.add(n, failed, hist)
        bd.add("layer", layer, n, failed, hist)
        bd.add("outcome", outcome, n, failed, hist)
        if method is not None:
            bd.add("method", method, n, failed, hist)
        if tool is not None:
            bd.add("tool", tool, n, failed, hist)
        if code is not None:
            bd.add("jsonrpc_error", code, n, failed, hist)
        if status is not None:
            bd.add("http_status", status, n, failed, hist)
        if rule is not None:
            bd.add("rule", rule, n, failed, hist)
    return out


def _ordered(name: str, section: dict[Any, Tally], top: int) -> list[tuple[Any, Tally]]:
    items = list(section.items())
    if name == "layer":
        return sorted(items, key=lambda kv: layer_rank(kv[0] or ""))
    if name == "outcome":
        return sorted(items, key=lambda kv: outcome_rank(kv[0] or ""))
    items.sort(key=lambda kv: (-kv[1].calls, str(kv[0])))
    if name in ("jsonrpc_error", "http_status"):
        return items[:top]
    return items


def label(value: Any) -> str:
    """A group value or key as text: None reads `(none)`."""
    return "(none)" if value is None else str(value)


def group_sort_key(group: tuple[Any, ...]) -> tuple[str, ...]:
    return tuple(label(g) for g in group)


def headers(by: Sequence[str]) -> tuple[str, ...]:
    return (*by, *HEADERS_TAIL)


def rows(rolled: Rolled, *, top: int) -> Iterator[list[Cell]]:
    """Rows for `summary`: per group, organic first, then probes, then injected."""
    keys = sorted(rolled, key=lambda k: (group_sort_key(k[0]), _ORIGIN_ORDER[k[1]]))
    for group, origin in keys:
        bd = rolled[(group, origin)]
        lead: list[Cell] = [label(g) for g in group]
        total = bd.total.calls
        yield [*lead, origin, "all", None, *_numbers(bd.total, total)]
        for name in BREAKDOWNS[1:]:
            for key, tally in _ordered(name, bd.parts[name], top):
                yield [*lead, origin, name, label(key), *_numbers(tally, total)]


_ORIGIN_ORDER: Final = {ORGANIC: 0, PROBE: 1, INJECTED: 2}


def _numbers(t: Tally, total: int) -> list[Cell]:
    p = t.percentiles()
    return [
        t.calls,
        Ratio(t.calls / total) if total else None,
        t.failed,
        Ratio(t.failed / t.calls) if t.calls else None,
        *(None if v is None else Millis(round(v, 3)) for v in p),
    ]
