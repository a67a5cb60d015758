"""A session chain's timeline as SVG: one lane per session, every POST on one time axis.

A request is a bar from its start to its answer, coloured by outcome (`style`); a
notification is a dot, the client's answer to a server→client request a diamond, the end
of a session a bar across its lane with the reason. A retry is an arrow from the failed
attempt to the attempt that repeats it, labelled with how (resend, reissue, reinit) and
after how long; a continuation of an input-required result is a dashed arrow; a session
re-initialised after a 404 is an arrow from its end to the new `initialize`. So a 404, the
re-initialisation and the resend read as one story. Injected faults carry a thick outline
and the word "injected" in their tooltip.

When the chain's input holds the agent's model turns during its time (issue 28), a lane
for the model comes first: each turn a bar from its request to its answer's end, a tick at
its first output, and a dotted arrow to each `tools/call` it asked for (`modelCall`). The
stalls `hangs` finds in that time are bands over every lane, labelled with who was waited
on.

Idle stretches longer than `GAP_MS` (and a fifth of the whole) are cut out of the axis and
shown as a break with their length, so that a minute of silence does not squeeze the
interesting second into a pixel. A stall is such a silence when nothing of the chain was in
flight: its band then covers the break, which says "stall" instead of "idle".
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

from mcp_layers_analysis.hangs import Silence
from mcp_layers_analysis.schema import INITIALIZE
from mcp_layers_core.record import EndReason, Kind

from .data import Chain
from .style import outcome_class, outcome_words
from .svg import duration as dur
from .svg import esc, line, num, rect, svg, text

LABEL_W: Final = 150.0
PLOT_W: Final = 760.0
ROW_H: Final = 14.0
LANE_PAD: Final = 26.0  # room above a lane's bars for the arcs and their labels
AXIS_H: Final = 26.0
LINE_H: Final = 12.0  # a line of the label column
NAME_CH: Final = 21  # characters of a session's name the label column holds (11 px mono)
MIN_BAR: Final = 5.0
STALL_H: Final = 14.0  # the stalls' labels' line, above the lanes
MIN_STALL: Final = 3.0
BREAK_W: Final = 28.0
GAP_MS: Final = 1000.0


@dataclass(frozen=True, slots=True)
class Scale:
    """Time (epoch ms) to x, linear within active stretches, breaks between them."""

    starts: list[float]  # each stretch's first ms
    ends: list[float]
    xs: list[float]  # each stretch's first x
    k: float  # px per ms

    def x(self, t: float) -> float:
        i = max(bisect.bisect_right(self.starts, t) - 1, 0)
        if t > self.ends[i] and i + 1 < len(self.starts):  # inside a break
            return self.xs[i + 1] - BREAK_W / 2
        return self.xs[i] + (min(t, self.ends[i]) - self.starts[i]) * self.k

    @property
    def breaks(self) -> list[tuple[float, float]]:
        """(x, idle ms) of each break."""
        return [
            (self.xs[i] - BREAK_W / 2, self.starts[i] - self.ends[i - 1])
            for i in range(1, len(self.starts))
        ]


def scale_of(spans: Sequence[tuple[float, float]], width: float) -> Scale:
    """A scale over `spans` ((start, end) in ms), idle gaps cut out."""
    ordered = sorted(spans)
    whole = max(e for _, e in ordered) - ordered[0][0]
    cut = max(GAP_MS, whole / 5)
    starts, ends = [ordered[0][0]], [ordered[0][1]]
    for s, e in ordered[1:]:
        if s - ends[-1] > cut:
            starts.append(s)
            ends.append(e)
        else:
            ends[-1] = max(ends[-1], e)
    active = sum(e - s for s, e in zip(starts, ends, strict=True)) or 1.0
    k = (width - BREAK_W * (len(starts) - 1)) / active
    xs, x = [], 0.0
    for s, e in zip(starts, ends, strict=True):
        xs.append(x)
        x += (e - s) * k + BREAK_W
    return Scale(starts, ends, xs, k)


def _span(r: Any) -> tuple[float, float]:
    start = float(r.at_ms)
    return start, start + float(r.durationMs or 0)


def _call(r: Any) -> str:
    if r.kind == Kind.RESPONSE:
        return f"answer to {r.serverMethod or r.method or '?'}"
    if r.kind == Kind.SESSION_END:
        return f"end of session ({r.endReason or '?'})"
    if r.kind == Kind.STREAM:
        return "GET stream"
    return " ".join(x for x in (r.method, r.tool) if x) or "?"


def tooltip(r: Any, t0: float) -> str:
    parts = [f"#{r.id}" if r.id is not None else "#?", _call(r), f"+{dur(r.at_ms - t0)}"]
    if r.httpStatuses:
        parts.append("HTTP " + " ".join(map(str, r.httpStatuses)))
    if r.kind == Kind.REQUEST:
        parts.append(f"{r.outcome or 'no outcome'} ({outcome_words(r.outcome)})")
        if r.durationMs is not None:
            parts.append(f"took {dur(r.durationMs)}")
    if r.retryOf is not None:
        parts.append(f"{r.retryOrigin or 'retry'} of #{r.retryOf}, attempt {r.attempt}")
    if r.probe and r.kind == Kind.REQUEST:
        parts.append("negotiation probe (no failure)")
    if r.is_injected:
        parts.append(f"injected: {r.injected_rule or '?'} {r.injected_action or ''}".rstrip())
    if r.sse_resumed:
        parts.append("answer resumed on a GET stream")
    if r.model_turn is not None:
        parts.append(f"asked for by model turn #{r.model_turn} ({r.model_join or '?'} join)")
    return " · ".join(parts)


def draw(chain: Chain) -> str:
    """The chain's timeline (an empty string when no record has a time)."""
    recs = [r for r in chain.records if r.at_ms is not None]
    if not recs:
        return ""
    turns = [t for t in chain.turns if t.at_ms is not None]
    scale = scale_of([_span(r) for r in [*recs, *turns]], PLOT_W)
    t0 = scale.starts[0]
    # The model's lane, when there is one, is the first (None: no session is named so).
    keys: list[str | None] = [*([None] if turns else []), *(s.session for s in chain.sessions)]
    lanes = {k: i for i, k in enumerate(keys)}
    rows = _pack(recs, scale)
    turn_rows = _rows([_span(t) for t in turns], scale)
    said = _lane_lines(chain, recs)
    if turns:
        said[None] = _model_lines(chain, turns)
    # A lane is as deep as its rows of marks, and as its name and figures (one a line).
    # The last line's baseline stays inside the lane (which reaches 8 px below its rows).
    depth = [max(1, math.ceil((10 + LINE_H * (len(said[k]) - 1) - 8) / ROW_H)) for k in keys]
    for r in recs:
        depth[lanes[r.session]] = max(depth[lanes[r.session]], rows[r.seq] + 1)
    for row in turn_rows:
        depth[0] = max(depth[0], row + 1)
    # Room at the top for the stalls' labels.
    tops = []
    y = STALL_H if chain.stalls else 0.0
    for d in depth:
        tops.append(y + LANE_PAD)
        y += LANE_PAD + d * ROW_H + 8
    height = y + AXIS_H
    where: dict[int, tuple[float, float, float]] = {}  # seq -> x start, x end, y middle
    body: list[str] = [_lanes(keys, said, tops, depth)]
    stalled = _stalls(chain, scale, tops[0] - LANE_PAD + 4, height - AXIS_H, t0)
    body.append(stalled.bands)
    marks: list[str] = []
    for r in recs:
        x0, x1 = (LABEL_W + scale.x(t) for t in _span(r))
        y_mid = tops[lanes[r.session]] + rows[r.seq] * ROW_H + ROW_H / 2
        where[r.seq] = (x0, max(x1, x0 + MIN_BAR), y_mid)
        marks.append(_mark(r, x0, x1, y_mid, tops[lanes[r.session]], depth, lanes, t0))
    asked: dict[tuple[int, int], tuple[float, float, float]] = {}  # (input, seq) -> as `where`
    for t, row in zip(turns, turn_rows, strict=True):
        x0, x1 = (LABEL_W + scale.x(x) for x in _span(t))
        y_mid = tops[0] + row * ROW_H + ROW_H / 2
        asked[(int(t.src), int(t.seq))] = (x0, max(x1, x0 + MIN_BAR), y_mid)
        marks.append(_turn(t, x0, x1, y_mid, scale, t0))
    body.append("".join(_links(chain, recs, where)))
    body.append("".join(_asks(recs, where, asked)))
    body.extend(marks)
    body.append(stalled.labels)
    body.append(_axis(scale, height - AXIS_H, t0, stalled.on_breaks))
    total = f"{len(recs)} records in {len(chain.sessions)} session(s)"
    if turns:
        total += f", {len(turns)} model turn(s)"
    if chain.stalls:
        total += f", {len(chain.stalls)} stall(s)"
    return svg(
        LABEL_W + PLOT_W + 10,
        height,
        "".join(body),
        label=f"timeline of {chain.sessions[0].session}: {total}",
        cls="chart timeline",
    )


