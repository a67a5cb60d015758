"""lab/MATRIX.html as a reader uses it: grouped, with a filter, nothing out of reach.

The page is the report's compare section over the lab's runs (`matrix.write_html`): one
heat-map row per client × scenario, some 300 of them. This regroups those rows: one
`<details>` per client whose summary line counts what matters (rows, calls, and in how many
the calls failed, were retried, were retried unsafely, or a 404 was never followed by a
new session); a toggle groups them by fault instead; a text filter keeps only the rows
whose client or scenario contains every word typed (the report's "every figure" table
too). All groups sit in one container that scrolls sideways, with the row names held at
its left edge, so every column — the 404 one last — can be reached at any window width.
Vanilla JavaScript inlined in the page: it works from file://.

It rewrites the page the report wrote, from the rows in it, and is idempotent (a page it
grouped already is grouped again from its own rows): so the committed matrix can be
regrouped without the lab's runs, `python -m mcp_layers_lab.matrix_page lab/MATRIX.html`.
The lab adds one column the report does not have, first: *waited on* (`matrix.write_html`
gives each row's text: who each stall waited on, as in MATRIX.md); a page regrouped
without the runs keeps the column it has.

`#find=codex` at the end of the page's address opens it filtered (a link to one client's
rows). `#selftest` at the end of the page's address runs the page's own check (the Chromium
tests): it types a client's name into the filter, groups by fault and back, and measures
what is cut off where the reader cannot scroll to it; what it saw goes into
`<output id="matrix-selftest">`.
"""

from __future__ import annotations

import html
import json
import re
import sys
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Final

#: The report's heat map (a scrolling div around it), as `analysis/report/page.py` writes it.
_HEAT: Final = re.compile(
    r"<div class=['\"]scroll['\"]>\s*<table class=['\"]heat['\"]>.*?</table>\s*</div>", re.S
)
#: This module's own block, assets and their markers (so that it can run again).
_BLOCK: Final = re.compile(r"<!-- mx -->.*?<!-- /mx -->", re.S)
_ASSET: Final = re.compile(r"<(style|script) id=['\"]mx-(css|js)['\"]>.*?</\1>", re.S)
_THEAD: Final = re.compile(r"<thead>(.*?)</thead>", re.S)
_TH: Final = re.compile(r"<th[^>]*>(.*?)</th>", re.S)
_ROW: Final = re.compile(
    r"<tr data-client=(['\"])(.*?)\1[^>]*>\s*<th scope=['\"]row['\"]>(.*?)<br>"
    r"<small>(.*?)</small></th>(.*?)</tr>",
    re.S,
)
_TD: Final = re.compile(r"<td[^>]*>.*?</td>", re.S)
_TAG: Final = re.compile(r"<[^>]+>")
_NUMBER: Final = re.compile(r"-?[0-9][0-9,]*(?:\.[0-9]+)?")

#: The heat map's column that is summed in a group's summary line.
CALLS: Final = "calls"
#: (the heat map's column, the row's flag, the summary's words): a group's summary counts
#: its rows whose value in that column is neither zero nor empty.
FLAGS: Final = (
    ("failure rate", "failed", "failure rate > 0 in"),
    ("failed calls retried", "retried", "failed calls retried in"),
    ("unsafe retries", "unsafe", "unsafe retries in"),
    ("sessions ended by 404, never re-initialised", "noreinit", "404 never re-initialised in"),
)
#: Column widths (em): fixed, so that the groups' tables line up column by column.
NAME_EM: Final = 13.0
COLUMN_EM: Final = 6.5
#: The lab's own column (MATRIX.md's *waited on*): text, so wider than a figure's.
WAITED_ON: Final = "waited on"
WAITED_ON_EM: Final = 10.0


class PageError(ValueError):
    """The page holds no heat map this module can read."""


