"""The matrix's *waited on* column (issue 28): each cell's stalls, with who was waited on,
by `mcp-layers hangs`' own query over the run's recording, and the check that a hang fault
is named for the party it stalls.

The recordings are real: Claude Code against `tools_call_hang` and `model_hang` in the
lab's pass of 2026-12-02 (tests/fixtures/lab_hangs), model turns and MCP records in one
file; variants of them are made by moving their records in time.
"""

from __future__ import annotations

import json
import shutil
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from mcp_layers_analysis.hangs import STALL_MS, WaitedOn
from mcp_layers_core.record import Kind
from mcp_layers_lab import matrix, matrix_page, presets
from mcp_layers_lab.run import RunResult

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "lab_hangs"


def _records(fault: str) -> list[dict[str, Any]]:
    text = (FIXTURES / f"claude-code_{fault}.jsonl").read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines()]


def _run(
    where: Path, fault: str, records: list[dict[str, Any]] | None = None, *, as_fault: str = ""
) -> RunResult:
    """A run directory as the lab leaves it: the recording, the model's log, the output."""
    where.mkdir(parents=True, exist_ok=True)
    records = _records(fault) if records is None else records
    text = "".join(json.dumps(r) + "\n" for r in records)
    (where / "mcp-20261202T212618Z.jsonl").write_text(text, encoding="utf-8")
    shutil.copy(FIXTURES / f"claude-code_{fault}.model.log", where / "model.log")
    verdict = "error" if fault == "tools_call_hang" else "ok"
    (where / "client.out").write_text(f"LAB-DONE results={verdict}\n", encoding="utf-8")
    name = as_fault or fault
    return RunResult("claude-code", "2.1.197", name, "once", name, str(where), exit_code=0)


def _shifted(records: list[dict[str, Any]], after: str, by_ms: float) -> list[dict[str, Any]]:
    """The records, those that started after `after` (a ts) moved by `by_ms`."""
    out = []
    for r in records:
        r = dict(r)
        if r["ts"] > after:
            at = datetime.fromisoformat(r["ts"].replace("Z", "+00:00"))
            moved = at + timedelta(milliseconds=by_ms)
            r["ts"] = moved.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        out.append(r)
    return out


def test_the_hang_faults_are_the_labs() -> None:
    names = {f.name for f in presets.FAULTS}
    assert set(matrix.HANG_FAULTS) <= names
    assert matrix.HANG_FAULTS == {
        "tools_call_hang": WaitedOn.MCP_SERVER,
        "model_hang": WaitedOn.MODEL,
    }


def test_the_stall_buckets_start_where_hangs_starts_a_stall() -> None:
    bounds = [b for b, _ in matrix.STALL_BUCKETS]
    assert matrix.STALL_MS == STALL_MS in bounds
    assert bounds == sorted(bounds)
    # The lab's own figures sit inside buckets, not on their edges: holds of 8 and 25 s,
    # a 60 s request timeout, the 120 s kill.
    for ms in (8_000, 25_000, 60_000, 120_000):
        assert all(abs(ms - b) >= 2_000 for b in bounds)
    assert matrix.bucket(60_038, matrix.STALL_BUCKETS) == "45–90 s"
    assert matrix.bucket(25_008, matrix.STALL_BUCKETS) == "20–45 s"


@pytest.mark.parametrize(
    ("fault", "text", "exact"),
    [
        ("tools_call_hang", "mcp_server 45–90 s", "mcp_server 60.0"),
        ("model_hang", "model 20–45 s", "model 25.0"),
    ],
)
def test_a_hang_cell_names_who_was_waited_on(
    tmp_path: Path, fault: str, text: str, exact: str
) -> None:
    cell = matrix.build_cell(_run(tmp_path, fault))
    assert cell.waited_text == text
    assert [s.waited_on for s in cell.stalls] == [matrix.HANG_FAULTS[fault]]
    assert not cell.notes, cell.notes
    assert f"| {text} |" in matrix.render([cell], {"Node": "v24"}, "2026-12-02")
    assert f"| {exact} |" in matrix.runs_table([cell])


def test_the_cells_of_a_pass_are_read_in_one_go_and_the_same(tmp_path: Path) -> None:
    runs = [_run(tmp_path / f, f) for f in ("tools_call_hang", "model_hang")]
    together = matrix.build_cells(runs)
    alone = [matrix.build_cell(r) for r in runs]
    assert [c.waited_text for c in together] == [c.waited_text for c in alone]

    # `src` numbers the recordings of one engine: the rest is the same.
    def seen(cells: list[matrix.Cell]) -> list[list[tuple[int, int, str]]]:
        return [[(s.start_ms, s.end_ms, s.detail) for s in c.silences] for c in cells]

    assert seen(together) == seen(alone) and all(seen(together))


def test_a_client_that_gave_up_before_a_stall_says_so(tmp_path: Path) -> None:
    """The same run, had Claude Code's request timeout been 3 s instead of 60."""
    records = _records("tools_call_hang")
    call = next(r for r in records if r.get("method") == "tools/call")
    cut = 3_000.0
    earlier = cut - call["durationMs"]
    records = _shifted(records, call["ts"], earlier)
    for r in records:
        if r is not call and r["kind"] in (Kind.STREAM, Kind.REQUEST) and r["durationMs"] > cut:
            r["durationMs"] += earlier  # the standby stream ended with the session
        if r["id"] == call["id"]:
            r["durationMs"] = cut
    cell = matrix.build_cell(_run(tmp_path, "tools_call_hang", records))
    assert cell.stalls == []
    assert cell.waited_text == "gave up sooner: mcp_server 1–5 s"
    assert not cell.notes, cell.notes