def _pack(recs: Sequence[Any], scale: Scale) -> dict[int, int]:
    """Each record's row in its lane: the first whose last bar ended before it starts."""
    ends: dict[str, list[float]] = {}
    out: dict[int, int] = {}
    for r in recs:
        if r.kind == Kind.SESSION_END:
            out[r.seq] = 0
            continue
        x0, x1 = (scale.x(t) for t in _span(r))
        x1 = max(x1, x0 + MIN_BAR)
        lane = ends.setdefault(r.session, [])
        for i, end in enumerate(lane):
            if end + 1 < x0:
                lane[i] = x1
                out[r.seq] = i
                break
        else:
            lane.append(x1)
            out[r.seq] = len(lane) - 1
    return out


def _lane_lines(chain: Chain, recs: Sequence[Any]) -> dict[str | None, list[str]]:
    """What the label column says of each lane, a line each: the session's name (cut to
    the column's width; the heading above the timeline has it whole), its GET streams,
    the requests the server sent it, the records not drawn."""
    out: dict[str | None, list[str]] = {}
    for s in chain.sessions:
        name = s.session if len(s.session) <= NAME_CH else s.session[: NAME_CH - 1] + "…"
        streams = max((r.get_streams or 0 for r in recs if r.session == s.session), default=0)
        asked = max((r.server_requests or 0 for r in recs if r.session == s.session), default=0)
        lines = [name, f"GET streams {streams}"]
        if asked:
            lines.append(f"server asked {asked}")
        if chain.cut.get(s.session):
            lines.append(f"{chain.cut[s.session]} more not drawn")
        out[s.session] = lines
    return out


