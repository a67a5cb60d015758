"""The middlebox presets end to end: the real SDK client through a real mitmdump injecting
what proxies and CDNs do, and `mcp-layers verdicts` on the recording it left.

Judged on three accounts: what the client saw (its results, every HTTP request and the
status it got, from its own transport's hooks), what the proxy recorded, and the verdicts
the analysis draws from that recording, which must agree with what the client did.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from mcp_layers_analysis.cli import cli
from mcp_layers_core.faults import preset
from mcp_layers_core.faults.rules import Delay, HttpStatus
from mcp_layers_demo.client import LIST_TOOLS
from mcp_layers_support.harness import SSE_STATEFUL, Proxies, Server, ServerPool
from test_faults_e2e import CLIENT, REFUSED, ClientRun, faulted, injected

pytestmark = pytest.mark.e2e


@pytest.fixture
def server(servers: ServerPool) -> Server:
    return servers.get(SSE_STATEFUL)


def verdicts_of(records: list[dict[str, Any]], tmp_path: Path) -> dict[str, dict[str, Any]]:
    path = tmp_path / "recording.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    result = CliRunner().invoke(cli, ["verdicts", str(path), "--format", "json"])
    assert result.exit_code in (0, 1), result.output
    rows = json.loads(result.stdout)
    return {r["check"]: r for r in rows if r["client"] == CLIENT}


def test_get_405_the_client_carries_on_with_posts(
    proxies: Proxies, server: Server, tmp_path: Path
) -> None:
    done = faulted(proxies, server, "mcp_faults=middlebox.get_405", scenario="middlebox")
    client = ClientRun(calls=[(LIST_TOOLS, {}), ("echo", {"text": "a"})])
    done.run(client)
    gets = [h for h in client.http if h.method == "GET"]
    assert gets and all(h.status == 405 for h in gets), client.http
    assert client.error is None and all(r.error is None for r in client.results), client
    streams = [r for r in done.records if r["kind"] == "stream"]
    assert len(streams) == len(gets), done.failure_context()
    for s in streams:
        assert s["httpStatuses"] == [405] and s["injected"] == injected(
            "middlebox.get_405", "http_status"
        )
        assert "text/event-stream" in s["accept"] and "mcp-session-id" in s["requestHeaders"]
    got = verdicts_of(done.records, tmp_path)
    assert got["client-get-405-not-fatal"]["verdict"] == "PASS", got
    assert got["client-get-accept-sse"]["verdict"] == "PASS"
    # The SDK sends the header after initialisation and lists both types on every POST.
    assert got["client-protocol-version-header"]["verdict"] == "PASS"
    assert got["client-accept-json-and-sse"]["verdict"] == "PASS"
    assert got["client-initialized-notification"]["verdict"] == "PASS"


@pytest.mark.parametrize(
    ("name", "status", "low_ms", "high_ms"),
    [
        ("middlebox.rate_limited_seconds", 429, 2000, 2000),
        ("middlebox.unavailable_retry_after", 503, 2000, 2000),
        # An HTTP date has whole seconds: 3 s ahead reads as 2 to 3 s.
        ("middlebox.rate_limited_date", 429, 1900, 3100),
        ("middlebox.unavailable_date", 503, 1900, 3100),
    ],
)
def test_retry_after_presets_as_seconds_and_as_a_date(
    proxies: Proxies,
    server: Server,
    tmp_path: Path,
    name: str,
    status: int,
    low_ms: int,
    high_ms: int,
) -> None:
    done = faulted(proxies, server, f"mcp_faults={name}", scenario="middlebox")
    client = ClientRun(calls=[("echo", {"text": "a"}), ("echo", {"text": "b"})])
    done.run(client)
    first, second = client.results
    assert first.error == REFUSED and second.error is None, client.results
    (refused,) = [h for h in client.posts("tools/call") if h.status == status]
    assert refused.retry_after is not None
    if "date" in name:
        assert refused.retry_after.endswith(" GMT"), refused.retry_after
    else:
        assert refused.retry_after == "2"
    rec = done.record("tools/call", refused.rpc_id)
    assert rec["httpStatuses"] == [status] and rec["injected"] == injected(name, "http_status")
    assert low_ms <= rec["retryAfterMs"] <= high_ms, rec
    got = verdicts_of(done.records, tmp_path)
    # SDK 2.3.0 retries nothing by itself: its second call is a new call, not a retry.
    assert got["client-retry-after-honored"]["verdict"] == "NOT_EXERCISED", got


def test_late_answer_the_client_gave_up_and_said_so(
    proxies: Proxies, server: Server, tmp_path: Path
) -> None:
    """`middlebox.late_answer` holds the answer 70 s, past the SDKs' 60 s timeout; the same
    rule held 3 s against this client's 2 s read timeout keeps the test short."""
    (rule,) = preset("middlebox.late_answer")
    assert isinstance(rule.action, Delay) and rule.action.ms > 60_000
    done = faulted(
        proxies,
        server,
        "mcp_fault=delay=3000 nth=1 counter=client name=middlebox.late_answer",
        scenario="middlebox",
    )
    client = ClientRun(calls=[("echo", {"text": "late"}), ("echo", {"text": "next"})])
    done.run(client)
    late, after = client.results
    assert late.error is not None and after.error is None, client.results
    cancelled = client.posts("notifications/cancelled")
    records = done.records
    (late_rec,) = [r for r in records if r["kind"] == "request" and r["injected"] is not None]
    assert late_rec["injected"] == injected("middlebox.late_answer", "delay")
    result = CliRunner().invoke(
        cli,
        ["show", late_rec["session"], "-", "--format", "json"],
        input="".join(json.dumps(r) + "\n" for r in records),
    )
    rows = {row["id"]: row for row in json.loads(result.stdout)}
    detail = rows[late_rec["id"]]["detail"] or ""
    # SDK 2.3.0 cancels on its read timeout; the forensics name that move.
    assert cancelled, client.http
    assert "the client gave up: notifications/cancelled #" in detail, detail


def test_every_middlebox_preset_parses_into_what_its_doc_says() -> None:
    assert isinstance(preset("middlebox.get_405")[0].action, HttpStatus)
    assert preset("middlebox.get_405")[0].match.method == ("GET",)
    refused, cut = preset("middlebox.resume_refused")
    assert refused.match.method == ("GET:resume",) and cut.kind == "sse_truncate"
