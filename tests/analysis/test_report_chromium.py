"""The report in a real browser: Debian's headless Chromium opens the page from `file://`.

The page runs its own self-test when its address ends in `#selftest` (it works the client
filter and writes what it saw into the DOM, which `--dump-dom` reads); each section is
screenshot alone (`#only=NAME`) and the picture checked: not blank, and the colours of what
the section must show are in it. The golden data are the real agent recordings.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from analysis_helpers import SYNTHETIC, invoke
from PIL import Image
from report_helpers import (
    REAL_CLIENTS,
    AgentRun,
    chromium,
    run_chromium,
    selftest_result,
    write_report,
)

#: Colours from report.css that each section's screenshot must contain (RGB).
OK_GREEN = (0x2E, 0x8B, 0x57)
TRANSPORT_RED = (0xC8, 0x37, 0x2D)
REINIT_PINK = (0xCC, 0x79, 0xA7)
HEAT_DARK = (0x2F, 0x6F, 0xB0)
EXPECTED_COLOURS = {
    "overview": (OK_GREEN, TRANSPORT_RED),
    "retries": (REINIT_PINK,),
    "sessions": (OK_GREEN, TRANSPORT_RED),
    "compare": (HEAT_DARK,),
}


@pytest.fixture(scope="module")
def report(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str]]:
    chromium()  # skips the module's tests, saying why, without a browser
    where = tmp_path_factory.mktemp("report")
    html = where / "report.html"
    yield html, write_report(html)


def test_page_loads_without_a_script_error_and_its_filter_works(
    report: tuple[Path, str], tmp_path: Path
) -> None:
    html, _ = report
    dom = run_chromium(tmp_path / "profile", "--dump-dom", html.as_uri() + "#selftest")
    result = selftest_result(dom)
    assert result["errors"] == []
    assert result["clients"] == list(REAL_CLIENTS)
    assert isinstance(result["charts"], int) and result["charts"] >= 20  # drawn, with a size
    assert isinstance(result["marks"], int) and result["marks"] > 50
    # Only the first client left ticked: fewer items shown, all of that client; "all" back.
    assert result["kept"] == REAL_CLIENTS[0]
    assert isinstance(result["after"], int) and isinstance(result["before"], int)
    assert 0 < result["after"] < result["before"]
    assert result["othersHidden"] is True
    assert result["restored"] == result["before"]


@pytest.mark.parametrize("section", sorted(EXPECTED_COLOURS))
def test_each_section_renders(report: tuple[Path, str], tmp_path: Path, section: str) -> None:
    html, _ = report
    shot = tmp_path / f"{section}.png"
    run_chromium(
        tmp_path / "profile",
        "--window-size=1200,1600",
        f"--screenshot={shot}",
        html.as_uri() + f"#only={section}",
    )
    image = Image.open(shot).convert("RGB")
    counts = {colour: n for n, colour in image.getcolors(image.width * image.height) or []}
    white = counts.get((255, 255, 255), 0)
    assert white / (image.width * image.height) < 0.95, f"the {section} screenshot is blank"
    colours = set(counts)
    for colour in EXPECTED_COLOURS[section]:
        assert colour in colours, f"{section}: no {colour} drawn"
    # What the section says, as the browser laid it out (the DOM after the script ran).
    dom = run_chromium(tmp_path / "profile2", "--dump-dom", html.as_uri() + f"#only={section}")
    for client in REAL_CLIENTS:
        assert client in dom
    assert f'<section id="{section}" class="part">' in dom  # shown, the others hidden
    others = [s for s in EXPECTED_COLOURS if s != section]
    for other in others:
        assert f'<section id="{other}" class="part" hidden="">' in dom


#: The widths the page is read at: a laptop's window, and a narrow one.
WIDTHS = (1280, 800)


@pytest.fixture(scope="module")
def synthetic_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The synthetic recording's page: GET streams, retries, 404s and re-initialisations
    in many sessions, so that "reinit N ms" arcs meet "end: 404" marks."""
    chromium()
    html = tmp_path_factory.mktemp("synthetic") / "report.html"
    result = invoke("report", SYNTHETIC, "-o", html)
    assert result.exit_code == 0, result.stderr
    return html


