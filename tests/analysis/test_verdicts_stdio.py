"""`verdicts` on the records of `mcp-layers wrap`: only the rules that hold on any
transport grade them; the HTTP ones (headers, sessions, SSE) do not read them."""

from __future__ import annotations

import json
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
