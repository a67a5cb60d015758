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
from typing import Any, Final

from .filters import Filters
from .inputs import Task
from .render import Cell, Millis, Ratio
from .retries import Figure, RetriesJob, all_figures
from .schema import layer_rank, outcome_rank
from .summary import INJECTED, ORGANIC, PROBE, Breakdown, SummaryJob, Tally, label

TOP_FIGURE: Final = "figure"


class CompareJob:
    """`summary` and `retries` folded from one reading of the input."""

    def __init__(self, by: Sequence[str], filters: Filters) -> None:
        self.by = tuple(by)
        self.summary = SummaryJob(by, filters)
        self.retries = RetriesJob(by, filters)
        self.fields = tuple(dict.fromkeys((*self.summary.fields, *self.retries.fields)))

    def new_state(self) -> tuple[Any, Any]:
        return self.summary.new_state(), self.retries.new_state()

    def feed(self, state: tuple[Any, Any], records: list[Any], task: Task) -> None:
        self.summary.feed(state[0], records, task)
        self.retries.feed(state[1], records, task)

    def end_task(self, state: tuple[Any, Any], task: Task) -> Any:
        return self.retries.end_task(state[1], task)

    def end_worker(self, state: tuple[Any, Any]) -> tuple[Any, Any]:
        return self.summary.end_worker(state[0]), self.retries.end_worker(state[1])

    def consume(self, part: Any, task: Task) -> None:
        self.retries.consume(part, task)

    def merge(self, result: tuple[Any, Any]) -> None:
        self.summary.merge(result[0])
        self.retries.merge(result[1])


def group_label(group: tuple[Any, ...]) -> str:
    return " / ".join(label(g) for g in group)


def table(job: CompareJob, *, top: int) -> tuple[list[str], list[list[Cell]]]:
    """Headers (`figure`, then one per group) and rows."""
    rolled = job.summary.rolled
    retry_figs = all_figures(job.retries, same_rows=True)
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
    pct = bd.total.percentiles()

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
            v = pct[key]
            value = None if v is None else Millis(round(v, 3))
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
