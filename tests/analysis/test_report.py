"""`mcp-layers report`: the page's content, from the real agent recordings (golden data).

What a browser makes of it is tested in test_report_chromium.py.
"""

from __future__ import annotations

import re
from pathlib import Path
from types import SimpleNamespace

import mcp_layers_analysis.report as report_mod
import pytest
from analysis_helpers import SYNTHETIC, invoke
from mcp_layers_analysis.duck import DuckEngine
from mcp_layers_analysis.filters import Filters
from mcp_layers_analysis.inputs import expand
from mcp_layers_analysis.report import Limits, data, page, style, svg, timeline
from mcp_layers_core.record import LAYER_OF, Outcome
from report_helpers import REAL, REAL_CLIENTS, write_report


@pytest.fixture(scope="module")
def real_page(tmp_path_factory: pytest.TempPathFactory) -> str:
    return write_report(tmp_path_factory.mktemp("report") / "report.html")


def test_every_section_and_client_is_on_the_page(real_page: str) -> None:
    for section in page.SECTIONS:
        assert f'<section id="{section}"' in real_page
    for client in REAL_CLIENTS:
        assert f'data-client="{client}"' in real_page
        assert f'value="{client}"' in real_page  # its filter


def test_the_page_is_self_contained(real_page: str) -> None:
    # No resource from elsewhere: no src= at all, no stylesheet link, no import.
    assert not re.search(r"\bsrc\s*=", real_page)
    assert "<link" not in real_page
    assert "@import" not in real_page
    assert not re.search(r"""(href|url)\(?\s*=?\s*["']?https?:""", real_page)


def test_overview_figures_are_the_summary_figures(real_page: str) -> None:
    # claude-code in the two lab recordings: 11 organic calls, both injected calls failed
    # (mcp-layers summary says the same), latency percentiles as summary prints them.
    card = _card(real_page, "overview", "claude-code@2.1.197")
    assert "<dt>calls</dt><dd>11</dd>" in card
    assert "2 of 2 (100.0%) failed" in card
    assert "p50 12.3 ms" in card
    assert "HTTP_ERROR 2" in card  # the injected calls' bar, labelled


def test_retries_show_how_and_how_soon(real_page: str) -> None:
    card = _card(real_page, "retries", "claude-code@2.1.197")
    assert "reissue 1" in card and "reinit 1" in card
    assert "<dt>Retry-After honoured</dt><dd>0 of 1 (0.0%)</dd>" in card
    codex = _card(real_page, "retries", "codex-mcp-client@0.171.0")
    assert "resend 1" in codex and "reissue 1" in codex


def test_the_404_story_is_one_timeline(real_page: str) -> None:
    # opencode's 404: the session it lost, and the one it initialised, on one timeline,
    # with the re-initialisation and the reinit retry drawn as arrows.
    chain = re.search(r'<article class="tl" id="t-s-9af7de106b".*?</article>', real_page, re.S)
    assert chain, "no timeline for opencode's session_404 run"
    text = chain.group(0)
    assert "s-9af7de106b → s-c9df8aefbd" in text
    assert 'class="link renew"' in text
    assert re.search(r'class="link retry".*?>reinit \d+ ms<', text, re.S)
    assert "bar o-transport inj" in text  # the injected 404, marked
    assert "end: 404" in text


def test_a_get_stream_is_drawn_as_a_stream_not_as_a_session_end(tmp_path: Path) -> None:
    """The synthetic recording's sessions open GET streams (the real lab captures predate
    stream records): each is a thin bar, and only a `session_end` is an end mark."""
    target = tmp_path / "report.html"
    assert invoke("report", SYNTHETIC, "-o", target).exit_code == 0
    html = target.read_text()
    timelines = "".join(re.findall(r'<article class="tl".*?</article>', html, re.S))
    assert 'class="bar stream"' in timelines
    assert "GET stream" in timelines  # what a stream's tooltip says it is
    ends = re.findall(r"end: ([\w-]+)", timelines)
    assert ends and set(ends) <= {"404", "delete", "shutdown", "idle", "evicted"}, ends


