"""Hand-made SVG: the few chart shapes the report draws, as strings.

Why no charting library: the page must work offline from one file and stay small, and the
charts are few and fixed (a stacked bar, a histogram, a timeline). Drawing them here keeps
them testable as text, keeps every figure's label in the markup (readable without colour,
by a screen reader, and by a test), and adds no JavaScript to ship, pin or audit.
Colours are CSS classes (`report.css`); every mark has a `<title>` (its tooltip) and the
charts carry their numbers as text too.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from html import escape
from typing import Final

#: Font size (px) of chart labels, and the width a character is reckoned at.
FONT: Final = 11
CHAR_W: Final = 7.0


def esc(text: object) -> str:
    return escape(str(text), quote=True)


def num(x: float) -> str:
    """A coordinate, short."""
    return f"{x:.1f}".rstrip("0").rstrip(".")


def svg(width: float, height: float, body: str, *, label: str, cls: str = "chart") -> str:
    """An SVG element that scales down in a narrow window (viewBox, width 100%)."""
    return (
        f'<svg class="{cls}" role="img" aria-label="{esc(label)}" '
        f'viewBox="0 0 {num(width)} {num(height)}" width="{num(width)}" '
        f'preserveAspectRatio="xMinYMin meet">{body}</svg>'
    )


def rect(x: float, y: float, w: float, h: float, cls: str, title: str, extra: str = "") -> str:
    return (
        f'<rect class="{cls}" x="{num(x)}" y="{num(y)}" width="{num(max(w, 0))}" '
        f'height="{num(h)}"{extra}><title>{esc(title)}</title></rect>'
    )


def line(x1: float, y1: float, x2: float, y2: float, cls: str) -> str:
    return f'<line class="{cls}" x1="{num(x1)}" y1="{num(y1)}" x2="{num(x2)}" y2="{num(y2)}"/>'


def text(x: float, y: float, content: str, cls: str = "lbl", anchor: str = "start") -> str:
    return (
        f'<text class="{cls}" x="{num(x)}" y="{num(y)}" text-anchor="{anchor}">'
        f"{esc(content)}</text>"
    )


#: The same for the small labels (10 px).
CHAR_W_SMALL: Final = 6.0


def fits(content: str, width: float, char_w: float = CHAR_W) -> bool:
    return len(content) * char_w + 4 <= width


def count_text(n: int, width: float) -> str:
    """A count as a small label `width` wide holds it: 2624, else 22k or 1.3M (the exact
    count is in the mark's tooltip and the chart's label)."""
    if fits(str(n), width, CHAR_W_SMALL):
        return str(n)
    if n < 1_000_000:
        return f"{n / 1000:.0f}k"
    return f"{n / 1_000_000:.1f}M"


@dataclass(frozen=True, slots=True)
class Part:
    """One segment of a stacked bar."""

    label: str
    value: int
    cls: str


def stacked_bar(parts: Sequence[Part], *, width: float = 460, label: str) -> str:
    """One horizontal bar split into parts, each labelled inside when it fits; the parts'
    counts and shares in their tooltips and in the aria label."""
    total = sum(p.value for p in parts)
    height = 22.0
    body = []
    x = 0.0
    for p in parts:
        if not p.value:
            continue
        w = width * p.value / total
        share = f"{100 * p.value / total:.1f}%"
        body.append(rect(x, 0, w, height, p.cls, f"{p.label}: {p.value} ({share})"))
        tag = f"{p.label} {p.value}"
        if fits(tag, w):
            body.append(text(x + 3, 15, tag, "lbl in"))
        x += w
    said = ", ".join(f"{p.label} {p.value}" for p in parts if p.value)
    return svg(width, height, "".join(body), label=f"{label}: {said or 'none'}")


def histogram(
    bins: Sequence[int], names: Sequence[str], *, cls: str, label: str, width: float = 460
) -> str:
    """Vertical bars, one per bin, the bin's name under every other bar and its count above
    each bar that has any."""
    height, top, bottom = 120.0, 14.0, 18.0
    peak = max(bins) if bins else 0
    slot = width / max(len(bins), 1)
    body = []
    for i, (n, name) in enumerate(zip(bins, names, strict=True)):
        x = i * slot
        if n:
            h = (height - top - bottom) * math.sqrt(n / peak)  # sqrt: small bins stay visible
            y = height - bottom - h
            body.append(rect(x + 1, y, slot - 2, h, cls, f"{name}: {n}"))
            body.append(text(x + slot / 2, y - 3, count_text(n, slot), "lbl small", "middle"))
        if i % 2 == 0:
            body.append(text(x + slot / 2, height - 5, name, "lbl small", "middle"))
    body.append(line(0, height - bottom, width, height - bottom, "axis"))
    said = ", ".join(f"{name} {n}" for n, name in zip(bins, names, strict=True) if n)
    return svg(width, height, "".join(body), label=f"{label}: {said or 'none'}")


def duration(ms: float) -> str:
    """A duration as people read it: 850 ms, 1.2 s, 3 min."""
    if ms < 1:
        return f"{ms:.2g} ms"
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 600_000:
        return f"{ms / 1000:.3g} s"
    return f"{ms / 60_000:.3g} min"


def bin_names(edges: Sequence[float]) -> list[str]:
    """Names of the bins below each edge and above the last: <1 ms, <2 ms, …, ≥1 min."""
    return [f"<{duration(e)}" for e in edges] + [f"≥{duration(edges[-1])}"]