def _lanes(
    keys: Sequence[str | None],
    said: dict[str | None, list[str]],
    tops: list[float],
    depth: list[int],
) -> str:
    out = []
    for i, key in enumerate(keys):
        top = tops[i] - LANE_PAD + 4
        h = LANE_PAD + depth[i] * ROW_H + 4
        cls = "lane" if key is not None else "lane model-lane"
        out.append(f'<rect class="{cls}" x="0" y="{num(top)}" width="100%" height="{num(h)}"/>')
        name, *figures = said[key]
        out.append(text(4, tops[i] + 10, name, "lbl mono"))
        for n, figure in enumerate(figures, start=1):
            out.append(text(4, tops[i] + 10 + n * LINE_H, figure, "lbl small"))
    return "".join(out)


def _mark(
    r: Any,
    x0: float,
    x1: float,
    y: float,
    lane_top: float,
    depth: list[int],
    lanes: dict[str | None, int],
    t0: float,
) -> str:
    tip = tooltip(r, t0)
    if r.kind == Kind.REQUEST:
        cls = outcome_class(r.outcome)
        if r.is_injected:
            cls += " inj"
        if r.probe:
            cls += " probe"
        return rect(x0, y - ROW_H / 2 + 2, max(x1 - x0, MIN_BAR), ROW_H - 4, f"bar {cls}", tip)
    if r.kind == Kind.NOTIFICATION:
        dot = f'<circle class="note" cx="{num(x0)}" cy="{num(y)}" r="3">'
        return f"{dot}<title>{esc(tip)}</title></circle>"
    if r.kind == Kind.RESPONSE:
        d = f"M{num(x0)} {num(y - 5)}l5 5l-5 5l-5 -5z"
        return f'<path class="srv" d="{d}"><title>{esc(tip)}</title></path>'
    if r.kind == Kind.STREAM:
        # A GET stream: open from its request to its end, drawn as a thin bar (never as
        # the session's end, which only a `session_end` record is).
        return rect(x0, y - 3, max(x1 - x0, MIN_BAR), 6, "bar stream", tip)
    h = depth[lanes[r.session]] * ROW_H
    reason = "404" if r.endReason == EndReason.NOT_FOUND else (r.endReason or "end")
    said = text(x0 - 3, lane_top - 6, "end: " + reason, "lbl small", "end")
    bar = line(x0, lane_top - 4, x0, lane_top + h, "stop")
    return f'<g class="end">{bar}{said}<title>{esc(tip)}</title></g>'


