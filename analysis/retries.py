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

Most figures are sums each worker keeps. The rest follow links between records: workers
pass the few records that can link (failed, input-required, retries, continuations, 404s,
re-initialisations) as small tuples, and the main process follows the links in input order
with bounded state (`limits.MAX_LINK_CANDIDATES`, `limits.MAX_ENDED_SESSIONS`).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from . import histogram
from .filters import Filters
from .histogram import Histogram
from .inputs import Task
from .limits import MAX_ENDED_SESSIONS, MAX_LINK_CANDIDATES
from .render import Cell, Millis, Ratio
from .schema import (
    COMPLETED,
    HTTP_NOT_FOUND,
    INITIALIZE,
    INPUT_REQUIRED,
    INVALID_PARAMS,
    JSONRPC_ERROR,
    NOT_FAILED,
    NOT_FOUND,
    REQUEST,
    RETRY_ORIGINS,
    SESSION_END,
    outcome_rank,
)
from .summary import DIMENSIONS, as_tuple, group_getter, group_sort_key, is_probe, label

FIELDS: Final = (
    "id",
    "kind",
    "session",
    "client",
    "method",
    "httpStatuses",
    "jsonrpc",
    "outcome",
    "attempt",
    "retryOf",
    "retryOrigin",
    "retryDelayMs",
    "retryAfterMs",
    "retryAfterHonored",
    "unsafeRetry",
    "continues",
    "previousSession",
    "negotiation",
    "endReason",
)

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
    delays: Histogram = field(default_factory=dict)
    origins: dict[str, int] = field(default_factory=dict)
    retry_after: int = 0
    honoured: int = 0
    not_honoured: int = 0
    unsafe: int = 0
    input_required: int = 0

    def add(self, other: Counts) -> None:
        self.requests += other.requests
        _add_counts(self.failed, other.failed)
        self.logical += other.logical
        self.retries += other.retries
        self.second_attempts += other.second_attempts
        self.max_attempt = max(self.max_attempt, other.max_attempt)
        histogram.merge_into(self.delays, other.delays)
        _add_counts(self.origins, other.origins)
        self.retry_after += other.retry_after
        self.honoured += other.honoured
        self.not_honoured += other.not_honoured
        self.unsafe += other.unsafe
        self.input_required += other.input_required


@dataclass(slots=True)
class Links:
    """What following links found for one group (kept by the main process)."""

    retried: dict[str | None, int] = field(default_factory=dict)
    futile: int = 0
    ended_404: int = 0
    reinitialised: int = 0
    continued: int = 0
    completed: int = 0


def _add_counts(into: dict[Any, int], other: dict[Any, int]) -> None:
    for k, n in other.items():
        into[k] = into.get(k, 0) + n


# A link event: (segment, id, group, matched, outcome, errorCode, retryOf, continues,
# session, previousSession, ended_by_404).
#
# Segments tell proxy runs apart, since ids restart at 1 in each run. Ids are handed out
# as requests arrive but records are written as exchanges end, so ids are not in order
# in a file; what marks a new run is id 1 coming round again. A run's rotated parts
# (`mcp-…-002.jsonl`) carry on its ids, so segments carry on across inputs. A task
# numbers its segments locally: segment k starts at the task's k-th record with id 1.
Event = tuple[int, Any, Any, bool, Any, Any, Any, Any, Any, Any, bool]

FIRST_ID: Final = 1


@dataclass(slots=True)
class _WorkerState:
    counts: dict[Any, Counts]
    events: list[Event] = field(default_factory=list)
    segment: int = 0  # records with id 1 seen in this task so far


@dataclass(frozen=True, slots=True)
class TaskPart:
    events: list[Event]
    ones: int  # records with id 1 in the task


class RetriesJob:
    """The engine job for `retries` (and the retries half of `compare`)."""

    def __init__(self, by: Sequence[str], filters: Filters) -> None:
        self.by = tuple(by)
        self.filters = filters
        wanted = (*FIELDS, *(DIMENSIONS[d] for d in self.by), *filters.fields())
        self.fields = tuple(dict.fromkeys(wanted))
        self.counts: dict[Any, Counts] = {}
        self.linker = Linker()

    # worker side
    def new_state(self) -> _WorkerState:
        self._group = group_getter(self.by)
        self._keep = self.filters.predicate()
        return _WorkerState(defaultdict(Counts))

    def feed(self, state: _WorkerState, records: list[Any], task: Task) -> None:
        group_of = self._group
        keep = self._keep
        counts = state.counts
        events = state.events
        for r in records:
            rid = r.id
            if rid == FIRST_ID:
                state.segment += 1
            kind = r.kind
            matched = keep is None or keep(r)
            group = group_of(r)
            if kind == REQUEST:
                outcome = r.outcome
                # A negotiation probe's refusal is how negotiation works: never a failure.
                failed = outcome not in NOT_FAILED and not is_probe(r)
                if matched:
                    _count(counts[group], r, outcome, failed)
                st = r.httpStatuses
                ended = bool(st) and st[-1] == HTTP_NOT_FOUND
                previous = r.previousSession if r.method == INITIALIZE else None
                if (
                    failed
                    or outcome == INPUT_REQUIRED
                    or ended
                    or r.retryOf is not None
                    or r.continues is not None
                    or previous is not None
                ):
                    j = r.jsonrpc
                    events.append(
                        (
                            state.segment,
                            rid,
                            group,
                            matched,
                            outcome,
                            None if j is None else j.errorCode,
                            r.retryOf,
                            r.continues,
                            r.session,
                            previous,
                            ended,
                        )
                    )
            elif kind == SESSION_END and r.endReason == NOT_FOUND:
                events.append(
                    (
                        state.segment,
                        rid,
                        group,
                        matched,
                        None,
                        None,
                        None,
                        None,
                        r.session,
                        None,
                        True,
                    )
                )

    def end_task(self, state: _WorkerState, task: Task) -> TaskPart:
        part = TaskPart(state.events, state.segment)
        state.events = []
        state.segment = 0
        return part

    def end_worker(self, state: _WorkerState) -> dict[Any, Counts]:
        return dict(state.counts)

    # main side
    def consume(self, part: TaskPart, task: Task) -> None:
        self.linker.take(part)

    def merge(self, result: dict[Any, Counts]) -> None:
        for group, c in result.items():
            mine = self.counts.get(group)
            if mine is None:
                self.counts[group] = c
            else:
                mine.add(c)


