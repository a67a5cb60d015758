"""What the report shows, gathered from the engine: the commands' own queries, plus the
report's distributions and timeline records (`report.queries`).

Python only arranges rows here (by client, by session chain); every count, share and
percentile is a query's. Beyond the limits in `Limits`, sessions and timelines are
sampled, and `Sampling` says what was left out so that the page can say so.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import Any, Final

from mcp_layers_analysis import queries as figure_queries
from mcp_layers_analysis.compare import table as compare_table
from mcp_layers_analysis.duck import DuckEngine
from mcp_layers_analysis.filters import Filters
from mcp_layers_analysis.hangs import STALL_MS, Silence, WaitedOn, silences
from mcp_layers_analysis.load import Engine
from mcp_layers_analysis.render import Cell
from mcp_layers_analysis.retries import Figure, all_figures
from mcp_layers_analysis.summary import INJECTED, ORGANIC, PROBE, label, millis, tallies
from mcp_layers_analysis.table import TABLE

from . import queries
from .queries import COLUMNS, EDGES_MS, MODEL_TURN_COLUMNS, OVERVIEW_COLUMNS, TIMELINE_COLUMNS

#: What `compare` groups the heat map by.
COMPARE_BY: Final = ("client", "scenario")


@dataclass(frozen=True, slots=True)
class Limits:
    """How much the page holds at most: past these it samples, and says so."""

    sessions: int = 500  # rows of the session list
    timelines: int = 40  # session chains drawn
    per_session: int = 250  # records of one session drawn
    drawn: int = 4000  # records drawn in all timelines together (about 1 kB each)
    page_bytes: int = 8_000_000  # the page's size: past it, fewer timelines and rows
    # Up to `exact` records every figure is over every record. Past it the overview still
    # is (it is `summary`'s), and the other sections are over the first `sample` records:
    # reading every column of every record costs half as much again as `summary` does,
    # and their queries (windows over retry chains, a grouping per session) as much
    # again, so a big input's page would take three times `summary`'s time, not two
    # (benchmarks/report_bench.py).
    exact: int = 100_000
    sample: int = 50_000


DEFAULT_LIMITS: Final = Limits()


@dataclass(slots=True)
class Origin:
    """One client's calls of one origin (organic, injected, probe)."""

    calls: int = 0
    failed: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    failed_by_layer: dict[str, int] = field(default_factory=dict)
    p50: float | None = None
    p95: float | None = None
    p99: float | None = None


@dataclass(slots=True)
class Client:
    """Everything the overview and retries sections show of one client (name@version)."""

    name: str
    origins: dict[str, Origin] = field(default_factory=dict)
    latency_bins: list[int] = field(default_factory=lambda: [0] * (len(EDGES_MS) + 1))
    retry_figures: dict[str, Figure] = field(default_factory=dict)
    delay_bins: dict[str, list[int]] = field(default_factory=dict)

    def origin(self, name: str) -> Origin:
        return self.origins.get(name) or Origin()


@dataclass(frozen=True, slots=True)
class Session:
    """A row of `mcp-layers sessions`."""

    session: str
    client: str | None
    protocol: str | None
    scenario: str | None
    started: str | None
    seconds: float | None
    posts: int
    requests: int
    failed: int
    retries: int
    ended: str | None
    next_session: str | None

    @property
    def eventful(self) -> bool:
        return bool(self.failed or self.retries or self.ended == "404" or self.next_session)


@dataclass(slots=True)
class Chain:
    """Sessions one client ran one after another (each re-initialising the one before):
    a timeline. `records` are the timeline query's rows, as namespaces; `turns` the model
    turns of the same input during the chain (`queries.model_turns`' rows), and `stalls`
    the silences `hangs` finds in that time, when there are turns (the model's lane)."""

    sessions: list[Session]
    records: list[Any] = field(default_factory=list)
    cut: dict[str, int] = field(default_factory=dict)  # session -> records not drawn
    turns: list[Any] = field(default_factory=list)
    turns_cut: int = 0  # model turns not drawn
    stalls: list[Silence] = field(default_factory=list)

    @property
    def not_drawn(self) -> int:
        """Records (model turns too) of the chain's time that its timeline leaves out."""
        return sum(self.cut.values()) + self.turns_cut

    @property
    def anchor(self) -> str:
        return "t-" + self.sessions[0].session