def _links(
    chain: Chain, recs: Sequence[Any], where: dict[int, tuple[float, float, float]]
) -> list[str]:
    out = []
    ends = {r.session: r.seq for r in recs if r.kind == Kind.SESSION_END}
    for r in recs:
        if r.retry_target in where:
            label = r.retryOrigin or "retry"
            if r.retryDelayMs is not None:
                label += f" {dur(r.retryDelayMs)}"
            out.append(_arc(where[r.retry_target], where[r.seq], "link retry", label))
        if r.continues_target in where:
            out.append(_arc(where[r.continues_target], where[r.seq], "link cont", "continues"))
        if r.method == INITIALIZE and ends.get(r.previousSession) in where:
            out.append(_arc(where[ends[r.previousSession]], where[r.seq], "link renew", ""))
    return out


def _arc(a: tuple[float, float, float], b: tuple[float, float, float], cls: str, label: str) -> str:
    """An arrow from the end of `a` to the start of `b`, bowing upwards, labelled."""
    x0, y0 = a[1], a[2] - 4
    x1, y1 = b[0], b[2] - 4
    lift = 10 + min(abs(x1 - x0) / 6, 12)
    top = min(y0, y1) - lift
    d = f"M{num(x0)} {num(y0)}C{num(x0)} {num(top)} {num(x1)} {num(top)} {num(x1)} {num(y1)}"
    mid = (x0 + x1) / 2
    said = text(mid, top + 1, label, "lbl small link-lbl", "middle") if label else ""
    return f'<g class="{cls}"><path d="{d}" marker-end="url(#arrow)"/>{said}</g>'


# --------------------------------------------------------------------- the model's lane


def _rows(spans: Sequence[tuple[float, float]], scale: Scale) -> list[int]:
    """Each span's row in one lane (as `_pack`): the first whose last bar ended before it."""
    ends: list[float] = []
    out = []
    for span in spans:
        x0, x1 = (scale.x(t) for t in span)
        x1 = max(x1, x0 + MIN_BAR)
        for i, end in enumerate(ends):
            if end + 1 < x0:
                ends[i] = x1
                out.append(i)
                break
        else:
            ends.append(x1)
            out.append(len(ends) - 1)
    return out


def _model_name(t: Any) -> str:
    return " ".join(str(x) for x in (t.provider, t.model) if x) or "?"


def _model_lines(chain: Chain, turns: Sequence[Any]) -> list[str]:
    """What the label column says of the model's lane: which model, how many turns."""
    models = sorted({str(t.model or t.provider or "?") for t in turns})
    which = models[0] if len(models) == 1 else f"{len(models)} models"
    lines = [
        "model",
        which if len(which) <= NAME_CH else which[: NAME_CH - 1] + "…",
        f"{len(turns)} turn{'' if len(turns) == 1 else 's'}",
    ]
    if chain.turns_cut:
        lines.append(f"{chain.turns_cut} more not drawn")
    return lines


def _call_names(calls: Any) -> list[str]:
    """The names of the tool calls a turn asked for (structs, as the engine gives them)."""
    out = []
    for c in calls or []:
        name = c.get("name") if isinstance(c, dict) else getattr(c, "name", None)
        out.append(str(name or "?"))
    return out