@dataclass(frozen=True)
class Row:
    client: str
    scenario: str
    #: The heat map's cells as the report wrote them (`<td class='h2'>4</td>…`).
    cells: str
    #: The cells' text, by column name.
    values: dict[str, str]

    @property
    def fault(self) -> str:
        """The fault of the scenario (`session_404+again` is the fault `session_404` with the
        model calling again: `mcp_layers_lab.run.scenario_name`)."""
        return self.scenario.split("+", 1)[0]

    def flags(self) -> list[str]:
        return [flag for column, flag, _ in FLAGS if _nonzero(self.values.get(column))]

    def calls(self) -> int:
        found = _NUMBER.match(self.values.get(CALLS, ""))
        return int(found.group().replace(",", "")) if found else 0


def _text(fragment: str) -> str:
    return html.unescape(_TAG.sub("", fragment)).strip()


def _nonzero(text: str | None) -> bool:
    found = _NUMBER.match(text or "")
    return found is not None and float(found.group().replace(",", "")) != 0.0


def read(page: str) -> tuple[list[str], list[Row]]:
    """The heat map's column names (without the first, the row names) and its rows."""
    found = _BLOCK.search(page) or _HEAT.search(page)
    if found is None:
        raise PageError("no heat map (the report's compare section) in the page")
    part = found.group()
    head = _THEAD.search(part)
    if head is None:
        raise PageError("the heat map has no header")
    columns = [_text(th) for th in _TH.findall(head.group(1))][1:]
    rows: list[Row] = []
    for m in _ROW.finditer(part):
        cells = _TD.findall(m.group(5))
        values = dict(zip(columns, (_text(c) for c in cells), strict=False))
        rows.append(Row(_text(m.group(2)), _text(m.group(4)), "".join(cells), values))
    if not rows:
        raise PageError("the heat map has no rows")
    return columns, rows


def summary(rows: list[Row], columns: list[str]) -> str:
    """A group's summary line (the page's script writes the same for groups it makes)."""
    parts = [f"{len(rows)} row{'' if len(rows) == 1 else 's'}"]
    if CALLS in columns:
        parts.append(f"{sum(r.calls() for r in rows):,} calls")
    for column, flag, words in FLAGS:
        if column in columns:
            parts.append(f"{words} {sum(flag in r.flags() for r in rows)}")
    return " · ".join(parts)


def _esc(text: str) -> str:
    return html.escape(text, quote=True)


def _row(r: Row) -> str:
    flags = "".join(f" data-{f}" for f in r.flags())
    return (
        f"<tr data-client='{_esc(r.client)}' data-scenario='{_esc(r.scenario)}' "
        f"data-fault='{_esc(r.fault)}' data-calls='{r.calls()}'{flags}>"
        f"<th scope='row'><span class='mx-c'>{_esc(r.client)}</span><br>"
        f"<small>{_esc(r.scenario).replace('+', '<wbr>+')}</small></th>"
        f"{r.cells}</tr>"
    )


def _em(column: str) -> float:
    return WAITED_ON_EM if column == WAITED_ON else COLUMN_EM


def _table(columns: list[str], rows: list[Row]) -> str:
    width = NAME_EM + sum(_em(c) for c in columns)
    cols = f"<col style='width:{NAME_EM}em'>" + "".join(
        f"<col style='width:{_em(c):g}em'>" for c in columns
    )
    head = "".join(f"<th scope='col'>{_esc(c)}</th>" for c in columns)
    return (
        f"<table class='heat mx-table' style='width:{width:g}em'><colgroup>{cols}</colgroup>"
        f"<thead><tr><th scope='col'>client / scenario</th>{head}</tr></thead>"
        f"<tbody>{''.join(_row(r) for r in rows)}</tbody></table>"
    )


def _group(key: str, rows: list[Row], columns: list[str]) -> str:
    return (
        f"<details class='mx-group' data-key='{_esc(key)}'><summary><b>{_esc(key)}</b> "
        f"<span class='mx-sum'>{_esc(summary(rows, columns))}</span></summary>"
        f"{_table(columns, rows)}</details>"
    )