@dataclass(slots=True)
class Sampling:
    """What the page leaves out (0: nothing)."""

    sessions_total: int = 0
    sessions_listed: int = 0
    chains_total: int = 0
    chains_drawn: int = 0
    records_cut: int = 0
    head: int = 0  # when not 0: the sections after the overview are over the first `head`


@dataclass(slots=True)
class ReportData:
    records: int
    clients: list[Client]
    sessions: list[Session]
    chains: list[Chain]
    compare_headers: list[str]
    compare_rows: list[list[Cell]]
    sampling: Sampling


def gather(
    engine: Engine, filters: Filters, records: int, limits: Limits = DEFAULT_LIMITS
) -> ReportData:
    """The page's data. With DuckDB the engine may hold only some columns of the records
    (`queries.OVERVIEW_COLUMNS`, as `columns_to_read` asks): up to `limits.exact` records,
    every column is read for every section; past it, the overview is over every record
    and the other sections over the first `limits.sample` records, read with every
    column (the page says so)."""
    if not isinstance(engine, DuckEngine) or set(COLUMNS) <= set(engine.cols):
        return _sections(engine, filters, records, limits, _clients(engine, filters))
    # An engine read with other columns than the overview's (the bundle's) is read again
    # with every column, in full.
    if records <= limits.exact or not set(OVERVIEW_COLUMNS) <= set(engine.cols):
        with _swapped(engine, None):
            return _sections(engine, filters, records, limits, _clients(engine, filters))
    clients = _clients(engine, filters)
    with _swapped(engine, limits.sample) as head:
        d = _sections(engine, filters, records, limits, clients)
    d.sampling.head = head
    return d


@contextmanager
def _swapped(engine: DuckEngine, limit: int | None) -> Iterator[int]:
    """The `records` table, for a while, as the first `limit` records (all when None) with
    every column the report reads. Yields how many records that is."""
    con = engine.con
    count = engine.head("report_records", COLUMNS, limit)
    con.execute(f"ALTER VIEW {TABLE} RENAME TO report_narrow")
    try:
        con.execute(f"CREATE TEMP VIEW {TABLE} AS SELECT * FROM report_records")
        yield count
    finally:
        con.execute(f"DROP VIEW IF EXISTS {TABLE}")
        con.execute("DROP TABLE IF EXISTS report_records")
        con.execute(f"ALTER VIEW report_narrow RENAME TO {TABLE}")


def _sections(
    engine: Engine, filters: Filters, records: int, limits: Limits, clients: list[Client]
) -> ReportData:
    """Everything after the overview: retries per client, sessions, timelines, compare."""
    _retries(engine, filters, clients)
    every = _sessions(engine, filters)
    joined = [(str(a), str(b)) for a, b in engine.rows(queries.retry_sessions(filters))]
    chains = _chains(every, joined)
    drawn = _pick(chains, limits.timelines)
    sampling = Sampling(
        sessions_total=len(every),
        sessions_listed=min(len(every), limits.sessions),
        chains_total=len(chains),
        chains_drawn=len(drawn),
    )
    sampling.records_cut = _fill(engine, filters, drawn, limits.per_session)
    sampling.records_cut += _fill_turns(engine, drawn, limits.per_session)
    # A chain can be long (a client re-initialising again and again): past the budget of
    # drawn records, the chains after it are not drawn (the first one always is).
    kept: list[Chain] = []
    total = 0
    for c in drawn:
        total += len(c.records) + len(c.turns)
        if kept and total > limits.drawn:
            break
        kept.append(c)
    sampling.records_cut -= sum(c.not_drawn for c in drawn[len(kept) :])
    drawn = kept
    sampling.chains_drawn = len(drawn)
    _fill_stalls(engine, filters, drawn)
    headers, rows = compare_table(engine, COMPARE_BY, filters, top=5)
    return ReportData(
        records=records,
        clients=clients,
        sessions=every[: limits.sessions],
        chains=drawn,
        compare_headers=headers,
        compare_rows=rows,
        sampling=sampling,
    )