def turn_tooltip(t: Any, t0: float) -> str:
    parts = [f"#{t.id}" if t.id is not None else "#?", f"model turn: {_model_name(t)}"]
    parts.append(f"+{dur(t.at_ms - t0)}")
    if t.durationMs is not None:
        parts.append(f"took {dur(t.durationMs)}")
    if t.ttftMs is not None:
        parts.append(f"first output after {dur(t.ttftMs)}")
    elif t.streamed is False:
        parts.append("not streamed")
    parts.append(f"stop: {t.stopReason or 'none'}")
    names = _call_names(t.toolCalls)
    parts.append("asked for " + (", ".join(names) if names else "no tool"))
    if t.inputTokens is not None or t.outputTokens is not None:
        n_in, n_out = ("?" if n is None else str(n) for n in (t.inputTokens, t.outputTokens))
        parts.append(f"tokens: {n_in} in, {n_out} out")
    if t.error:
        parts.append(f"error: {t.error}")
    if t.complete is False:
        parts.append("cut: the answer never completed")
    return " · ".join(parts)


def _turn(t: Any, x0: float, x1: float, y: float, scale: Scale, t0: float) -> str:
    """A model turn: a bar from its request to its answer's end, a white tick at its first
    output, a cut one paler with a dashed outline and the word "cut"."""
    w = max(x1 - x0, MIN_BAR)
    cls = "bar model"
    if t.complete is False:
        cls += " cut"
    if t.error:
        cls += " err"
    top = y - ROW_H / 2 + 2
    bar = (
        f'<rect class="{cls}" x="{num(x0)}" y="{num(top)}" width="{num(w)}" '
        f'height="{num(ROW_H - 4)}"/>'
    )
    tick = ""
    if t.ttftMs is not None:
        tx = LABEL_W + scale.x(float(t.at_ms) + float(t.ttftMs))
        tick = line(tx, top + 1, tx, top + ROW_H - 5, "ttft")
    cut = ""
    if t.complete is False:  # inside the bar when it has room (a hung turn runs to the end)
        cut = text(x0 + 3 if w >= 24 else x0 + w + 3, y + 3, "cut", "lbl small")
    return f'<g class="turn">{bar}{tick}{cut}<title>{esc(turn_tooltip(t, t0))}</title></g>'


def _asks(
    recs: Sequence[Any],
    where: dict[int, tuple[float, float, float]],
    asked: dict[tuple[int, int], tuple[float, float, float]],
) -> list[str]:
    """A thin arrow from each model turn down to each `tools/call` it asked for: from the
    turn's end (or from above the call, when the call began before the answer ended)."""
    out = []
    for r in recs:
        turn = asked.get((int(r.src), int(r.model_target))) if r.model_target is not None else None
        if turn is None or r.seq not in where:
            continue
        x0, y0 = max(min(turn[1], where[r.seq][0]), turn[0]), turn[2] + ROW_H / 2 - 2
        x1, y1 = where[r.seq][0], where[r.seq][2] - ROW_H / 2 + 2
        mid = (y0 + y1) / 2
        d = f"M{num(x0)} {num(y0)}C{num(x0)} {num(mid)} {num(x1)} {num(mid)} {num(x1)} {num(y1)}"
        tip = f"model turn #{r.model_turn} asked for #{r.id} {_call(r)} ({r.model_join} join)"
        out.append(
            f'<g class="link ask"><path d="{d}" marker-end="url(#arrow)"/>'
            f"<title>{esc(tip)}</title></g>"
        )
    return out


@dataclass(frozen=True, slots=True)
class Stalled:
    """The stalls drawn: bands over the lanes, their labels above them, and the axis's
    breaks that a stall fell into (break index -> the stalls' tooltip)."""

    bands: str
    labels: str
    on_breaks: dict[int, str]


def stall_label(s: Silence) -> str:
    return f"stall {dur(s.ms)} · {s.waited_on}"


