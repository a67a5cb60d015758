"""The report's model lane (issue 28): in a session chain's timeline, the agent's model
turns above the MCP lanes, an arrow from a turn to each `tools/call` it asked for, and the
stalls of `mcp-layers hangs` as bands over the lanes, labelled with who was waited on.

The recordings are made by the core itself (`report_helpers.AgentRun`: a `Tracker` fed
the lab fake model's real answers and MCP exchanges at chosen times), so the records,
`modelTurn` and the `modelCall` join included, are what the proxy writes. What a browser
makes of the lane (overlaps, clipping) is tested in test_report_chromium.py.
"""

from __future__ import annotations

import html
import re
from pathlib import Path

from analysis_helpers import SYNTHETIC, invoke
from mcp_layers_analysis.report import Limits, page, timeline
from report_helpers import REAL, AgentRun


def _report(target: Path, *inputs: Path | str, limits: Limits | None = None) -> str:
    if limits is None:
        result = invoke("report", *inputs, "-o", target)
        assert result.exit_code == 0, result.stderr
        return target.read_text(encoding="utf-8")
    # Limits are no CLI option: the page is written the way the CLI writes it, with them.
    from mcp_layers_analysis.duck import DuckEngine
    from mcp_layers_analysis.filters import Filters
    from mcp_layers_analysis.inputs import expand
    from mcp_layers_analysis.report import COLUMNS, write

    engine = DuckEngine()
    try:
        found = engine.load(expand([str(i) for i in inputs]), COLUMNS, lambda _: None)
        write(
            engine, Filters(), target, records=found.records, inputs=[str(i) for i in inputs],
            limits=limits,
        )  # fmt: skip
    finally:
        engine.close()
    return target.read_text(encoding="utf-8")


def _session(run: AgentRun) -> str:
    """The session as recorded (the proxy writes a digest of the session id)."""
    return next(str(r["session"]) for r in run.records if r.get("session"))


def _timeline(page_html: str, session: str) -> str:
    found = re.search(rf'<article class="tl" id="t-{session}".*?</article>', page_html, re.S)
    assert found, f"no timeline for {session}"
    return found.group(0)


def _svg(article: str) -> str:
    found = re.search(r'<svg class="chart timeline".*?</svg>', article, re.S)
    assert found
    return found.group(0)


def _titles(svg_text: str, cls: str) -> list[str]:
    """The tooltips of the marks of class `cls` (a group or a shape with its <title>)."""
    pattern = rf'<(?:g|rect) class="{cls}"[^>]*>(?:(?!<title>).)*<title>([^<]*)</title>'
    return [html.unescape(t) for t in re.findall(pattern, svg_text, re.S)]


def _texts(svg_text: str, cls: str) -> list[str]:
    return [
        html.unescape(t) for t in re.findall(rf'<text class="{cls}"[^>]*>([^<]*)</text>', svg_text)
    ]


def _server_hang(session: str = "sess-server") -> AgentRun:
    """The model asks for echo; the agent calls it; the server never answers (40 s)."""
    run = AgentRun(session)
    run.initialize(0)
    run.model(0.2, "anthropic-tool-stream")
    run.call(0.5, answer_at=None)
    return run


def _model_hang(session: str = "sess-model") -> AgentRun:
    """The tool answers; the model, given the result, never answers (30 s)."""
    run = AgentRun(session)
    run.initialize(0)
    run.model(0.2, "anthropic-tool-stream")
    run.call(0.5, answer_at=0.6)
    run.model(0.7, "anthropic-result-stream", hang=True)
    return run


def _agent_stall(session: str = "sess-agent") -> AgentRun:
    """Both answered; the agent sat 24 s on the result before asking its model again:
    nothing in flight, so the axis cuts the silence out as a break."""
    run = AgentRun(session)
    run.initialize(0)
    run.model(0.2, "chat-tool-stream")
    run.call(0.5, answer_at=0.6)
    run.model(25, "chat-result-stream")
    return run


