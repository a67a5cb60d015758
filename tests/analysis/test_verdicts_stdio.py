"""`verdicts` on the records of `mcp-layers wrap`: only the rules that hold on any
transport grade them; the HTTP ones (headers, sessions, SSE) do not read them."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

from analysis_helpers import invoke
from mcp_layers_analysis.verdicts import ANY_TRANSPORT, RULES
from mcp_layers_core.stdio import StdioObserver


def stdio_recording(path: Path) -> None:
    o = StdioObserver(server="stdio:test", run_id="1-1", started=1_700_000_000.0)
    t = o.started
    records = []

    def client(msg: dict[str, object]) -> None:
        nonlocal t
        t += 0.01
        line = json.dumps(msg).encode()
        records.extend(o.from_client(line, len(line), t))

    def server(msg: dict[str, object]) -> None:
        nonlocal t
        t += 0.01
        line = json.dumps(msg).encode()
        records.extend(o.from_server(line, len(line), t))

    init = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "clientInfo": {"name": "c", "version": "1"},
    }
    client({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": init})
    result = {
        "protocolVersion": "2025-11-25",
        "capabilities": {},
        "serverInfo": {"name": "s", "version": "1"},
    }
    server({"jsonrpc": "2.0", "id": 0, "result": result})
    client({"jsonrpc": "2.0", "method": "notifications/initialized"})
    client({"jsonrpc": "2.0", "id": 1, "method": "tools/list"})
    server({"jsonrpc": "2.0", "id": 1, "result": {"tools": []}})
    records.extend(o.exited(t + 0.1, 0, None))
    path.write_text("".join(json.dumps(r) + "\n" for r in records))


def test_http_rules_do_not_grade_stdio_records(tmp_path: Path) -> None:
    path = tmp_path / "mcp-stdio.jsonl"
    stdio_recording(path)
    result = invoke("verdicts", str(path), "--format", "json")
    assert result.exit_code == 0, result.stderr
    verdicts = {row["check"]: row["verdict"] for row in json.loads(result.stdout)}
    assert verdicts["mcp-layers/initialized-notification"] == "PASS"
    assert verdicts["mcp-layers/request-ids-unique"] == "PASS"
    for rule in RULES:
        if rule.id not in ANY_TRANSPORT:
            assert verdicts[rule.id] == "NOT_EXERCISED", rule.id


def crashed_recording(path: Path) -> str:
    """A stdio session whose server exits mid-call (code 3); its session id."""
    o = StdioObserver(server="stdio:test", run_id="2-2", started=1_700_000_000.0)
    records = []
    t = o.started
    for side, msg in [
        ("c", {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "clientInfo": {"name": "c", "version": "1"}}}),
        ("s", {"jsonrpc": "2.0", "id": 0, "result": {
            "protocolVersion": "2025-11-25", "capabilities": {},
            "serverInfo": {"name": "s", "version": "1"}}}),
        ("c", {"jsonrpc": "2.0", "method": "notifications/initialized"}),
        ("c", {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
               "params": {"name": "write", "arguments": {}}}),
    ]:  # fmt: skip
        t += 0.01
        line = json.dumps(msg).encode()
        take = o.from_client if side == "c" else o.from_server
        records.extend(take(line, len(line), t))
    records.extend(o.exited(t + 12.0, 3, None))  # 12 s later: a stall, then the crash
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return str(records[0]["session"])


def test_every_reader_takes_stdio_records_as_they_are(tmp_path: Path) -> None:
    """summary, sessions, show, hangs, report and bundle read a stdio recording (a crash
    mid-call) without a stdio case of their own, and see the transport failure."""
    path = tmp_path / "mcp-stdio.jsonl"
    session = crashed_recording(path)
    summary = invoke("summary", path, "--format", "json")
    assert summary.exit_code == 0, summary.stderr
    assert "NO_RESPONSE" in summary.stdout
    sessions = invoke("sessions", path)
    assert sessions.exit_code == 0 and session in sessions.stdout, sessions.stderr
    shown = invoke("show", session, path, "--format", "json")
    assert shown.exit_code == 0, shown.stderr
    rows = {r["call"]: r for r in json.loads(shown.stdout)}
    assert rows["tools/call write"]["outcome"] == "NO_RESPONSE"
    assert "server_exited:code=3" in rows["end of session"]["detail"]
    hangs = invoke("hangs", path)
    assert hangs.exit_code == 0, hangs.stderr
    assert "mcp_server" in hangs.stdout and "tools/call write" in hangs.stdout
    page = tmp_path / "report.html"
    report = invoke("report", path, "-o", page)
    assert report.exit_code == 0, report.stderr
    html = page.read_text()
    assert session in html and "NO_RESPONSE" in html
    out = tmp_path / "bug.zip"
    bundled = invoke("bundle", path, "--session", session, "-o", out)
    assert bundled.exit_code == 0, bundled.stderr
    with zipfile.ZipFile(out) as z:
        summary_md = z.read("SUMMARY.md").decode()
    assert "`tools/call write`" in summary_md and "NO_RESPONSE at transport" in summary_md