def test_a_client_with_no_injected_fault_shows_no_injected_figure(tmp_path: Path) -> None:
    target = tmp_path / "report.html"
    clean = tmp_path / "clean.jsonl"
    lines = SYNTHETIC.read_text().splitlines()
    clean.write_text("".join(line + "\n" for line in lines if '"injected":null' in line))
    assert invoke("report", clean, "-o", target).exit_code == 0
    html = target.read_text()
    assert '<section id="overview"' in html and "injected faults" not in html


def test_compare_heat_map_has_a_row_per_client_and_scenario(real_page: str) -> None:
    heat = re.search(r"<table class='heat'>.*?</table>", real_page, re.S)
    assert heat
    rows = re.findall(r"<th scope='row'>([^<]*)<br><small>([^<]*)</small></th>", heat.group(0))
    assert ("claude-code@2.1.197", "session_404") in rows
    assert ("opencode@1.18.33", "stream_cut") in rows
    assert len(rows) == len(REAL)
    for name in ("failure rate", "retries: reinit", "Retry-After honoured"):
        assert f"<th scope='col'>{name}</th>" in heat.group(0)


def test_filters_reach_the_page(tmp_path: Path) -> None:
    text = write_report(tmp_path / "r.html", "--client", "opencode")
    assert 'value="opencode@1.18.33"' in text
    assert 'data-client="claude-code' not in text
    assert "data-client='claude-code" not in text


def test_nothing_matched_exits_1(tmp_path: Path) -> None:
    result = invoke("report", *REAL, "-o", tmp_path / "r.html", "--client", "nobody")
    assert result.exit_code == 1
    assert "no record matched" in result.stderr or "no records" in result.stderr


def test_big_inputs_are_sampled_and_the_page_says_so() -> None:
    engine = DuckEngine(threads=1)
    try:
        report = engine.load(expand([str(SYNTHETIC)]), report_mod.COLUMNS, lambda _: None)
        limits = Limits(sessions=5, timelines=2, per_session=3)
        d = data.gather(engine, Filters(), report.records, limits)
    finally:
        engine.close()
    assert len(d.sessions) == 5 and len(d.chains) == 2
    assert d.sampling.sessions_total > 5 and d.sampling.records_cut > 0
    assert all(len(c.records) <= 3 * len(c.sessions) for c in d.chains)
    html = page.render(d, title="t", inputs=["x"], only=page.SECTIONS)
    assert f"shows the first 5 of the {d.sampling.sessions_total} sessions;" in html
    assert f"Timelines are drawn for 2 of the {d.sampling.chains_total} session chains:" in html
    assert "records of long sessions are not drawn" in html


def _synthetic_page(
    tmp_path: Path, limits: Limits, columns: tuple[str, ...] = report_mod.COLUMNS
) -> tuple[str, int]:
    engine = DuckEngine(threads=1)
    try:
        found = engine.load(expand([str(SYNTHETIC)]), columns, lambda _: None)
        target = tmp_path / "report.html"
        size = report_mod.write(
            engine, Filters(), target, records=found.records, inputs=["x"], limits=limits
        )
    finally:
        engine.close()
    html = target.read_text(encoding="utf-8")
    assert size == len(html.encode("utf-8"))
    return html, size


def test_a_page_over_its_size_budget_draws_less_and_says_so(tmp_path: Path) -> None:
    """The size budget, lowered (the real one is 8 MB, met by 1M records in
    benchmarks/report_bench.py): timelines and session rows are halved until the page fits,
    and the page says what it left out."""
    whole, size = _synthetic_page(tmp_path, Limits())
    budget = size * 2 // 3
    html, smaller = _synthetic_page(tmp_path, Limits(page_bytes=budget))
    assert smaller <= budget
    notes = re.findall(r"<p class='note'>([^<]*)</p>", html.split("<main>")[0])
    assert any(
        re.search(r"shows the first \d+ of the \d+ sessions; the rest are in", n) for n in notes
    )
    assert any(
        re.search(r"Timelines are drawn for \d+ of the \d+ session chains", n) for n in notes
    )
    assert html.count('<article class="tl"') < whole.count('<article class="tl"')
    assert html.count("<tr data-client=") < whole.count("<tr data-client=")