def test_the_model_lane_draws_each_turn_above_the_mcp_lanes(tmp_path: Path) -> None:
    run = _model_hang()
    path = run.write(tmp_path / "model.jsonl", 30)
    svg_text = _svg(_timeline(_report(tmp_path / "r.html", path), _session(run)))
    # The model's lane comes first (above the session's), named and counted.
    lanes = re.findall(r'<rect class="(lane[^"]*)" x="0" y="([\d.]+)"', svg_text)
    assert [c for c, _ in lanes] == ["lane model-lane", "lane"]
    assert float(lanes[0][1]) < float(lanes[1][1])
    assert _texts(svg_text, "lbl mono")[0] == "model"
    assert {"claude-lab", "2 turns"} <= set(_texts(svg_text, "lbl small"))
    # Two turns: the one that asked for echo, and the one that never answered, drawn cut.
    turns = _titles(svg_text, "turn")
    assert len(turns) == 2
    asked, hung = turns
    assert asked.startswith("#2 · model turn: anthropic claude-lab · +200 ms · took 200 ms")
    assert "first output after 100 ms" in asked and "stop: tool_use" in asked
    assert "asked for mcp__echo__echo" in asked and "tokens: 10 in, 5 out" in asked
    assert "stop: none" in hung and "asked for no tool" in hung
    assert hung.endswith("cut: the answer never completed")
    assert svg_text.count('class="bar model"') == 1 and 'class="bar model cut"' in svg_text
    assert "cut" in _texts(svg_text, "lbl small")
    # The answer came at 0.3 s in: a white tick at the first output, inside the bar.
    assert svg_text.count('class="ttft"') == 1
    # The bar spans the turn: 200 ms of a 30 s axis, wider than the minimum of a bar.
    bar = re.search(r'<rect class="bar model" x="([\d.]+)" y="[\d.]+" width="([\d.]+)"', svg_text)
    assert bar and float(bar.group(2)) >= timeline.MIN_BAR
    assert "1 model turn(s)" not in svg_text and "2 model turn(s), 1 stall(s)" in svg_text


def test_a_turn_links_to_the_tools_call_it_asked_for(tmp_path: Path) -> None:
    run = _server_hang()
    path = run.write(tmp_path / "server.jsonl", 40)
    svg_text = _svg(_timeline(_report(tmp_path / "r.html", path), _session(run)))
    [ask] = _titles(svg_text, "link ask")
    assert ask == "model turn #2 asked for #3 tools/call echo (inferred join)"
    # The call says who asked for it.
    [call] = [t for t in re.findall(r"<title>([^<]*)</title>", svg_text) if t.startswith("#3 ")]
    assert call.startswith("#3 · tools/call echo") and call.endswith(
        "asked for by model turn #2 (inferred join)"
    )
    # The arrow leaves the turn's bar (in the model lane) and ends at the call's start.
    path_d = re.search(
        r'<g class="link ask"><path d="M([\d.]+) ([\d.]+)C.* ([\d.]+) ([\d.]+)"', svg_text
    )
    bar = re.search(r'<rect class="bar o-[^"]*" x="([\d.]+)" y="([\d.]+)"[^>]*><title>#3', svg_text)
    assert path_d and bar
    assert float(path_d.group(3)) == float(bar.group(1))
    assert float(path_d.group(2)) < float(path_d.group(4))  # downwards, to the MCP lane


def test_a_stall_on_the_server_is_marked_mcp_server(tmp_path: Path) -> None:
    run = _server_hang()
    path = run.write(tmp_path / "server.jsonl", 40)
    svg_text = _svg(_timeline(_report(tmp_path / "r.html", path), _session(run)))
    [band] = _titles(svg_text, "stall w-mcp_server")
    assert band.startswith("stall of 39.5 s from +500 ms · waited on mcp_server")
    assert "no answer during the silence (finally: NO_RESPONSE)" in band
    assert "in flight: #3 tools/call echo" in band
    # The call was in flight: no break, the label above the band names the party.
    assert _texts(svg_text, "lbl small stall-lbl") == ["stall 39.5 s · mcp_server"]
    assert "idle" not in svg_text
    # The band spans most of the plot (39.5 of 40 s).
    rect_w = re.search(
        r'<rect class="stall w-mcp_server" x="[\d.]+" y="[\d.]+" width="([\d.]+)"', svg_text
    )
    assert rect_w and float(rect_w.group(1)) > 0.9 * timeline.PLOT_W


def test_a_stall_on_the_model_is_marked_model(tmp_path: Path) -> None:
    run = _model_hang()
    path = run.write(tmp_path / "model.jsonl", 30)
    svg_text = _svg(_timeline(_report(tmp_path / "r.html", path), _session(run)))
    [band] = _titles(svg_text, "stall w-model")
    assert "waited on model · no output; the answer never completed" in band
    assert "in flight: #4 model anthropic claude-lab" in band
    assert _texts(svg_text, "lbl small stall-lbl") == ["stall 29.3 s · model"]
    assert "w-mcp_server" not in svg_text


def test_a_stall_the_axis_cuts_out_is_named_on_its_break(tmp_path: Path) -> None:
    """Nothing in flight for 24 s: the axis cuts it out as a break, and the break says it
    was a stall and who was waited on (the agent) instead of "idle"."""
    run = _agent_stall()
    path = run.write(tmp_path / "agent.jsonl", 26)
    svg_text = _svg(_timeline(_report(tmp_path / "r.html", path), _session(run)))
    assert 'class="brk"' in svg_text  # the break is there
    assert "idle" not in svg_text
    [said] = re.findall(r'<g class="stall-brk">(.*?)</g>', svg_text)
    assert re.search(r">24\.\d s stall<", said)  # the break's own length: 0.6 s to 25 s
    assert "waited on agent · every answer was in; model turn #2 had asked for a tool" in (
        html.unescape(said)
    )
    # The band covers the break (its width at least), not a sliver at its middle, and the
    # label above it names who was waited on.
    band = re.search(
        r'<rect class="stall w-agent" x="[\d.]+" y="[\d.]+" width="([\d.]+)"', svg_text
    )
    assert band and float(band.group(1)) >= timeline.BREAK_W
    assert _texts(svg_text, "lbl small stall-lbl") == ["stall 24.4 s · agent"]


