"""A session chain's timeline as SVG: one lane per session, every POST on one time axis.

A request is a bar from its start to its answer, coloured by outcome (`style`); a
notification is a dot, the client's answer to a server→client request a diamond, the end
of a session a bar across its lane with the reason. A retry is an arrow from the failed
attempt to the attempt that repeats it, labelled with how (resend, reissue, reinit) and
after how long; a continuation of an input-required result is a dashed arrow; a session
re-initialised after a 404 is an arrow from its end to the new `initialize`. So a 404, the
re-initialisation and the resend read as one story. Injected faults carry a thick outline
and the word "injected" in their tooltip.

Idle stretches longer than `GAP_MS` (and a fifth of the whole) are cut out of the axis and
shown as a break with their length, so that a minute of silence does not squeeze the
interesting second into a pixel.
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final

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
    return " · ".join(parts)


def draw(chain: Chain) -> str:
    """The chain's timeline (an empty string when no record has a time)."""
    recs = [r for r in chain.records if r.at_ms is not None]
    if not recs:
        return ""
    scale = scale_of([_span(r) for r in recs], PLOT_W)
    t0 = scale.starts[0]
    lanes = {s.session: i for i, s in enumerate(chain.sessions)}
    rows = _pack(recs, scale)
    said = _lane_lines(chain, recs)
    # A lane is as deep as its rows of marks, and as its name and figures (one a line).
    # The last line's baseline stays inside the lane (which reaches 8 px below its rows).
    depth = [
        max(1, math.ceil((10 + LINE_H * (len(said[s.session]) - 1) - 8) / ROW_H))
        for s in chain.sessions
    ]
    for r in recs:
        depth[lanes[r.session]] = max(depth[lanes[r.session]], rows[r.seq] + 1)
    tops = []
    y = 0.0
    for d in depth:
        tops.append(y + LANE_PAD)
        y += LANE_PAD + d * ROW_H + 8
    height = y + AXIS_H
    where: dict[int, tuple[float, float, float]] = {}  # seq -> x start, x end, y middle
    body: list[str] = [_lanes(chain, said, tops, depth)]
    marks: list[str] = []
    for r in recs:
        x0, x1 = (LABEL_W + scale.x(t) for t in _span(r))
        y_mid = tops[lanes[r.session]] + rows[r.seq] * ROW_H + ROW_H / 2
        where[r.seq] = (x0, max(x1, x0 + MIN_BAR), y_mid)
        marks.append(_mark(r, x0, x1, y_mid, tops[lanes[r.session]], depth, lanes, t0))
    body.append("".join(_links(chain, recs, where)))
    body.extend(marks)
    body.append(_axis(scale, height - AXIS_H, t0))
    total = f"{len(recs)} records in {len(chain.sessions)} session(s)"
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


def _lane_lines(chain: Chain, recs: Sequence[Any]) -> dict[str, list[str]]:
    """What the label column says of each lane, a line each: the session's name (cut to
    the column's width; the heading above the timeline has it whole), its GET streams,
    the requests the server sent it, the records not drawn."""
    out = {}
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


def _lanes(chain: Chain, said: dict[str, list[str]], tops: list[float], depth: list[int]) -> str:
    out = []
    for i, s in enumerate(chain.sessions):
        top = tops[i] - LANE_PAD + 4
        h = LANE_PAD + depth[i] * ROW_H + 4
        out.append(f'<rect class="lane" x="0" y="{num(top)}" width="100%" height="{num(h)}"/>')
        name, *figures = said[s.session]
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
    lanes: dict[str, int],
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


def _axis(scale: Scale, y: float, t0: float) -> str:
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
    for x, idle in scale.breaks:
        bx = LABEL_W + x
        zigzag = f"M{num(bx - 4)} {num(y - 6)}l4 12M{num(bx + 1)} {num(y - 6)}l4 12"
        out.append(f'<path class="brk" d="{zigzag}"/>')
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