def test_timelines_stop_at_the_budget_of_drawn_records(tmp_path: Path) -> None:
    whole, _ = _synthetic_page(tmp_path, Limits())
    html, _ = _synthetic_page(tmp_path, Limits(drawn=50))
    drawn = html.count('<article class="tl"')
    assert 1 <= drawn < whole.count('<article class="tl"')
    assert re.search(rf"Timelines are drawn for {drawn} of the \d+ session chains", html)


def test_past_the_exact_limit_the_sections_after_the_overview_are_a_sample(
    tmp_path: Path,
) -> None:
    """Lowered limits (the real ones: 100,000 records, samples of 50,000), and the engine
    holding the overview's columns only, as the CLI has DuckDB read them: the overview
    still counts every record, the other sections are over the first records, and the
    page says so in its header and in each of those sections."""
    narrow = report_mod.columns_to_read("duckdb")
    assert set(narrow) < set(report_mod.COLUMNS)
    whole, _ = _synthetic_page(tmp_path, Limits())
    # Below the limit, the engine holding fewer columns makes no difference.
    same, _ = _synthetic_page(tmp_path, Limits(), narrow)
    assert _after_header(same) == _after_header(whole)
    html, _ = _synthetic_page(tmp_path, Limits(exact=100, sample=300, sessions=3), narrow)
    meta = re.search(r"<p class='meta'>([\d,]+) records", html)
    assert meta
    records = int(meta.group(1).replace(",", ""))
    assert records > 300
    assert (
        f"{records:,} records: the Overview counts every one of them; Retries, Sessions and "
        "Compare are over the first 300 records read." in html
    )
    assert html.count(f"<p class='note sampled'>Over the first 300 of {records:,}") == 3
    assert re.search(r"shows the first \d+ of the \d+ sessions in the first 300 records", html)
    # The overview is the same as over every record; the other sections are not.
    assert _between(html, '<section id="overview"', "</section>") == _between(
        whole, '<section id="overview"', "</section>"
    )
    assert html.count("<tr data-client='") < whole.count("<tr data-client='")
    assert "note sampled" not in whole


def test_an_engine_read_with_other_columns_is_read_again_in_full(tmp_path: Path) -> None:
    whole, _ = _synthetic_page(tmp_path, Limits())
    other, _ = _synthetic_page(tmp_path, Limits(exact=100, sample=300), ("kind", "session"))
    assert _after_header(other) == _after_header(whole)


def test_the_engines_head_is_the_first_records_as_the_table_numbers_them() -> None:
    engine = DuckEngine(threads=1)
    try:
        engine.load(expand([str(SYNTHETIC)]), report_mod.columns_to_read("duckdb"), print)
        assert engine.head("first", report_mod.COLUMNS, 10) == 10
        first = engine.rows("SELECT _seq, _src, id, kind, sse IS NOT NULL FROM first ORDER BY 1")
        table = engine.rows("SELECT _seq, _src, id, kind FROM records ORDER BY 1 LIMIT 10")
    finally:
        engine.close()
    assert [r[:4] for r in first] == table
    assert any(r[4] for r in first)  # a column the table was not read with


def _after_header(page_html: str) -> str:
    return page_html.split("</header>", 1)[1]


def _between(text: str, start: str, end: str) -> str:
    i = text.index(start)
    return text[i : text.index(end, i)]


def test_one_record_is_one_record(tmp_path: Path) -> None:
    one = tmp_path / "one.jsonl"
    one.write_text(REAL[0].read_text().splitlines()[0] + "\n")
    target = tmp_path / "one.html"
    assert invoke("report", one, "-o", target).exit_code == 0
    assert "<p class='meta'>1 record from one.jsonl" in target.read_text()