def stall_tooltip(s: Silence, t0: float) -> str:
    parts = [
        f"stall of {dur(s.ms)} from +{dur(s.start_ms - t0)}",
        f"waited on {s.waited_on}",
        s.detail,
    ]
    if s.in_flight:
        parts.append(f"in flight: {s.in_flight}")
    return " · ".join(parts)


def _stalls(chain: Chain, scale: Scale, top: float, bottom: float, t0: float) -> Stalled:
    """Each stall as a band over every lane, from the silence's start to its end, labelled
    above the lanes with its length and who was waited on. A silence with nothing of the
    chain in flight is what the axis cuts out as a break: there the band covers the break
    (a stall is never hidden by one) and the break reads "stall", not "idle"."""
    bands, labels = [], []
    on_breaks: dict[int, str] = {}
    for s in chain.stalls:
        x0, x1 = scale.x(s.start_ms), scale.x(s.end_ms)
        breaks = [
            i
            for i in range(1, len(scale.starts))
            if s.start_ms < scale.starts[i] and s.end_ms > scale.ends[i - 1]
        ]
        for i in breaks:
            x0, x1 = min(x0, scale.xs[i] - BREAK_W), max(x1, scale.xs[i])
        if x1 - x0 < MIN_STALL:
            x0, x1 = (x0 + x1 - MIN_STALL) / 2, (x0 + x1 + MIN_STALL) / 2
        tip = stall_tooltip(s, t0)
        cls = f"stall w-{s.waited_on}"
        bands.append(rect(LABEL_W + x0, top, x1 - x0, bottom - top, cls, tip))
        for i in breaks:
            on_breaks[i] = tip if i not in on_breaks else f"{on_breaks[i]}; {tip}"
        mid = LABEL_W + (x0 + x1) / 2
        said = text(mid, STALL_H - 3, stall_label(s), "lbl small stall-lbl", "middle")
        labels.append(f'<g class="stall-at">{said}<title>{esc(tip)}</title></g>')
    return Stalled("".join(bands), "".join(labels), on_breaks)


def _axis(scale: Scale, y: float, t0: float, stalled: dict[int, str]) -> str:
    """The time axis: ticks, and each break with its idle time, said a stall where one
    fell into it (`stalled`: break index -> the stalls' tooltip)."""
    out = [line(LABEL_W, y, LABEL_W + PLOT_W, y, "axis")]
    for s, e, x in zip(scale.starts, scale.ends, scale.xs, strict=True):
        span_px = max((e - s) * scale.k, 1)
        step = nice_step(100 / scale.k) if scale.k > 0 else 1.0
        first = math.ceil((s - t0) / step) * step
        ticks = [s - t0] if span_px < 60 else []
        t = first
        while t <= e - t0 and len(ticks) < 12:
            ticks.append(t)
            t += step
        for off in ticks:
            tx = LABEL_W + x + (off - (s - t0)) * scale.k
            out.append(line(tx, y, tx, y + 4, "tick"))
            # "drop": a tick label that would collide is left out by the page's script
            # (the others carry the scale), not moved off its tick.
            out.append(text(tx, y + 15, "+" + dur(off) if off else "0", "lbl small drop", "middle"))
    for i, (x, idle) in enumerate(scale.breaks, start=1):
        bx = LABEL_W + x
        zigzag = f"M{num(bx - 4)} {num(y - 6)}l4 12M{num(bx + 1)} {num(y - 6)}l4 12"
        out.append(f'<path class="brk" d="{zigzag}"/>')
        if i in stalled:
            # Said as short as "idle" was, where it was: the label above the band names
            # who was waited on.
            label = text(bx, y - 9, f"{dur(idle)} stall", "lbl small", "middle")
            out.append(f'<g class="stall-brk">{label}<title>{esc(stalled[i])}</title></g>')
        else:
            out.append(text(bx, y - 9, f"{dur(idle)} idle", "lbl small", "middle"))
    return "".join(out)


def nice_step(ms: float) -> float:
    """The 1-2-5 step at or above `ms`."""
    if ms <= 0:
        return 1.0
    p = 10 ** math.floor(math.log10(ms))
    for m in (1, 2, 5, 10):
        if m * p >= ms:
            return float(m * p)
    return float(10 * p)