def _laid_out(html: Path, profile: Path, width: int, fragment: str = "selftest") -> dict[str, Any]:
    dom = run_chromium(
        profile, f"--window-size={width},900", "--dump-dom", f"{html.as_uri()}#{fragment}"
    )
    result = selftest_result(dom)
    assert result["errors"] == []
    assert result["width"] == width
    return result


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("which", ["real", "synthetic"])
def test_no_label_overlaps_and_nothing_is_cut_off_out_of_reach(
    report: tuple[Path, str],
    synthetic_report: Path,
    tmp_path: Path,
    which: str,
    width: int,
) -> None:
    html = report[0] if which == "real" else synthetic_report
    result = _laid_out(html, tmp_path / "profile", width)
    assert result["overlaps"] == [], f"labels overlap at {width} px"
    assert result["clipped"] == [], f"content cut off out of reach at {width} px"
    # What is wider than the window scrolls in its own box, and says so above it.
    wide = result["wide"]
    assert isinstance(wide, list)
    assert all(w["said"] for w in wide), wide
    if width == 800:  # the compare heat map's figures do not fit: it scrolls, and says so
        assert any(w["where"] == "compare" for w in wide), wide
    # The stories the labels tell are all there: a 404 ended a session, a client
    # re-initialised and repeated its call; and no GET stream is drawn as a session's end.
    ends = result["ends"]
    assert isinstance(ends, list) and "end: 404" in ends
    assert set(ends) <= {f"end: {r}" for r in ("404", "delete", "shutdown", "idle", "evicted")}
    assert result["streamEnds"] == 0
    arcs = result["arcLabels"]
    assert isinstance(arcs, list) and any(re.fullmatch(r"reinit \d+ ms", a) for a in arcs)
    if which == "synthetic":
        assert isinstance(result["streams"], int) and result["streams"] > 0


def test_the_self_test_sees_overlaps_where_labels_are_left_as_drawn(
    synthetic_report: Path, report: tuple[Path, str], tmp_path: Path
) -> None:
    """The checks above can fail: with the labels where Python put them (the page's script
    moves them apart; #selftest-raw skips that), labels of these pages collide ("reinit
    34 ms" over "end: 404" among them) and stick out of their charts, which clip them."""
    raw = [
        _laid_out(html, tmp_path / f"profile{i}", 1280, "selftest-raw")
        for i, html in enumerate((report[0], synthetic_report))
    ]
    pairs = [{o["a"], o["b"]} for r in raw for o in r["overlaps"]]
    assert any("end: 404" in p and any(re.fullmatch(r"reinit \d+ ms", x) for x in p) for p in pairs)
    assert any(r["clipped"] for r in raw)


#: The model lane's colour (report.css `--model`).
MODEL_INDIGO = (0x3F, 0x4D, 0x7A)


@pytest.fixture(scope="module")
def model_report(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A page of agent runs recorded with their model traffic (`AgentRun`: the core fed
    the fake model's real answers): a tools/call the server never answers, a model that
    never answers the result, an agent that sat on a result (a break in the axis), and a
    run of many short turns, so that the model's lane, its arrows and the stalls' labels
    meet the other labels."""
    chromium()
    where = tmp_path_factory.mktemp("model")
    server = AgentRun("sess-server")
    server.initialize(0)
    server.model(0.2, "anthropic-tool-stream")
    server.call(0.5, answer_at=None)
    model = AgentRun("sess-model")
    model.initialize(0)
    model.model(0.2, "anthropic-tool-stream")
    model.call(0.5, answer_at=0.6)
    model.model(0.7, "anthropic-result-stream", hang=True)
    agent = AgentRun("sess-agent")
    agent.initialize(0)
    agent.model(0.2, "chat-tool-stream")
    agent.call(0.5, answer_at=0.6)
    agent.model(25, "chat-result-stream", cut=True)
    busy = AgentRun("sess-busy")
    busy.initialize(0)
    for i in range(12):
        busy.model(0.1 + i * 0.3, "gemini-tool-stream")
        busy.call(0.25 + i * 0.3, answer_at=0.3 + i * 0.3)
    busy.model(40, "gemini-result-stream")
    paths = [
        server.write(where / "server.jsonl", 40),
        model.write(where / "model.jsonl", 30),
        agent.write(where / "agent.jsonl", 26),
        busy.write(where / "busy.jsonl", 41),
    ]
    html = where / "report.html"
    result = invoke("report", *paths, "-o", html)
    assert result.exit_code == 0, result.stderr
    return html


@pytest.mark.parametrize("width", WIDTHS)
def test_the_model_lane_and_its_stalls_overlap_nothing(
    model_report: Path, tmp_path: Path, width: int
) -> None:
    result = _laid_out(model_report, tmp_path / "profile", width)
    assert result["overlaps"] == [], f"labels overlap at {width} px"
    assert result["clipped"] == [], f"content cut off out of reach at {width} px"
    # Every turn drawn (1 + 2 + 2 + 13), an arrow per joined call, every stall's label shown.
    assert result["modelBars"] == 18
    assert isinstance(result["asks"], int) and result["asks"] >= 1 + 1 + 1 + 12
    labels = result["stallLabels"]
    assert isinstance(labels, list)
    assert sorted(labels) == sorted(
        ["stall 39.5 s · mcp_server", "stall 29.3 s · model", "stall 24.4 s · agent",
         "stall 36.4 s · agent"]
    )  # fmt: skip


def test_the_model_lane_is_drawn_in_its_colour(model_report: Path, tmp_path: Path) -> None:
    shot = tmp_path / "sessions.png"
    run_chromium(
        tmp_path / "profile",
        "--window-size=1200,2400",
        f"--screenshot={shot}",
        model_report.as_uri() + "#only=sessions",
    )
    image = Image.open(shot).convert("RGB")
    colours = {colour for _, colour in image.getcolors(image.width * image.height) or []}
    assert MODEL_INDIGO in colours