def _count(c: Counts, r: Any, outcome: str | None, failed: bool) -> None:
    c.requests += 1
    if failed:
        c.failed[outcome] = c.failed.get(outcome, 0) + 1
    elif outcome == INPUT_REQUIRED:
        c.input_required += 1
    if r.retryOf is None:
        c.logical += 1
    else:
        c.retries += 1
        origin = r.retryOrigin or "(none)"
        c.origins[origin] = c.origins.get(origin, 0) + 1
        if r.retryDelayMs is not None:
            histogram.add(c.delays, r.retryDelayMs)
        if r.unsafeRetry:
            c.unsafe += 1
    attempt = r.attempt
    if attempt is not None:
        if attempt == 2:
            c.second_attempts += 1
        if attempt > c.max_attempt:
            c.max_attempt = attempt
    if r.retryAfterMs is not None:
        c.retry_after += 1
    honoured = r.retryAfterHonored
    if honoured is True:
        c.honoured += 1
    elif honoured is False:
        c.not_honoured += 1


class Linker:
    """Follows retryOf, continues and previousSession links, in input order, bounded."""

    def __init__(
        self, max_candidates: int = MAX_LINK_CANDIDATES, max_sessions: int = MAX_ENDED_SESSIONS
    ) -> None:
        self.links: dict[Any, Links] = defaultdict(Links)
        # (segment, id) -> [group, matched, outcome, errorCode, chain]; a chain is
        # [group, continued records not yet completed] shared by a continuation's turns.
        self.candidates: dict[tuple[int, int], list[Any]] = {}
        self.max_candidates = max_candidates
        # session -> [group, matched, re-initialised]
        self.ended: dict[str, list[Any]] = {}
        self.max_sessions = max_sessions
        self.segment = 0  # the run being read
        self.seen_first = False  # whether its id 1 has been seen

    def take(self, part: TaskPart) -> None:
        # The task's local segment k begins at its k-th id 1: a new run if this run has
        # had its id 1 already, else just the moment this run's id 1 turns up.
        segments = [self.segment]
        for _ in range(part.ones):
            if self.seen_first:
                self.segment += 1
            self.seen_first = True
            segments.append(self.segment)
        for ev in part.events:
            self._event(segments[ev[0]], ev)

    def _event(self, seg: int, ev: Event) -> None:
        (_, rid, group, matched, outcome, code, retry_of, continues, session, previous, ended) = ev
        cands = self.candidates
        chain = None
        if retry_of is not None:
            prev = cands.pop((seg, retry_of), None)
            if prev is not None:
                pgroup, pmatched, poutcome, pcode, chain = prev
                if pmatched and poutcome not in NOT_FAILED:
                    retried = self.links[pgroup].retried
                    retried[poutcome] = retried.get(poutcome, 0) + 1
                if matched and poutcome == JSONRPC_ERROR and pcode == INVALID_PARAMS:
                    self.links[group].futile += 1
        if continues is not None:
            prev = cands.pop((seg, continues), None)
            if prev is not None and prev[2] == INPUT_REQUIRED:
                pgroup, pmatched, _, _, pchain = prev
                chain = pchain if pchain is not None else [pgroup, 0]
                if pmatched:
                    self.links[pgroup].continued += 1
                    chain[1] += 1
        if outcome is not None:
            if outcome in COMPLETED:
                if chain is not None and chain[1]:
                    self.links[chain[0]].completed += chain[1]
                    chain[1] = 0
            elif rid is not None:  # failed or input-required: a later record may name it
                cands[(seg, rid)] = [group, matched, outcome, code, chain]
                if len(cands) > self.max_candidates:
                    del cands[next(iter(cands))]  # the oldest
        if ended and session is not None and session not in self.ended:
            self.ended[session] = [group, matched, False]
            if matched:
                self.links[group].ended_404 += 1
            if len(self.ended) > self.max_sessions:
                del self.ended[next(iter(self.ended))]
        if previous is not None:
            e = self.ended.get(previous)
            if e is not None and not e[2]:
                e[2] = True
                if e[1]:
                    self.links[e[0]].reinitialised += 1


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
    p50, p95 = histogram.quantiles(c.delays, (0.50, 0.95))
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


def all_figures(job: RetriesJob, *, same_rows: bool = False) -> dict[tuple[Any, ...], list[Figure]]:
    """Group tuple -> figures, for every group with records.

    `same_rows` gives every group a row for each failed outcome any group has.
    """
    dims = len(job.by)
    groups = set(job.counts) | set(job.linker.links)
    outcomes = {o for c in job.counts.values() for o in c.failed} if same_rows else None
    out = {}
    for g in sorted(groups, key=lambda g: group_sort_key(as_tuple(g, dims))):
        out[as_tuple(g, dims)] = figures(job.counts.get(g, Counts()), job.linker.links[g], outcomes)
    return out


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
