"""`mcp-layers bundle` leaks nothing: canaries planted in a real recording stay out of the zip.

A real mitmdump with the addon records a scripted session. Distinctive strings (canaries)
are planted wherever the addon's privacy rules promise they are not written
(docs/record-format.md, Privacy): the client's `Authorization`, `Cookie` and `X-Api-Key`
headers, the URL's query string, the session id the server issues (recorded hashed), and,
token-shaped, the JSON-RPC error messages the server sends (recorded scrubbed of token
shapes: a plain word in an error message is recorded by design, and so bundled). The
bundle, by session and by client, must hold none of them in any member, decompressed.
"""

from __future__ import annotations

import json
import zipfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Final

import pytest
from click.testing import CliRunner
from mcp_layers_analysis.cli import cli
from mcp_layers_support.harness import Proxy
from mcp_layers_support.rawhttp import RawClient
from mcp_layers_support.scripted_upstream import Reply, ScriptedUpstream, json_bytes, json_reply

pytestmark = pytest.mark.e2e

PROTOCOL: Final = "2025-11-25"
CLIENT: Final = {"name": "canary-client", "version": "1.0"}

AUTH: Final = "cnryAuthorization7Q2"
COOKIE: Final = "cnryCookie5Vx9"
API_KEY: Final = "cnryApiKey3Kd8"
QUERY: Final = "cnryQueryToken4Hs1"
SESSION: Final = "cnrySessionId6Tz0"
# Token shapes the addon scrubs from an error message: an API key, a bearer token, a
# key=value secret.
ERR_KEY: Final = "sk-cnryErrorKey8Lm2Np4"
ERR_BEARER: Final = "cnryErrorBearer9Wq3"
ERR_SECRET: Final = "cnryErrorSecret1Bv5"
CANARIES: Final = (AUTH, COOKIE, API_KEY, QUERY, SESSION, ERR_KEY, ERR_BEARER, ERR_SECRET)


def secret_headers(session: str | None = None) -> list[tuple[str, str]]:
    headers = [
        ("Content-Type", "application/json"),
        ("Accept", "application/json, text/event-stream"),
        ("User-Agent", "canary-test/1.0"),
        ("MCP-Protocol-Version", PROTOCOL),
        ("Authorization", f"Bearer {AUTH}"),
        ("Cookie", f"sid={COOKIE}; theme=dark"),
        ("X-Api-Key", API_KEY),
    ]
    if session is not None:
        headers.append(("Mcp-Session-Id", session))
    return headers


def rpc_error(rid: int, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "error": {"code": code, "message": message}}


def call(rid: int, tool: str) -> bytes:
    return json_bytes(
        {
            "jsonrpc": "2.0",
            "id": rid,
            "method": "tools/call",
            "params": {"name": tool, "arguments": {}},
        }
    )


@pytest.fixture(scope="module")
def recording(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The proxy's record folder after a session full of canaries (the proxy stopped)."""
    session_header = [("Mcp-Session-Id", SESSION)]
    replies = [
        json_reply(
            {
                "jsonrpc": "2.0",
                "id": 1,
                "result": {
                    "protocolVersion": PROTOCOL,
                    "capabilities": {"tools": {}},
                    "serverInfo": {"name": "canary-server", "version": "0.1"},
                },
            },
            headers=session_header,
        ),
        Reply(202, session_header),
        json_reply(
            rpc_error(2, -32602, f"invalid token {ERR_KEY}; api_key={ERR_SECRET}"),
            headers=session_header,
        ),
        json_reply(
            rpc_error(3, -32000, f"upstream refused Bearer {ERR_BEARER}"),
            status=503,
            headers=session_header,
        ),
        Reply(200, session_header),
    ]
    query = f"/mcp?token={QUERY}&user=me"
    workdir = tmp_path_factory.mktemp("canaries")
    with ScriptedUpstream(replies) as upstream, Proxy(upstream.port, workdir) as proxy:
        with RawClient(proxy.port) as client:
            initialize = {
                "jsonrpc": "2.0",
                "id": 1,
                "method": "initialize",
                "params": {
                    "protocolVersion": PROTOCOL,
                    "capabilities": {},
                    "clientInfo": CLIENT,
                },
            }
            gots = [
                client.post(json_bytes(initialize), secret_headers(), query),
                client.post(
                    json_bytes({"jsonrpc": "2.0", "method": "notifications/initialized"}),
                    secret_headers(SESSION),
                    query,
                ),
                client.post(call(2, "weather"), secret_headers(SESSION), query),
                client.post(call(3, "forecast"), secret_headers(SESSION), query),
                client.request("DELETE", b"", secret_headers(SESSION), query),
            ]
        assert [g.status for g in gots] == [200, 202, 200, 503, 200], [g.error for g in gots]
        upstream.wait_received(5)
        # The canaries did pass through the proxy: they were there to leak.
        seen = repr([(r.target, r.headers) for r in upstream.received])
        for canary in (AUTH, COOKIE, API_KEY, QUERY):
            assert canary in seen, canary
        proxy.stop()
        yield proxy.record_dir


def records_of(folder: Path) -> list[dict[str, Any]]:
    return [
        json.loads(line)
        for path in sorted(folder.glob("*.jsonl"))
        for line in path.read_text().splitlines()
        if line.strip()
    ]


def members(zip_path: Path) -> dict[str, bytes]:
    with zipfile.ZipFile(zip_path) as zf:
        return {name: zf.read(name) for name in zf.namelist()}


def test_the_recording_holds_the_session_and_its_redacted_errors(recording: Path) -> None:
    records = records_of(recording)
    calls = [r for r in records if r["method"] == "tools/call"]
    assert [r["outcome"] for r in calls] == ["JSONRPC_ERROR", "HTTP_ERROR"]
    messages = [r["jsonrpc"]["errorMessage"] for r in calls]
    # The messages are there (the bundle's records and report show them), scrubbed.
    assert messages[0].startswith("invalid token [redacted]")
    assert all("[redacted]" in m for m in messages)


@pytest.mark.parametrize("by", ["session", "client"])
def test_no_canary_reaches_any_member_of_the_bundle(
    recording: Path, tmp_path: Path, by: str
) -> None:
    records = records_of(recording)
    session = next(r["session"] for r in records if r["method"] == "tools/call")
    assert session.startswith("s-")  # the issued id, hashed
    value = session if by == "session" else CLIENT["name"]
    out = tmp_path / "bug.zip"
    result = CliRunner().invoke(
        cli, ["bundle", str(recording), f"--{by}", value, "-o", str(out)], catch_exceptions=False
    )
    assert result.exit_code == 0, result.stderr
    got = members(out)
    assert {"SUMMARY.md", "records.jsonl", "report.html", "verdicts.json"} <= set(got)
    summary = got["SUMMARY.md"].decode()
    assert "JSONRPC_ERROR at protocol, JSON-RPC error -32602" in summary
    assert "HTTP 503, HTTP_ERROR at transport" in summary
    raw = out.read_bytes()
    for canary in CANARIES:
        assert canary.encode() not in raw
        for name, data in got.items():
            assert canary.encode() not in data, (canary, name)
            assert canary.lower().encode() not in data.lower(), (canary, name)