def test_every_outcome_has_a_class_and_words() -> None:
    for o in Outcome:
        cls = style.outcome_class(o.value)
        assert cls in {c for c, _ in style.LEGEND}, o
        assert style.outcome_words(o.value)
    assert (
        style.outcome_class(Outcome.HTTP_ERROR.value) == f"o-{LAYER_OF[Outcome.HTTP_ERROR].value}"
    )
    assert style.outcome_class(None) == style.UNKNOWN
    assert style.outcome_class("SOMETHING_NEW") == style.UNKNOWN


def test_idle_stretches_are_cut_out_of_the_axis() -> None:
    scale = timeline.scale_of([(0, 10), (20, 30), (60_000, 60_010)], 500)
    assert len(scale.breaks) == 1
    x, idle = scale.breaks[0]
    assert idle == pytest.approx(59_970)
    assert scale.x(0) == 0 and scale.x(60_010) == pytest.approx(500)
    assert scale.x(30) < x < scale.x(60_000)


def test_a_count_too_wide_for_its_bar_is_shortened() -> None:
    assert svg.count_text(2624, 30.7) == "2624"
    assert svg.count_text(21640, 30.7) == "22k"
    assert svg.count_text(1_312_000, 30.7) == "1.3M"
    assert svg.count_text(21640, 60) == "21640"


def test_a_lane_label_fits_its_column() -> None:
    """A long session name (a UUID) is cut to the label column, whose lines are each a
    figure: nothing of it runs into the marks."""
    long = "3f1c2a9e-7b4d-4c1e-9a2f-0d8e6b5c4a31"
    session = data.Session(long, "c", None, None, None, None, 1, 1, 0, 0, None, None)
    rec = SimpleNamespace(session=long, get_streams=2, server_requests=3)
    lines = timeline._lane_lines(data.Chain([session], cut={long: 7}), [rec])[long]
    assert lines == [long[:20] + "…", "GET streams 2", "server asked 3", "7 more not drawn"]
    assert all(len(x) * svg.CHAR_W <= timeline.LABEL_W for x in lines)


def test_nice_steps() -> None:
    assert [timeline.nice_step(x) for x in (0.7, 3, 40, 130)] == [1, 5, 50, 200]


def _card(page_text: str, section: str, client: str) -> str:
    part = re.search(rf'<section id="{section}".*?</section>', page_text, re.S)
    assert part
    card = re.search(
        rf'<article class="card" data-client="{re.escape(client)}">.*?</article>',
        part.group(0),
        re.S,
    )
    assert card, f"no {section} card for {client}"
    return card.group(0)


def test_a_retry_on_a_new_session_joins_the_two_on_one_timeline(real_page: str) -> None:
    # codex: initialize answered 503 (injected) on its own pseudo-session, resent on the
    # session it then got: one chain, one timeline, the resend drawn as an arrow.
    chain = re.search(r'<article class="tl" id="t-c-110ed201b1".*?</article>', real_page, re.S)
    assert chain, "codex's failed initialize and its resend are not on one timeline"
    assert "c-110ed201b1 → s-1e1044c680" in chain.group(0)
    assert re.search(r'class="link retry".*?>resend \d+ ms<', chain.group(0), re.S)
    # Each input's sessions stay apart: no chain mixes two clients.
    for title in re.findall(r'<article class="tl"[^>]*data-client="([^"]*)">', real_page):
        assert title in REAL_CLIENTS
    assert len(re.findall(r'<article class="tl"', real_page)) == len(REAL)


def test_the_lab_writes_its_matrix_as_a_page(tmp_path: Path) -> None:
    from mcp_layers_lab import matrix

    runs = tmp_path / "runs"
    for i, source in enumerate(REAL):
        (runs / str(i)).mkdir(parents=True)
        (runs / str(i) / source.name).write_bytes(source.read_bytes())
    target = tmp_path / "MATRIX.html"
    matrix.write_html(runs, target)
    text = target.read_text(encoding="utf-8")
    # The compare heat map, regrouped by lab/matrix_page.py: one group of rows per client.
    assert "<table class='heat mx-table'" in text
    assert '<section id="compare"' in text
    assert '<section id="sessions"' not in text
    for client in REAL_CLIENTS:
        assert f"<summary><b>{client}</b>" in text
