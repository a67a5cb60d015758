"""lab/MATRIX.html, grouped (`mcp_layers_lab.matrix_page`): one group per client with a
summary line of counts, a toggle to group by fault, a text filter; and nothing cut off
where the reader cannot scroll to it.

The page is built the lab's way (`matrix.write_html`: the report's compare section, then
grouped) from a small fixture, the lab's real recordings under tests/analysis/fixtures;
the committed lab/MATRIX.html must be that grouping of its own rows. In headless Chromium
the page's self-test (#selftest) types a client's name into the filter, groups by fault
and back, and measures clipping, at 1280 and 800 px.
"""

from __future__ import annotations

import html
import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from mcp_layers_lab import matrix, matrix_page
from mcp_layers_support.chromium import run_chromium, selftest_result

REPO = Path(__file__).resolve().parents[2]
FIXTURES = REPO / "tests" / "analysis" / "fixtures"
COMMITTED = REPO / "lab" / "MATRIX.html"
WIDTHS = (1280, 800)


@pytest.fixture(scope="module")
def page(tmp_path_factory: pytest.TempPathFactory) -> Path:
    runs = tmp_path_factory.mktemp("runs")
    recordings = sorted(FIXTURES.glob("real_lab_*.jsonl"))
    assert len(recordings) >= 6
    for path in recordings:
        shutil.copy(path, runs / path.name)
    target = tmp_path_factory.mktemp("page") / "MATRIX.html"
    matrix.write_html(runs, target)
    return target


def _groups(text: str) -> list[tuple[str, str]]:
    """(key, summary) of each group, as the HTML has them."""
    return [
        (html.unescape(k), html.unescape(re.sub(r"<[^>]+>", "", s)))
        for k, s in re.findall(
            r"<details class='mx-group' data-key='([^']*)'><summary>(.*?)</summary>", text
        )
    ]


def test_the_page_has_a_group_per_client_and_the_filter(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    columns, rows = matrix_page.read(text)
    clients = list(dict.fromkeys(r.client for r in rows))
    groups = _groups(text)
    assert [k for k, _ in groups] == clients
    assert len(clients) >= 5
    for key, line in groups:
        mine = [r for r in rows if r.client == key]
        assert line == f"{key} {matrix_page.summary(mine, columns)}"
        assert line.startswith(f"{key} {len(mine)} row")
        assert "calls" in line and "failed calls retried in" in line
        assert "404 never re-initialised in" in line
    # The filter, the toggle by fault, and one container that scrolls sideways.
    assert "<input type='search' id='mx-filter'" in text
    assert "name='mx-by' value='client' checked" in text
    assert "name='mx-by' value='fault'" in text
    assert "<div class='mx-scroll'>" in text
    assert ".mx-scroll { overflow-x: auto;" in text
    assert "<output id='matrix-selftest'" in text
    # Every row of the report's heat map is in a group, each with every column (the 404
    # one among them).
    assert len(text.split("<tr data-client=")) - 1 == len(rows)
    assert "sessions ended by 404, never re-initialised" in columns
    assert all(len(r.values) == len(columns) for r in rows)
    assert "<table class='heat'>" not in text  # the ungrouped map is gone


def test_grouping_is_idempotent(page: Path) -> None:
    text = page.read_text(encoding="utf-8")
    assert matrix_page.group_page(text) == text


def test_fault_of_a_scenario() -> None:
    row = matrix_page.Row("c", "session_404+again", "", {})
    assert row.fault == "session_404"
    assert matrix_page.Row("c", "none", "", {}).fault == "none"


def test_a_page_without_a_heat_map_is_refused() -> None:
    with pytest.raises(matrix_page.PageError):
        matrix_page.group_page("<html><head></head><body><p>nothing</p></body></html>")


def test_the_committed_matrix_is_grouped() -> None:
    text = COMMITTED.read_text(encoding="utf-8")
    assert matrix_page.group_page(text) == text, (
        "lab/MATRIX.html is not grouped as matrix_page groups it now: "
        "python -m mcp_layers_lab.matrix_page lab/MATRIX.html"
    )
    _, rows = matrix_page.read(text)
    assert len(_groups(text)) == len({r.client for r in rows}) >= 10


def _selftest(page: Path, profile: Path, width: int) -> dict[str, Any]:
    dom = run_chromium(
        profile, f"--window-size={width},900", "--dump-dom", page.as_uri() + "#selftest"
    )
    return selftest_result(dom, "matrix-selftest")


def _check(result: dict[str, Any], width: int) -> None:
    assert result["errors"] == []
    assert result["width"] == width
    rows, groups = result["rows"], result["groups"]
    assert groups >= 5 and rows > groups
    assert result["closedRows"] == 0  # the groups start closed: no 300-row wall
    assert result["openRows"] == rows
    assert result["clipped"] == [], result["clipped"]
    scroll = result["scroll"]
    assert scroll["overflowX"] in ("auto", "scroll")
    # Typing a client's name leaves that client's rows and no other, in one open group.
    f = result["filter"]
    assert f["expected"] > 0 and f["visible"] == f["expected"] and f["others"] == 0, f
    assert f["groupsShown"] == 1
    assert f["count"] == f"{f['expected']} of {rows} rows"
    assert f["clipped"] == []
    # Grouped by fault: every row in one of the fault groups, the filter still applied.
    g = result["fault"]
    assert g["rows"] == rows and g["groups"] == len(set(g["keys"])) > 1
    assert "+" not in "".join(g["keys"])
    assert g["visible"] == f["expected"] and g["others"] == 0
    assert g["clipped"] == []
    # Back by client: the summaries the script writes are the ones Python wrote.
    assert result["restored"] == rows
    assert result["summariesAgree"] is True


@pytest.mark.parametrize("width", WIDTHS)
def test_in_chromium_the_filter_keeps_one_client_and_nothing_is_clipped(
    page: Path, tmp_path: Path, width: int
) -> None:
    _check(_selftest(page, tmp_path / "profile", width), width)


@pytest.mark.parametrize("width", WIDTHS)
def test_in_chromium_the_committed_matrix_too(tmp_path: Path, width: int) -> None:
    result = _selftest(COMMITTED, tmp_path / "profile", width)
    _check(result, width)
    # The committed matrix: all its columns reachable, the table wider than the window.
    assert result["scroll"]["scrollWidth"] > result["scroll"]["clientWidth"]


def test_the_self_test_sees_a_clipped_matrix(page: Path, tmp_path: Path) -> None:
    """Not vacuous: with its container's overflow hidden (the old fixed width), the columns
    past the window are out of reach, and the self-test says so."""
    broken = tmp_path / "broken.html"
    text = page.read_text(encoding="utf-8")
    broken.write_text(
        text.replace("</head>", "<style>.mx-scroll { overflow-x: hidden; }</style></head>", 1),
        encoding="utf-8",
    )
    result = _selftest(broken, tmp_path / "profile", 800)
    assert any(c["what"].startswith("div.mx-scroll") for c in result["clipped"]), result["clipped"]