@pytest.mark.parametrize(
    ("fault", "held", "named"),
    [
        # The server answered the tools/call (#7) at once, and the client then sat 60 s.
        ("tools_call_hang", 7, "agent"),
        # The model answered at once (#8), with its final text: the client then sat 25 s.
        ("model_hang", 8, "none"),
    ],
)
def test_a_hang_silence_named_for_someone_else_is_a_warning(
    tmp_path: Path, fault: str, held: int, named: str
) -> None:
    """Either the client waited on something else, or `hangs` is wrong: the matrix must
    not keep quiet about it."""
    records = _records(fault)
    hung = next(r for r in records if r["id"] == held)
    hung["durationMs"] = 50.0
    if hung["kind"] == Kind.REQUEST:
        hung["outcome"] = "TOOL_SUCCESS"
    cell = matrix.build_cell(_run(tmp_path, fault, records))
    expected = matrix.HANG_FAULTS[fault]
    assert any(
        n.startswith(f"hangs named {named}, not {expected}, for the silence of") for n in cell.notes
    ), cell.notes
    assert cell.broken
    assert f"hangs named {named}" in matrix.render([cell], {}, "2026-12-02")


def test_a_stall_elsewhere_in_a_hang_cell_is_no_warning(tmp_path: Path) -> None:
    """Only the silence that began with the hung request is checked: the model_hang run
    read as a tools_call_hang (no tools/call was held in it) shows its stall, unjudged."""
    cell = matrix.build_cell(_run(tmp_path, "model_hang", as_fault="tools_call_hang"))
    assert cell.hung_at is None
    assert cell.waited_text == "model 20–45 s"
    assert not any("hangs named" in n for n in cell.notes)


def test_a_cell_of_another_fault_shows_its_stalls_or_a_dash(tmp_path: Path) -> None:
    stalled = matrix.build_cell(_run(tmp_path / "a", "model_hang", as_fault="idle_cut"))
    assert stalled.waited_text == "model 20–45 s" and not any("hangs" in n for n in stalled.notes)
    # The run up to its tool call, every exchange over in 0.1 s: nothing stalled.
    records = [r for r in _records("model_hang") if r["kind"] in (Kind.REQUEST, Kind.NOTIFICATION)]
    for r in records:
        r["durationMs"] = min(r["durationMs"], 100.0)
    quiet = matrix.build_cell(_run(tmp_path / "b", "model_hang", records, as_fault="none"))
    assert quiet.stalls == [] and quiet.waited_text == "—"


def test_a_hang_cell_without_any_silence_says_no_stall() -> None:
    assert matrix.waited_on_text([], "model_hang", 1.0) == "no stall ≥10 s"
    assert matrix.waited_on_text([], "model_hang") == "no stall ≥10 s"
    assert matrix.waited_on_text([], "none") == "—"


def test_the_hung_request_is_found_in_the_records() -> None:
    for fault, held in (("tools_call_hang", 7), ("model_hang", 8)):
        records = _records(fault)
        at = matrix.hung_at(fault, records)
        sent = next(r for r in records if r["id"] == held)
        assert sent["ts"].startswith("2026-12-02T21:26:")
        assert at is not None and at == pytest.approx(
            datetime.fromisoformat(sent["ts"].replace("Z", "+00:00")).timestamp() * 1000
        )
    assert matrix.hung_at("none", _records("model_hang")) is None


def test_the_page_has_the_waited_on_column(tmp_path: Path) -> None:
    runs = tmp_path / "runs"
    for fault in ("tools_call_hang", "model_hang"):
        _run(runs / "claude-code" / fault, fault)
    target = tmp_path / "MATRIX.html"
    matrix.write_html(runs, target)
    text = target.read_text(encoding="utf-8")
    columns, rows = matrix_page.read(text)
    assert columns[0] == matrix_page.WAITED_ON and columns.count(matrix_page.WAITED_ON) == 1
    got = {r.scenario: r.values[matrix_page.WAITED_ON] for r in rows if r.client.startswith("c")}
    assert got == {"tools_call_hang": "mcp_server 45–90 s", "model_hang": "model 20–45 s"}
    # Regrouped without the runs it keeps the column; with new texts it replaces it.
    assert matrix_page.group_page(text) == text
    again = matrix_page.group_page(text, {("claude-code@2.1.197", "model_hang"): "x"})
    columns, rows = matrix_page.read(again)
    assert columns.count(matrix_page.WAITED_ON) == 1
    assert {
        r.scenario: r.values[matrix_page.WAITED_ON] for r in rows if r.client.startswith("c")
    } == {
        "tools_call_hang": "—",
        "model_hang": "x",
    }
    assert matrix_page.group_page(again) == again


def test_in_chromium_the_waited_on_column_wraps_and_nothing_is_clipped(tmp_path: Path) -> None:
    """The report's cells do not wrap; this column's words must (its longest text here)."""
    from mcp_layers_support.chromium import run_chromium, selftest_result

    runs = tmp_path / "runs"
    for fault in ("tools_call_hang", "model_hang"):
        _run(runs / "claude-code" / fault, fault)
    target = tmp_path / "MATRIX.html"
    matrix.write_html(runs, target)
    longest = "gave up sooner: mcp_server 5–10 s, agent 10–20 s, none ≥90 s"
    waits = {("claude-code@2.1.197", "tools_call_hang"): longest}
    target.write_text(
        matrix_page.group_page(target.read_text(encoding="utf-8"), waits), encoding="utf-8"
    )
    dom = run_chromium(
        tmp_path / "profile", "--window-size=800,900", "--dump-dom", target.as_uri() + "#selftest"
    )
    result = selftest_result(dom, "matrix-selftest")
    assert result["errors"] == []
    assert result["clipped"] == [], result["clipped"]