def block(columns: list[str], rows: list[Row]) -> str:
    """The grouped matrix: the tools (filter, grouping), then one group per client."""
    by_client: dict[str, list[Row]] = {}
    for r in rows:
        by_client.setdefault(r.client, []).append(r)
    spec = {
        "calls": CALLS in columns,
        "flags": [[flag, words] for column, flag, words in FLAGS if column in columns],
    }
    groups = "".join(_group(k, v, columns) for k, v in by_client.items())
    return (
        "<!-- mx --><div class='mx' id='matrix' "
        f"data-summary='{_esc(json.dumps(spec, ensure_ascii=False))}'>"
        "<div class='mx-tools'>"
        "<label>Find <input type='search' id='mx-filter' autocomplete='off' "
        "placeholder='client or fault, e.g. codex session_404'></label>"
        "<span role='radiogroup' aria-label='group by'>group by "
        "<label><input type='radio' name='mx-by' value='client' checked> client</label> "
        "<label><input type='radio' name='mx-by' value='fault'> fault</label></span>"
        "<button type='button' id='mx-open'>open all</button>"
        "<button type='button' id='mx-close'>close all</button>"
        f"<output id='mx-count'>{len(rows)} rows</output></div>"
        "<p class='note'>One group per client (or per fault): open one for its rows. Find keeps "
        "the rows whose client or scenario contains every word typed. The table scrolls "
        "sideways; the row names (by client: the scenarios) stay at its left edge.</p>"
        f"<div class='mx-scroll'><div id='mx-groups' data-by='client'>{groups}</div></div>"
        "<output id='matrix-selftest' hidden></output></div><!-- /mx -->"
    )


def _asset(name: str) -> str:
    return resources.files("mcp_layers_lab").joinpath(name).read_text(encoding="utf-8")


def with_waited_on(
    columns: list[str], rows: list[Row], waited_on: dict[tuple[str, str], str]
) -> tuple[list[str], list[Row]]:
    """The *waited on* column first, each row's text from `waited_on` by (client,
    scenario) as the records name them (`—` for a row it has none for); a column of that
    name already there is replaced."""
    at = columns.index(WAITED_ON) if WAITED_ON in columns else None
    out: list[Row] = []
    for r in rows:
        cells = _TD.findall(r.cells)
        if at is not None and at < len(cells):
            del cells[at]
        text = waited_on.get((r.client, r.scenario), "—")
        values = {k: v for k, v in r.values.items() if k != WAITED_ON}
        # Words, not a figure: left-aligned and wrapped (the report's cells do not wrap),
        # inline, so that the stylesheet every grouped page embeds stays as it was.
        style = "text-align:left;white-space:normal"
        cell = f"<td class='mx-wait' style='{style}'>{_esc(text)}</td>"
        out.append(Row(r.client, r.scenario, cell + "".join(cells), {WAITED_ON: text, **values}))
    return [WAITED_ON, *(c for c in columns if c != WAITED_ON)], out


def group_page(page: str, waited_on: dict[tuple[str, str], str] | None = None) -> str:
    """The page with its heat map grouped (idempotent); with `waited_on`, its *waited on*
    column (`with_waited_on`)."""
    columns, rows = read(page)
    if waited_on is not None:
        columns, rows = with_waited_on(columns, rows, waited_on)
    page = _ASSET.sub("", page)
    found = _BLOCK.search(page) or _HEAT.search(page)
    assert found is not None  # read() found it
    page = page[: found.start()] + block(columns, rows) + page[found.end() :]
    css = f"<style id='mx-css'>{_asset('matrix_page.css')}</style>"
    js = f"<script id='mx-js'>{_asset('matrix_page.js')}</script>"
    head_end, body_end = page.rfind("</head>"), page.rfind("</body>")
    if head_end < 0 or body_end < 0:
        raise PageError("the page has no </head> or </body>")
    return page[:head_end] + css + page[head_end:body_end] + js + page[body_end:]


def group_file(path: Path, waited_on: dict[tuple[str, str], str] | None = None) -> None:
    path.write_text(group_page(path.read_text(encoding="utf-8"), waited_on), encoding="utf-8")


def main(argv: list[str] | None = None) -> int:
    paths = sys.argv[1:] if argv is None else argv
    if not paths:
        print("usage: python -m mcp_layers_lab.matrix_page MATRIX.html...", file=sys.stderr)
        return 2
    for name in paths:
        try:
            group_file(Path(name))
        except (OSError, PageError) as exc:
            print(f"{name}: {exc}", file=sys.stderr)
            return 1
        print(f"grouped: {name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