def halved(d: ReportData) -> ReportData | None:
    """`d` with half its timelines and half its session rows (a page over its size
    budget), or None when there is nothing left to halve."""
    if not d.chains and len(d.sessions) <= 1:
        return None
    chains = d.chains[: len(d.chains) // 2]
    sessions = d.sessions[: max(len(d.sessions) // 2, 1)]
    dropped = sum(c.not_drawn for c in d.chains[len(chains) :])
    sampling = replace(
        d.sampling,
        sessions_listed=len(sessions),
        chains_drawn=len(chains),
        records_cut=d.sampling.records_cut - dropped,
    )
    return replace(d, sessions=sessions, chains=chains, sampling=sampling)


def compare_only(engine: Engine, filters: Filters, records: int) -> ReportData:
    """The data of a page with only the compare section (the lab's matrix)."""
    headers, rows = compare_table(engine, COMPARE_BY, filters, top=5)
    return ReportData(records, [], [], [], headers, rows, Sampling())


# --------------------------------------------------------------------- per client


def _clients(engine: Engine, filters: Filters) -> list[Client]:
    out: dict[str, Client] = {}

    def of(name: Any) -> Client:
        key = label(name)
        return out.setdefault(key, Client(key))

    for row in tallies(engine, ("client",), filters, 0):
        g, origin, breakdown, key, calls, _, failed, _, p50, p95, p99 = row
        o = of(g).origins.setdefault(origin, Origin())
        if breakdown == "all":
            o.calls, o.failed = int(calls), int(failed)
            o.p50, o.p95, o.p99 = (millis(p) for p in (p50, p95, p99))
        elif breakdown == "outcome":
            o.outcomes[label(key)] = int(calls)
        elif breakdown == "layer" and failed:
            o.failed_by_layer[label(key)] = int(failed)
    for g, b, n in engine.rows(queries.latency_bins(filters)):
        of(g).latency_bins[int(b)] = int(n)
    return sorted(out.values(), key=lambda c: c.name)


def _retries(engine: Engine, filters: Filters, clients: list[Client]) -> None:
    """Each client's retry figures and delays (a client only a sample's sessions have
    no retry: it keeps none)."""
    of = {c.name: c for c in clients}
    for group, figs in all_figures(engine, ("client",), filters).items():
        if label(group[0]) in of:
            of[label(group[0])].retry_figures = {f.name: f for f in figs}
    for g, origin, b, n in engine.rows(queries.delay_bins(filters)):
        if label(g) in of:
            bins = of[label(g)].delay_bins.setdefault(origin, [0] * (len(EDGES_MS) + 1))
            bins[int(b)] = int(n)


# --------------------------------------------------------------------- sessions


def _sessions(engine: Engine, filters: Filters) -> list[Session]:
    out = []
    for row in engine.rows(figure_queries.sessions(filters)):
        session, client, protocol, scenario, started, seconds = row[:6]
        posts, requests, failed, retries = (int(x or 0) for x in row[6:10])
        out.append(
            Session(
                session, client, protocol, scenario, started, seconds,
                posts, requests, failed, retries, row[10], row[11],
            )
        )  # fmt: skip
    return out


def _chains(sessions: Sequence[Session], joined: Sequence[tuple[str, str]]) -> list[Chain]:
    """Sessions joined by re-initialisation (`next_session`) or by a retry from one to the
    other, each chain in the order its sessions first appear."""
    parent = {s.session: s.session for s in sessions}

    def root(x: str) -> str:
        while parent[x] != x:
            parent[x] = parent[parent[x]]
            x = parent[x]
        return x

    pairs = [(s.session, s.next_session) for s in sessions if s.next_session]
    for a, b in [*pairs, *joined]:
        if a in parent and b in parent:
            parent[root(b)] = root(a)
    groups: dict[str, list[Session]] = {}
    seen: set[str] = set()
    for s in sessions:
        # A session can head several rows of the list (two clients behind one stand-in
        # session, say); its timeline is one lane.
        if s.session not in seen:
            seen.add(s.session)
            groups.setdefault(root(s.session), []).append(s)
    return [Chain(members) for members in groups.values()]


def _pick(chains: Sequence[Chain], limit: int) -> list[Chain]:
    """The chains to draw: eventful ones (a failure, a retry, a 404) first, in order."""
    eventful = [c for c in chains if any(s.eventful for s in c.sessions)]
    calm = [c for c in chains if not any(s.eventful for s in c.sessions)]
    chosen = {id(c) for c in [*eventful, *calm][:limit]}
    return [c for c in chains if id(c) in chosen]


def _fill(engine: Engine, filters: Filters, chains: Sequence[Chain], per_session: int) -> int:
    """Each chain's records from the timeline query; returns how many were left out."""
    where = {s.session: c for c in chains for s in c.sessions}
    if not where:
        return 0
    cut = 0
    for row in engine.rows(queries.timeline(sorted(where), filters, per_session)):
        r = SimpleNamespace(**dict(zip(TIMELINE_COLUMNS, row, strict=True)))
        chain = where[r.session]
        chain.records.append(r)
        if r.rank == 1 and r.records > per_session:
            chain.cut[r.session] = r.records - per_session
            cut += r.records - per_session
    for c in chains:
        c.records.sort(key=lambda r: (r.at_ms is None, r.at_ms or 0, r.seq))
    return cut


def _spans(chain: Chain) -> dict[int, tuple[float, float]]:
    """The time (epoch ms) a chain's drawn records cover, per input."""
    out: dict[int, tuple[float, float]] = {}
    for r in chain.records:
        if r.at_ms is None:
            continue
        a, b = float(r.at_ms), float(r.at_ms) + float(r.durationMs or 0)
        was = out.get(int(r.src), (a, b))
        out[int(r.src)] = (min(was[0], a), max(was[1], b))
    return out


def _fill_turns(engine: Engine, chains: Sequence[Chain], per_chain: int) -> int:
    """Each chain's model turns (at most `per_chain`); returns how many were left out."""
    spans = [(i, src, a, b) for i, c in enumerate(chains) for src, (a, b) in _spans(c).items()]
    if not spans:
        return 0
    cut = 0
    for row in engine.rows(queries.model_turns(spans, per_chain)):
        t = SimpleNamespace(**dict(zip(MODEL_TURN_COLUMNS, row, strict=True)))
        chain = chains[int(t.chain)]
        chain.turns.append(t)
        if t.rank == 1 and t.turns > per_chain:
            chain.turns_cut = int(t.turns) - per_chain
            cut += chain.turns_cut
    return cut


def _fill_stalls(engine: Engine, filters: Filters, chains: Sequence[Chain]) -> None:
    """The stalls (`hangs`, its default length) of the chains that have a model lane, each
    on every such chain of its input whose time it overlaps. Not looked for when no chain
    has one: a page without model traffic is the page it was without the lane."""
    laned = [c for c in chains if c.turns]
    if not laned:
        return
    found = [s for s in silences(engine, filters, STALL_MS) if s.waited_on != WaitedOn.UNKNOWN]
    for c in laned:
        spans = _spans(c)
        for t in c.turns:
            a, b = float(t.at_ms), float(t.at_ms) + float(t.durationMs or 0)
            was = spans.get(int(t.src), (a, b))
            spans[int(t.src)] = (min(was[0], a), max(was[1], b))
        c.stalls = [
            s
            for s in found
            if s.src in spans and s.start_ms < spans[s.src][1] and s.end_ms > spans[s.src][0]
        ]


__all__ = [
    "DEFAULT_LIMITS",
    "INJECTED",
    "ORGANIC",
    "PROBE",
    "Chain",
    "Client",
    "Limits",
    "ReportData",
    "gather",
    "halved",
]
