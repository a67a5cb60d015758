"""The report as one HTML page: sections of markup around the SVG charts, with the page's
stylesheet and script inlined (`report.css`, `report.js`), so the file works offline.

Every chart's numbers are also on the page as text (figures beside the bars, a table
under each timeline, values in the heat map's cells): colour is never the only carrier.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from importlib import resources
from pathlib import Path
from typing import Final

from mcp_layers_analysis.render import Cell, Millis, Ratio
from mcp_layers_analysis.retries import Figure
from mcp_layers_analysis.sessions import timeline_cells
from mcp_layers_core.record import RETRY_ORIGINS, Outcome

from . import timeline
from .data import INJECTED, ORGANIC, PROBE, Chain, ReportData, Session
from .queries import EDGES_MS
from .style import LEGEND, outcome_class
from .svg import Part, bin_names, duration, esc, histogram, stacked_bar

SECTIONS: Final = ("overview", "retries", "sessions", "compare")
TITLES: Final = {
    "overview": "Overview",
    "retries": "Retries",
    "sessions": "Sessions",
    "compare": "Compare",
}

#: The compare figures the heat map shows (the full table is under it), in this order.
KEY_FIGURES: Final = (
    "calls",
    "failure rate",
    "injected failure rate",
    "latency p50 (ms)",
    "latency p95 (ms)",
    "failed calls retried",
    "attempts per logical call",
    *(f"retries: {o.value}" for o in RETRY_ORIGINS),
    "retry delay p50",
    "Retry-After honoured",
    "unsafe retries",
    "sessions ended by 404, never re-initialised",
    "negotiation probes",
)

#: Retry figures each client's retries card lists.
RETRY_FIGURES: Final = (
    "failed calls",
    "failed calls retried",
    "logical calls",
    "attempts per logical call",
    "most attempts of one call",
    "retries",
    "retry delay p50",
    "retry delay p95",
    "responses with Retry-After",
    "Retry-After honoured",
    "unsafe retries",
    "futile retries (-32602 repeated)",
    "sessions ended by 404",
    "sessions ended by 404, never re-initialised",
)


def asset(name: str) -> str:
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def cell_text(value: Cell) -> str:
    """A cell as the page prints it: shares as percentages, milliseconds with a unit."""
    if value is None:
        return "—"
    if isinstance(value, Ratio):
        return f"{100 * value:.1f}%"
    if isinstance(value, Millis):
        return f"{value:.1f} ms"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def figure_text(f: Figure) -> str:
    if f.value is None:
        return "—"
    if f.unit == "ms":
        return f"{f.value:.1f} ms"
    if f.unit == "mean":
        return f"{f.value:.2f}"
    if f.of is not None:
        share = "" if f.share is None else f" ({100 * f.share:.1f}%)"
        return f"{f.value} of {f.of}{share}"
    return str(f.value)


def render(
    data: ReportData,
    *,
    title: str,
    inputs: Sequence[str],
    only: Sequence[str],
    made: datetime | None = None,
) -> str:
    """The whole page; `only` names the sections to include (all of `SECTIONS` by default).
    `made`: the time the page says it was made (now by default; `bundle` gives a fixed
    one, so that the same records give the same bytes)."""
    clients = [c.name for c in data.clients] or _compare_clients(data)
    parts = [
        _head(title),
        _header(data, title, inputs, clients, only, made or datetime.now(UTC)),
        "<main>",
        *(
            builder(data)
            for name, builder in (
                ("overview", _overview),
                ("retries", _retries),
                ("sessions", _sessions),
                ("compare", _compare),
            )
            if name in only
        ),
        "</main>",
        f"<script>{asset('report.js')}</script></body></html>",
    ]
    return "\n".join(parts)


def _compare_clients(data: ReportData) -> list[str]:
    return sorted({g.split(" / ")[0] for g in data.compare_headers[1:]})


def _head(title: str) -> str:
    return (
        '<!doctype html><html lang="en"><head><meta charset="utf-8">'
        '<meta name="viewport" content="width=device-width, initial-scale=1">'
        f"<title>{esc(title)}</title>"
        # Errors are caught from the first moment, for the page's self-test (#selftest).
        "<script>window.reportErrors=[];window.addEventListener('error',function(e)"
        "{window.reportErrors.push(String(e.message))});</script>"
        f"<style>{asset('report.css')}</style></head><body>"
    )


def _header(
    data: ReportData,
    title: str,
    inputs: Sequence[str],
    clients: list[str],
    only: Sequence[str],
    when: datetime,
) -> str:
    shown = ", ".join(Path(i).name or i for i in inputs[:5]) + (
        f" and {len(inputs) - 5} more" if len(inputs) > 5 else ""
    )
    made = when.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
    notes = "".join(f"<p class='note'>{esc(n)}</p>" for n in _sampling_notes(data))
    nav = "".join(f'<a href="#{s}">{TITLES[s]}</a>' for s in SECTIONS if s in only)
    boxes = "".join(
        f'<label><input type="checkbox" class="client-filter" value="{esc(c)}" checked> '
        f"{esc(c)}</label>"
        for c in clients
    )
    legend = "".join(
        f'<span class="key"><svg width="14" height="12" aria-hidden="true">'
        f'<rect class="{cls}" width="14" height="12"/></svg>{esc(words)}</span>'
        for cls, words in LEGEND
    )
    return (
        f"<header><h1>{esc(title)}</h1>"
        f"<p class='meta'>{data.records:,} record{'' if data.records == 1 else 's'} from "
        f"{esc(shown)} · made {made} by "
        "mcp-layers</p>"
        f"{notes}<nav aria-label='sections'>{nav}</nav>"
        f"<fieldset class='filters'><legend>Clients shown</legend>{boxes}"
        "<button type='button' id='all-clients'>all</button></fieldset>"
        f"<p class='legend' aria-label='colours'>{legend}</p>"
        "<output id='selftest' hidden></output></header>"
    )


def _sampling_notes(data: ReportData) -> Iterable[str]:
    s = data.sampling
    if s.head:
        yield (
            f"{data.records:,} records: the Overview counts every one of them; Retries, "
            f"Sessions and Compare are over the first {s.head:,} records read. mcp-layers "
            "retries, sessions and compare give them over every record."
        )
    # Past the exact limit, the sessions counted are those of the records read in full.
    among = f" in the first {s.head:,} records" if s.head else ""
    if s.sessions_total > s.sessions_listed:
        yield (
            f"The session list shows the first {s.sessions_listed:,} of the "
            f"{s.sessions_total:,} sessions{among}; the rest are in mcp-layers sessions."
        )
    if s.chains_total > s.chains_drawn:
        yield (
            f"Timelines are drawn for {s.chains_drawn:,} of the {s.chains_total:,} session "
            f"chains{among}: those with a failure, a retry or a 404 first, then the "
            "earliest (mcp-layers show SESSION prints any session's records)."
        )
    if s.records_cut:
        yield (
            f"{s.records_cut:,} records of long sessions are not drawn (each timeline holds "
            "a session's first records; mcp-layers show SESSION prints them all)."
        )


# --------------------------------------------------------------------- overview


def _outcome_parts(outcomes: dict[str, int]) -> list[Part]:
    known = [o.value for o in Outcome]
    order = [*known, *sorted(set(outcomes) - set(known))]
    return [Part(o, outcomes[o], outcome_class(o)) for o in order if outcomes.get(o)]


def _rate(failed: int, calls: int) -> str:
    return f"{failed} of {calls} ({100 * failed / calls:.1f}%)" if calls else "—"


def _overview(data: ReportData) -> str:
    cards = []
    names = bin_names(EDGES_MS)
    for c in data.clients:
        org, inj, probe = c.origin(ORGANIC), c.origin(INJECTED), c.origin(PROBE)
        layers = ", ".join(f"{k} {v}" for k, v in org.failed_by_layer.items()) or "none"
        pct = " · ".join(
            f"{n} {'—' if v is None else f'{v:.1f} ms'}"
            for n, v in (("p50", org.p50), ("p95", org.p95), ("p99", org.p99))
        )
        body = [
            f"<h3>{esc(c.name)}</h3><dl class='figs'>",
            f"<dt>calls</dt><dd>{org.calls}</dd>",
            f"<dt>failed (organic)</dt><dd>{_rate(org.failed, org.calls)}</dd>",
            f"<dt>failed at</dt><dd>{esc(layers)}</dd>",
            # Nothing of injected failures where no fault was injected (an empty figure
            # read as "injected faults — failed").
            *(
                [f"<dt>injected faults</dt><dd>{_rate(inj.failed, inj.calls)} failed</dd>"]
                if inj.calls
                else []
            ),
            f"<dt>negotiation probes</dt><dd>{probe.calls} (no failures)</dd>",
            f"<dt>latency</dt><dd>{pct}</dd></dl>",
            "<h4>Outcomes of organic calls</h4>",
            _bar(_outcome_parts(org.outcomes), f"{c.name} organic outcomes"),
        ]
        if inj.calls:
            body += [
                "<h4>Outcomes of injected calls</h4>",
                _bar(_outcome_parts(inj.outcomes), f"{c.name} injected outcomes"),
            ]
        body += [
            "<h4>Latency of organic calls</h4>",
            histogram(c.latency_bins, names, cls="o-ok", label=f"{c.name} latency"),
        ]
        cards.append(_card(c.name, body))
    return _section("overview", "calls, outcomes and latency per client", [_grid(cards)])


def _bar(parts: list[Part], label: str) -> str:
    """A stacked bar, and its parts in words under it (a narrow part has no room inside)."""
    said = " · ".join(f"{p.label} {p.value}" for p in parts if p.value)
    return f"{stacked_bar(parts, label=label)}<p class='said'>{esc(said)}</p>"


def _card(client: str, body: list[str]) -> str:
    return f'<article class="card" data-client="{esc(client)}">{"".join(body)}</article>'


def _grid(cards: list[str]) -> str:
    return f"<div class='grid'>{''.join(cards)}</div>" if cards else ""


def _section(name: str, heading: str, parts: list[str], intro: str = "") -> str:
    empty = "" if any(parts) else "<p>Nothing to show with these filters.</p>"
    return (
        f'<section id="{name}" class="part"><h2>{TITLES[name]}: {esc(heading)}</h2>'
        f"{intro}{empty}{''.join(parts)}</section>"
    )


# --------------------------------------------------------------------- retries


def _retries(data: ReportData) -> str:
    cards = []
    names = bin_names(EDGES_MS)
    for c in data.clients:
        figs = c.retry_figures
        rows = "".join(
            f"<dt>{esc(n)}</dt><dd>{esc(figure_text(figs[n]))}</dd>"
            for n in RETRY_FIGURES
            if n in figs
        )
        origins = [
            Part(o.value, int(figs[f"retries: {o.value}"].value or 0), f"r-{o.value}")
            for o in RETRY_ORIGINS
            if f"retries: {o.value}" in figs
        ]
        body = [f"<h3>{esc(c.name)}</h3>", "<h4>How it retried</h4>"]
        if any(p.value for p in origins):
            body.append(_bar(origins, f"{c.name} retries by origin"))
            delays = [sum(col) for col in zip(*c.delay_bins.values(), strict=True)]
            body += [
                "<h4>How soon (delay from the failed attempt to its retry)</h4>",
                histogram(delays, names, cls="r-delay", label=f"{c.name} retry delays"),
            ]
        else:
            body.append("<p>No retries.</p>")
        body.append(f"<dl class='figs'>{rows}</dl>")
        cards.append(_card(c.name, body))
    intro = (
        "<p>resend: same session and JSON-RPC id · reissue: same session, new id · reinit: "
        "on a new session initialised after the failure. Retry figures count every call, "
        "injected or not.</p>"
    )
    intro += _sample_said(data)
    return _section("retries", "what each client repeated, how and how soon", [_grid(cards)], intro)


# --------------------------------------------------------------------- sessions


def _sessions(data: ReportData) -> str:
    drawn = {s.session: c.anchor for c in data.chains for s in c.sessions}
    head = "".join(
        f"<th scope='col'>{h}</th>"
        for h in ("session", "client", "scenario", "started", "s", "POSTs", "failed", "retries")
    )
    rows = "".join(_session_row(s, drawn) for s in data.sessions)
    controls = (
        "<div class='controls'><label>Find <input type='search' id='session-find' "
        "placeholder='session, client or scenario'></label> <label><input type='checkbox' "
        "id='eventful-only'> only sessions with a failure, a retry or a 404</label></div>"
    )
    table = (
        f"<div class='scroll tall'><table class='sessions'><thead><tr>{head}<th scope='col'>ended"
        f"</th></tr></thead><tbody>{rows}</tbody></table></div>"
    )
    timelines = [_timeline(c) for c in data.chains]
    key = _timeline_key(any(c.turns for c in data.chains))
    parts = [controls, table, "<h3>Timelines</h3>", key, *timelines] if rows else []
    return _section(
        "sessions", "each session, and what happened in it, in order", parts, _sample_said(data)
    )


def _session_row(s: Session, drawn: dict[str, str]) -> str:
    name = esc(s.session)
    link = f"<a href='#{esc(drawn[s.session])}'>{name}</a>" if s.session in drawn else name
    ended = s.ended or "—"
    if s.next_session:
        ended += f" → {s.next_session}"
    seconds = "—" if s.seconds is None else f"{s.seconds:.3f}"
    cells = (
        link,
        esc(s.client or "—"),
        esc(s.scenario or "—"),
        esc(s.started or "—"),
        seconds,
        str(s.posts),
        str(s.failed),
        str(s.retries),
        esc(ended),
    )
    flag = " data-eventful" if s.eventful else ""
    return (
        f"<tr data-client='{esc(s.client or '(none)')}'{flag}>"
        + "".join(f"<td>{c}</td>" for c in cells)
        + "</tr>"
    )


def _timeline_key(model: bool) -> str:
    """What the timelines' marks mean (`model`: and the model's lane, when one is drawn)."""
    lane = (
        "<p class='note'>The top lane, model, is the agent's model turns (recorded when its "
        "model API went through the same proxy): a bar from the request to the answer's end, "
        "a white tick at the first output, a paler dashed bar an answer that never completed; "
        "a dotted arrow goes from a turn to each tools/call it asked for. A tinted band over "
        "the lanes is a stall (mcp-layers hangs: 10 s or more with no traffic), labelled with "
        "its length and who was waited on: model, mcp_server, agent or none; a stall with "
        "nothing of the timeline in flight is a break in the axis, labelled so.</p>"
        if model
        else ""
    )
    return (
        "<p class='note'>A bar is a request, from its start to its answer; a dot a "
        "notification; a diamond the client's answer to a server→client request; a thick "
        "outline an injected fault. Arrows: a retry (how, after how long), a continuation, a "
        "re-initialisation after a 404. Hover a mark for its details; the table under each "
        f"timeline lists them.</p>{lane}"
        '<svg width="0" height="0" aria-hidden="true"><defs><marker id="arrow" '
        'viewBox="0 0 10 10" refX="9" refY="5" markerWidth="7" markerHeight="7" '
        'orient="auto-start-reverse"><path d="M0 0L10 5L0 10z"/></marker></defs></svg>'
    )


def _timeline(chain: Chain) -> str:
    first = chain.sessions[0]
    client = first.client or "(none)"
    ids = " → ".join(s.session for s in chain.sessions)
    rows = "".join(
        "<tr>" + "".join(f"<td>{esc(cell_text(v))}</td>" for v in timeline_cells(r)) + "</tr>"
        for r in chain.records
    )
    head = "".join(
        f"<th scope='col'>{h}</th>"
        for h in ("id", "kind", "call", "HTTP", "outcome", "ms", "attempt", "retry", "detail")
    )
    return (
        f'<article class="tl" id="{esc(chain.anchor)}" data-client="{esc(client)}">'
        f"<h4>{esc(client)} · {esc(first.scenario or 'no scenario')} · {esc(ids)}</h4>"
        f"<div class='scroll'>{timeline.draw(chain)}</div>"
        f"<details><summary>as a table</summary><div class='scroll'><table><thead><tr>"
        f"{head}</tr></thead><tbody>{rows}</tbody></table></div>{_model_table(chain)}"
        "</details></article>"
    )


def _model_table(chain: Chain) -> str:
    """The model's lane and the stalls as text, under the records' table (nothing when
    the timeline has no model lane)."""
    if not chain.turns:
        return ""
    t0 = min(
        [float(r.at_ms) for r in chain.records if r.at_ms is not None]
        + [float(t.at_ms) for t in chain.turns]
    )
    rows = [(float(t.at_ms), "model turn", timeline.turn_tooltip(t, t0)) for t in chain.turns]
    rows += [(float(s.start_ms), "stall", timeline.stall_tooltip(s, t0)) for s in chain.stalls]
    body = "".join(
        f"<tr><td>+{esc(duration(at - t0))}</td><td>{what}</td><td>{esc(detail)}</td></tr>"
        for at, what, detail in sorted(rows, key=lambda row: row[0])
    )
    return (
        "<div class='scroll'><table class='model'><thead><tr><th scope='col'>at</th>"
        "<th scope='col'>what</th><th scope='col'>detail</th></tr></thead>"
        f"<tbody>{body}</tbody></table></div>"
    )


# --------------------------------------------------------------------- compare


def _compare(data: ReportData) -> str:
    groups = data.compare_headers[1:]
    if not groups:
        return _section("compare", "client × scenario", [])
    by_name = {str(r[0]): r[1:] for r in data.compare_rows}
    keys = [k for k in KEY_FIGURES if k in by_name]
    head = "".join(f"<th scope='col'>{esc(k)}</th>" for k in keys)
    body = []
    for i, g in enumerate(groups):
        client, _, scenario = g.partition(" / ")
        cells = "".join(_heat_cell(by_name[k][i], by_name[k]) for k in keys)
        name = f"{esc(client)}<br><small>{esc(scenario)}</small>"
        body.append(f"<tr data-client='{esc(client)}'><th scope='row'>{name}</th>{cells}</tr>")
    heat = (
        f"<div class='scroll'><table class='heat'><thead><tr><th scope='col'>client / "
        f"scenario</th>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"
    )
    full_head = "".join(f"<th scope='col'>{esc(h)}</th>" for h in data.compare_headers)
    full_rows = "".join(
        f"<tr><th scope='row'>{esc(r[0])}</th>"
        + "".join(f"<td>{esc(cell_text(v))}</td>" for v in r[1:])
        + "</tr>"
        for r in data.compare_rows
    )
    full = (
        "<details><summary>every figure (mcp-layers compare --by client --by scenario)"
        f"</summary><div class='scroll'><table class='full'><thead><tr>{full_head}</tr>"
        f"</thead><tbody>{full_rows}</tbody></table></div></details>"
    )
    intro = (
        "<p>One row per client and scenario. A cell's shade is its value against the "
        "highest in its column (shares against 100%); the value is printed in it.</p>"
    )
    intro += _sample_said(data)
    return _section("compare", "client × scenario, side by side", [heat, full], intro)


def _sample_said(data: ReportData) -> str:
    """A sampled section's line saying so (nothing when it is over every record)."""
    s = data.sampling
    if not s.head:
        return ""
    return (
        f"<p class='note sampled'>Over the first {s.head:,} of {data.records:,} records "
        "(a session that goes on past them is cut short).</p>"
    )


def _heat_cell(value: Cell, column: Sequence[Cell]) -> str:
    if value is None or isinstance(value, bool):
        return "<td class='h-none'>—</td>"
    if isinstance(value, Ratio):
        level = float(value)
    else:
        peak = max((float(v) for v in column if isinstance(v, int | float)), default=0.0)
        level = float(value) / peak if peak else 0.0
    return f"<td class='h{min(4, round(level * 4))}'>{esc(cell_text(value))}</td>"