def test_the_turns_of_another_input_are_not_on_a_timeline(tmp_path: Path) -> None:
    """Two agents at the same times, each in its own recording: each timeline has its own
    input's turns and stalls; one recorded without model traffic has no lane at all."""
    server, model = _server_hang(), _model_hang()
    plain = AgentRun("sess-plain")
    plain.initialize(0)
    plain.call(0.5, answer_at=0.6)
    plain.call(20, answer_at=20.1)  # a 19 s silence: `unknown`, never drawn
    paths = [
        server.write(tmp_path / "server.jsonl", 40),
        model.write(tmp_path / "model.jsonl", 30),
        plain.write(tmp_path / "plain.jsonl", 21),
    ]
    page_html = _report(tmp_path / "r.html", *paths)
    one = _svg(_timeline(page_html, _session(server)))
    two = _svg(_timeline(page_html, _session(model)))
    three = _svg(_timeline(page_html, _session(plain)))
    assert len(_titles(one, "turn")) == 1 and len(_titles(two, "turn")) == 2
    assert "w-mcp_server" in one and "w-model" not in one
    assert "w-model" in two and "w-mcp_server" not in two
    for absent in ("model-lane", "stall", "link ask", "bar model"):
        assert absent not in three
    assert "idle" in three  # its silence is an ordinary break
    # The key explains the lane (some timeline has one), and the turns are in the table.
    assert "The top lane, model, is the agent's model turns" in page_html
    table = re.search(r"<table class='model'>.*?</table>", _timeline(page_html, _session(model)))
    assert table and "<td>model turn</td>" in table.group(0) and "<td>stall</td>" in table.group(0)


def test_without_model_turns_there_is_no_lane_and_no_stall(tmp_path: Path) -> None:
    """The real agent captures and the synthetic recording hold no model traffic: no
    lane, no stall, no word of either in the key (their timelines are as they were)."""
    for name, inputs in (("real", REAL), ("synthetic", [SYNTHETIC])):
        page_html = _report(tmp_path / f"{name}.html", *inputs)
        # The page's content, not its stylesheet or script.
        body = page_html.split("<main>", 1)[1].split("</main>", 1)[0]
        assert '<svg class="chart timeline"' in body
        for absent in (
            "model-lane",
            "bar model",
            "link ask",
            'class="stall',
            "stall-lbl",
            "table class='model'",
            "The top lane, model",
            "model turn",
        ):
            assert absent not in body, (name, absent)
    assert "model" not in page._timeline_key(False)


def test_the_lanes_turns_count_against_the_limits(tmp_path: Path) -> None:
    """At most `per_session` turns are drawn on a chain; the rest are counted on the lane
    and in the page's note of what it left out."""
    run = AgentRun("sess-many")
    run.initialize(0)
    for i in range(5):  # five turns that ask for nothing, then one call
        run.model(0.2 + i, "anthropic-result-stream")
    run.call(6, answer_at=6.1, method="tools/list")
    path = run.write(tmp_path / "many.jsonl", 6.5)  # 3 records: initialize, the list, the end
    page_html = _report(tmp_path / "r.html", path, limits=Limits(per_session=3))
    svg_text = _svg(_timeline(page_html, _session(run)))
    assert len(_titles(svg_text, "turn")) == 3
    assert "2 more not drawn" in _texts(svg_text, "lbl small")
    assert "2 records of long sessions are not drawn" in page_html
    # Within the limits, every turn.
    page_html = _report(tmp_path / "all.html", path)
    assert len(_titles(_svg(_timeline(page_html, _session(run))), "turn")) == 5
    assert "not drawn" not in page_html


def test_turns_count_in_the_budget_of_records_drawn(tmp_path: Path) -> None:
    """Past `Limits.drawn` (records drawn in all timelines) the later chains are not drawn:
    their turns count as records do."""
    paths = [
        _server_hang().write(tmp_path / "server.jsonl", 40),
        _model_hang().write(tmp_path / "model.jsonl", 30),
    ]
    records = sum(
        1 for p in paths for line in p.read_text().splitlines() if '"session":"s-' in line
    )
    roomy = _report(tmp_path / "roomy.html", *paths, limits=Limits(drawn=records + 3))
    assert roomy.count('<article class="tl"') == 2
    tight = _report(tmp_path / "tight.html", *paths, limits=Limits(drawn=records))
    assert tight.count('<article class="tl"') == 1
    assert "Timelines are drawn for 1 of the 2 session chains" in tight
