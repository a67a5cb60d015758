"""`compare`: the summary and retries figures side by side, one column per group.

Rows are figures, columns are groups (a client, or client × scenario with `--by` twice),
so two clients, or two versions of one, read across on the same scenario. A figure a group
has no data for is empty. Parts of a whole are given as shares (the counts they are shares
of are figures too): "failed calls retried" is a share of "failed calls".

Summary figures are of organic calls; injected ones are counted apart ("injected calls"),
and so are negotiation probes ("negotiation probes": never failures).
Retry figures count every call, injected or not: a fault rule is there to test retries.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

from .filters import Filters
from .load import Engine
from .render import Cell, Millis, Ratio
from .retries import Figure, all_figures
from .schema import layer_rank, outcome_rank
from .summary import INJECTED, ORGANIC, PROBE, label, millis, tallies

TOP_FIGURE: Final = "figure"

#: Breakdowns whose keys are numbers (the query gives every key as text).
NUMERIC_KEYS: Final = ("jsonrpc_error", "http_status")


@dataclass(slots=True)
class Tally:
    """Calls, failed calls and latency percentiles (as buckets) of one summary row."""

    calls: int = 0
    failed: int = 0
    pcts: tuple[int | None, ...] = (None, None, None)


@dataclass(slots=True)
class Breakdown:
    """One group and origin: its total and a tally per breakdown and key."""

    total: Tally = field(default_factory=Tally)
    parts: dict[str, dict[Any, Tally]] = field(
        default_factory=lambda: {
            b: {} for b in ("layer", "outcome", "method", "tool", *NUMERIC_KEYS, "rule")
        }
    )


def rolled_up(engine: Engine, by: Sequence[str], filters: Filters) -> dict[Any, Breakdown]:
    """(group tuple, origin) -> breakdown, from the summary query (every key, no top)."""
    dims = len(by)
    out: dict[Any, Breakdown] = {}
    for row in tallies(engine, by, filters, None):
        group, rest = tuple(row[:dims]), row[dims:]
        origin, breakdown, key, calls, _, failed, _, *pcts = rest
        bd = out.setdefault((group, origin), Breakdown())
        t = Tally(int(calls), int(failed), tuple(pcts))
        if breakdown == "all":
            bd.total = t
        else:
            bd.parts[breakdown][int(key) if breakdown in NUMERIC_KEYS else key] = t
    return out


def group_label(group: tuple[Any, ...]) -> str:
    return " / ".join(label(g) for g in group)


def table(
    engine: Engine, by: Sequence[str], filters: Filters, *, top: int
) -> tuple[list[str], list[list[Cell]]]:
    """Headers (`figure`, then one per group) and rows."""
    rolled = rolled_up(engine, by, filters)
    retry_figs = all_figures(engine, by, filters, same_rows=True)
    groups = sorted(
        {g for g, _ in rolled} | set(retry_figs), key=lambda g: tuple(label(x) for x in g)
    )
    columns: dict[tuple[Any, ...], dict[str, Cell]] = {}
    order: dict[str, int] = {}  # figure name -> first position seen
    summary_names = _summary_names(rolled, top)
    for g in groups:
        col: dict[str, Cell] = {}
        organic = rolled.get((g, ORGANIC))
        injected = rolled.get((g, INJECTED))
        probes = rolled.get((g, PROBE))
        for name, value in _summary_figures(organic, injected, probes, summary_names):
            col[name] = value
        for f in retry_figs.get(g, []):
            col[f"retries: {f.name}" if f.name == "calls" else f.name] = _compare_cell(f)
        columns[g] = col
    names = [n for n, _ in summary_names]
    for g in groups:
        for f in retry_figs.get(g, []):
            n = f"retries: {f.name}" if f.name == "calls" else f.name
            if n not in order:
                order[n] = len(order)
    names += sorted(order, key=order.__getitem__)
    headers = [TOP_FIGURE, *(group_label(g) for g in groups)]
    rows = [[name, *(columns[g].get(name) for g in groups)] for name in names]
    return headers, rows


def _compare_cell(f: Figure) -> Cell:
    if f.of is not None:
        share = f.share
        return None if share is None else Ratio(share)
    if f.value is None:
        return None
    if f.unit == "ms":
        return Millis(round(f.value, 3))
    return f.value


# Summary figures: (name, how to get it from a group's organic and injected breakdowns).
def _summary_names(
    rolled: dict[tuple[Any, str], Breakdown], top: int
) -> list[tuple[str, tuple[str, Any]]]:
    """Every summary figure some group has, in table order, with how to compute it."""
    layers: set[Any] = set()
    outcomes: set[Any] = set()
    methods: dict[Any, int] = {}
    tools: dict[Any, int] = {}
    codes: set[Any] = set()
    statuses: set[Any] = set()
    injected = probes = False
    for (_, origin), bd in rolled.items():
        if origin == INJECTED:
            injected = True
            continue
        if origin == PROBE:
            probes = True
            continue
        outcomes |= set(bd.parts["outcome"])
        for key, t in bd.parts["layer"].items():
            if t.failed:
                layers.add(key)
        for key, t in bd.parts["method"].items():
            methods[key] = methods.get(key, 0) + t.calls
        for key, t in bd.parts["tool"].items():
            tools[key] = tools.get(key, 0) + t.calls
        codes |= {k for k, _ in _top(bd.parts["jsonrpc_error"], top)}
        statuses |= {k for k, _ in _top(bd.parts["http_status"], top)}
    out: list[tuple[str, tuple[str, Any]]] = [
        ("calls", ("calls", None)),
        ("failure rate", ("failure_rate", None)),
        ("latency p50 (ms)", ("p", 0)),
        ("latency p95 (ms)", ("p", 1)),
        ("latency p99 (ms)", ("p", 2)),
    ]
    out += [
        (f"failed at {label(x)}", ("layer_failed", x))
        for x in sorted(layers, key=lambda x: layer_rank(x or ""))
    ]
    out += [
        (f"outcome {label(x)}", ("outcome", x))
        for x in sorted(outcomes, key=lambda x: outcome_rank(x or ""))
    ]
    for m in sorted(methods, key=lambda k: (-methods[k], str(k))):
        out += [
            (f"method {m}: calls", ("method_calls", m)),
            (f"method {m}: failure rate", ("method_failed", m)),
        ]
    for t in sorted(tools, key=lambda k: (-tools[k], str(k))):
        out += [
            (f"tool {t}: calls", ("tool_calls", t)),
            (f"tool {t}: failure rate", ("tool_failed", t)),
        ]
    out += [(f"JSON-RPC error {c}", ("code", c)) for c in sorted(codes)]
    out += [(f"HTTP status {s}", ("status", s)) for s in sorted(statuses)]
    if injected:
        out += [
            ("injected calls", ("injected_calls", None)),
            ("injected failure rate", ("injected_failed", None)),
        ]
    if probes:
        out.append(("negotiation probes", ("probes", None)))
    return out


def _top(section: dict[Any, Tally], top: int) -> list[tuple[Any, Tally]]:
    return sorted(section.items(), key=lambda kv: (-kv[1].calls, str(kv[0])))[:top]


def _summary_figures(
    organic: Breakdown | None,
    injected: Breakdown | None,
    probes: Breakdown | None,
    names: list[tuple[str, tuple[str, Any]]],
) -> Iterator[tuple[str, Cell]]:
    bd = organic if organic is not None else Breakdown()
    total = bd.total.calls
    pct = bd.total.pcts

    def rate(t: Tally | None) -> Cell:
        return Ratio(t.failed / t.calls) if t is not None and t.calls else None

    def share(n: int) -> Cell:
        return Ratio(n / total) if total else None

    for name, (what, key) in names:
        value: Cell
        if what == "calls":
            value = total
        elif what == "failure_rate":
            value = rate(bd.total)
        elif what == "p":
            value = millis(pct[key])
        elif what == "layer_failed":
            t = bd.parts["layer"].get(key)
            value = share(t.failed if t else 0)
        elif what == "outcome":
            t = bd.parts["outcome"].get(key)
            value = share(t.calls if t else 0)
        elif what in ("method_calls", "tool_calls"):
            t = bd.parts[what.split("_")[0]].get(key)
            value = t.calls if t else 0
        elif what in ("method_failed", "tool_failed"):
            value = rate(bd.parts[what.split("_")[0]].get(key))
        elif what == "code":
            t = bd.parts["jsonrpc_error"].get(key)
            value = t.calls if t else 0
        elif what == "status":
            t = bd.parts["http_status"].get(key)
            value = t.calls if t else 0
        elif what == "injected_calls":
            value = injected.total.calls if injected else 0
        elif what == "injected_failed":
            value = rate(injected.total if injected else None)
        elif what == "probes":
            value = probes.total.calls if probes else 0
        else:  # pragma: no cover - names come from _summary_names
            raise AssertionError(what)
        yield name, value
