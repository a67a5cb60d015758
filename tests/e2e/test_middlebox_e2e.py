"""The middlebox presets end to end: the real SDK client through a real mitmdump injecting
what proxies and CDNs do, and `mcp-layers verdicts` on the recording it left.

Judged on three accounts: what the client saw (its results, every HTTP request and the
status it got, from its own transport's hooks), what the proxy recorded, and the verdicts
the analysis draws from that recording, which must agree with what the client did.
"""

from __future__ import annotations

import http.client
import itertools
import json
import subprocess
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import anyio
import pytest
from click.testing import CliRunner
from mcp import Client
from mcp_layers_analysis.cli import cli
from mcp_layers_core.faults import preset
from mcp_layers_core.faults.rules import Delay, HttpStatus, IdleCut
from mcp_layers_demo.client import LIST_TOOLS
from mcp_layers_support import node_peers
from mcp_layers_support.harness import SSE_RESUMABLE, SSE_STATEFUL, Proxies, Server, ServerPool
from test_faults_e2e import CLIENT, REFUSED, ClientRun, faulted, injected

pytestmark = pytest.mark.e2e


@pytest.fixture
def server(servers: ServerPool) -> Server:
    return servers.get(SSE_STATEFUL)


def verdicts_of(
    records: list[dict[str, Any]], tmp_path: Path, client: str = CLIENT
) -> dict[str, dict[str, Any]]:
    path = tmp_path / "recording.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    result = CliRunner().invoke(cli, ["verdicts", str(path), "--format", "json"])
    assert result.exit_code in (0, 3), result.output  # 3: a MUST broken
    rows = json.loads(result.stdout)
    return {r["check"]: r for r in rows if r["client"] == client}


def test_resume_refused_the_client_resumes_gets_404_and_the_call_fails(
    proxies: Proxies, servers: ServerPool, tmp_path: Path
) -> None:
    """`middlebox.resume_refused` against a server whose events carry ids (`--resumable`,
    `retry: 500`): the first call's stream is cut before its result, the client resumes
    it with `Last-Event-ID` after the `retry:` delay, and the proxy answers that 404."""
    server = servers.get(SSE_RESUMABLE)
    done = faulted(proxies, server, "mcp_faults=middlebox.resume_refused", scenario="middlebox")
    client = ClientRun(calls=[("echo", {"text": "a"}), ("echo", {"text": "b"})])
    done.run(client)
    first, second = client.results
    assert first.error is not None, first  # its stream was cut and its resumption refused
    assert second.error is None and second.text == "echo: b", second  # the client goes on
    records = done.records
    (cut,) = [
        r
        for r in records
        if r["injected"] == injected("middlebox.resume_refused.cut", "sse_truncate")
    ]
    assert cut["method"] == "tools/call" and cut["sse"]["final"] is False, cut
    resumes = [r for r in records if r["kind"] == "stream" and r["injected"] is not None]
    assert resumes, done.failure_context()
    for r in resumes:
        assert "last-event-id" in r["requestHeaders"], r
        assert r["httpStatuses"] == [404]
        assert r["injected"] == injected("middlebox.resume_refused", "http_status")
    gets = [h for h in client.http if h.method == "GET"]
    assert any(h.status == 404 for h in gets), client.http
    got = verdicts_of(records, tmp_path)
    assert got["client-sse-last-event-id"]["verdict"] == "PASS", got["client-sse-last-event-id"]
    # The resumption waited the server's `retry:` (500 ms) after the cut.
    assert got["client-sse-retry-timing"]["verdict"] == "PASS", got["client-sse-retry-timing"]


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
    assert got["mcp-layers/get-405-not-fatal"]["verdict"] == "PASS", got
    assert got["mcp-layers/get-accept-sse"]["verdict"] == "PASS"
    # The SDK sends the header after initialisation and lists both types on every POST.
    assert got["mcp-layers/protocol-version-header"]["verdict"] == "PASS"
    assert got["mcp-layers/accept-json-and-sse"]["verdict"] == "PASS"
    assert got["mcp-layers/initialized-notification"]["verdict"] == "PASS"


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
    assert got["mcp-layers/retry-after-honored"]["verdict"] == "NOT_EXERCISED", got


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


# -- idle_cut: the standby GET stream cut after a silence -------------------------------------

#: The presets cut after 3 s; the same rules cut after 1 s here, to keep the test short.
IDLE_MS = 1000
#: How long the client stays idle (no call) with its standby stream open: long enough for
#: the stream to be cut, reopened and cut again, and for the client to show what it does
#: after that, with the session still going on (past verdicts' 2 s grace).
IDLE_S = 6.5


def _ms(record: dict[str, Any]) -> float:
    return datetime.fromisoformat(record["ts"].replace("Z", "+00:00")).timestamp() * 1000


def _idle_faulted(proxies: Proxies, server: Server, name: str) -> Any:
    """A proxy with preset `name`'s rule, cutting after IDLE_MS instead of its 3 s."""
    (rule,) = preset(name)
    assert isinstance(rule.action, IdleCut) and rule.match.method == ("GET",)
    assert rule.action.after_ms == 3000  # the lab's stand-in for Cloudflare's 100 s
    graceful = " graceful" if rule.action.graceful else ""
    return faulted(
        proxies,
        server,
        f"mcp_fault=idle_cut={IDLE_MS}{graceful} method=GET name={name}",
        scenario="middlebox",
    )


def _idle_run(proxies: Proxies, server: Server, name: str) -> tuple[ClientRun, Any]:
    done = _idle_faulted(proxies, server, name)

    async def stay_idle(_client: Client, _run: ClientRun) -> None:
        await anyio.sleep(IDLE_S)

    client = ClientRun(script=stay_idle, calls=[("echo", {"text": "after the idle time"})])
    done.run(client)
    # The POSTs are not touched: the call after the idle time works.
    assert client.error is None, client.error
    (after,) = client.results
    assert after.error is None and after.text == "echo: after the idle time", after
    gets = [h for h in client.http if h.method == "GET"]
    assert gets and all(h.status == 200 for h in gets), client.http
    return client, done


def _streams(done: Any) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """The session's GET stream records, and those the idle cut ended."""
    streams = sorted((r for r in done.records if r["kind"] == "stream"), key=_ms)
    cut = [r for r in streams if r["injected"] is not None]
    return streams, cut


def _gaps_ms(streams: list[dict[str, Any]]) -> list[float]:
    """From the end of each GET stream to the start of the next."""
    return [_ms(b) - (_ms(a) + a["durationMs"]) for a, b in itertools.pairwise(streams)]


def test_idle_cut_closes_the_standby_stream_and_the_python_sdk_gives_up_after_two(
    proxies: Proxies, server: Server, tmp_path: Path
) -> None:
    """`middlebox.idle_cut`: the client's connection is closed mid-stream (abrupt). SDK
    2.3.0 counts each broken GET stream as a failed attempt and stops reopening it after
    the second (MAX_RECONNECTION_ATTEMPTS = 2; only a stream that ends cleanly resets the
    count): from then on it has no standby stream, while its session goes on."""
    client, done = _idle_run(proxies, server, "middlebox.idle_cut")
    streams, cut = _streams(done)
    gets = [h for h in client.http if h.method == "GET"]
    assert len(streams) == len(gets) == 2, done.failure_context()
    assert cut == streams, done.failure_context()  # both cut by the proxy, none by the client
    for s in cut:
        assert s["injected"] == injected("middlebox.idle_cut", "idle_cut")
        assert s["httpStatuses"] == [200] and s["sse"]["end"] == "error", s
        assert s["sse"]["events"] == 0  # the bundled server sends nothing on it
        assert IDLE_MS <= s["durationMs"] < IDLE_MS + 1000, s
        assert "last-event-id" not in s["requestHeaders"]  # no event ids: nothing to resume
    # It reopened the stream once, after its 1 s reconnection delay, then no more.
    (gap,) = _gaps_ms(streams)
    assert 900 <= gap < 2000, gap
    got = verdicts_of(done.records, tmp_path)
    check = got["mcp-layers/sse-reconnect-after-cut"]
    assert check["verdict"] == "WARNING", check  # a SHOULD missed, never a FAIL
    assert "1 of 2 failed" in check["evidence"] and "no GET followed" in check["evidence"]
    assert got["client-sse-last-event-id"]["verdict"] == "NOT_EXERCISED"


def test_graceful_close_of_the_standby_stream_and_the_python_sdk_reopens_it_each_time(
    proxies: Proxies, server: Server, tmp_path: Path
) -> None:
    """`middlebox.graceful_close`: the last chunk, then the close. SDK 2.3.0 takes a clean
    end as the server's and reopens the stream after 1 s, every time (a reconnect per cut,
    no tight loop): about one GET per (idle time + 1 s)."""
    client, done = _idle_run(proxies, server, "middlebox.graceful_close")
    streams, cut = _streams(done)
    gets = [h for h in client.http if h.method == "GET"]
    assert len(streams) == len(gets) >= 3, done.failure_context()
    # Every stream but the last was cut; the last one the client closed as it left.
    assert cut == streams[:-1] or cut == streams, done.failure_context()
    for s in cut:
        assert s["injected"] == injected("middlebox.graceful_close", "idle_cut")
        assert s["httpStatuses"] == [200] and s["sse"]["end"] == "error", s
        assert IDLE_MS <= s["durationMs"] < IDLE_MS + 1000, s
    for gap in _gaps_ms(streams):
        assert 900 <= gap < 2000, gap  # its 1 s reconnection delay, each time
    got = verdicts_of(done.records, tmp_path)
    check = got["mcp-layers/sse-reconnect-after-cut"]
    assert check["verdict"] == "PASS", check


TS_CLIENT = "mcp-layers-ts-peer@1.32.2"
NODE_CLIENT_TIMEOUT_S = 60.0


def _ts_idle_run(
    peers: node_peers.NodePeers, proxies: Proxies, server: Server, name: str
) -> tuple[dict[str, Any], Any]:
    """The TS SDK client through the same rule: one slow call keeps it busy IDLE_S while
    its standby GET stream stays silent (the call's progress comes on the POST's stream)."""
    done = _idle_faulted(proxies, server, name)
    steps = round(IDLE_S)
    calls = [["slow", {"steps": steps, "delay_ms": 1000}]]
    ran = subprocess.run(
        [str(peers.node), str(peers.ts_client), done.proxy.url, json.dumps(calls), "--terminate"],
        capture_output=True,
        text=True,
        timeout=NODE_CLIENT_TIMEOUT_S,
    )
    assert ran.returncode == 0, ran.stdout + ran.stderr
    seen = json.loads(ran.stdout.strip().splitlines()[-1].removeprefix("RESULT "))
    assert seen["calls"] == [{"name": "slow", "isError": False}], seen
    done.finish()
    return seen, done


@pytest.mark.parametrize("name", ["middlebox.idle_cut", "middlebox.graceful_close"])
def test_the_ts_sdk_reopens_its_standby_stream_after_every_cut(
    peers: node_peers.NodePeers, proxies: Proxies, server: Server, tmp_path: Path, name: str
) -> None:
    """TS SDK 1.32.2, abrupt or graceful alike: it reopens the stream after each cut, a
    second or two later (its reconnection backoff), and keeps doing so for as long as the
    session lasts (a connection that opened resets its retry count). Its last GET may
    cross its own DELETE (and get a 404): not pinned."""
    _seen, done = _ts_idle_run(peers, proxies, server, name)
    streams, cut = _streams(done)
    assert len(cut) >= 3, done.failure_context()  # one per second of silence, and the gaps
    for s in cut:
        assert s["injected"] == injected(name, "idle_cut")
        assert s["httpStatuses"] == [200] and s["sse"]["end"] == "error", s
        assert IDLE_MS <= s["durationMs"] < IDLE_MS + 1000, s
    following = streams[streams.index(cut[0]) :]
    for gap in _gaps_ms(following):
        assert 900 <= gap < 3000, (gap, done.failure_context())
    check = verdicts_of(done.records, tmp_path, TS_CLIENT)["mcp-layers/sse-reconnect-after-cut"]
    assert check["verdict"] == "PASS", check


def _open_standby(port: int) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
    """A raw HTTP/1.1 client: initialize, then the standby GET stream of that session."""
    headers = {"Content-Type": "application/json", "Accept": "application/json, text/event-stream"}
    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "raw-wire", "version": "1"},
        },
    }
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    conn.request("POST", "/mcp", json.dumps(init), headers)
    answered = conn.getresponse()
    answered.read()
    session = answered.getheader("mcp-session-id")
    assert answered.status == 200 and session, answered.status
    conn.request(
        "GET",
        "/mcp",
        headers={
            "Accept": "text/event-stream",
            "Mcp-Session-Id": session,
            "Mcp-Protocol-Version": "2025-11-25",
        },
    )
    stream = conn.getresponse()
    assert stream.status == 200 and stream.getheader("transfer-encoding") == "chunked"
    return conn, stream


@pytest.mark.parametrize("graceful", [False, True], ids=["abrupt", "graceful"])
def test_on_the_wire_graceful_ends_the_chunked_body_and_abrupt_breaks_it(
    proxies: Proxies, server: Server, graceful: bool
) -> None:
    """What the client's HTTP parser meets: after the idle time the body ends with its last
    chunk (graceful) or the connection closes inside it (abrupt); either way it is closed."""
    flag = " graceful" if graceful else ""
    done = faulted(proxies, server, f"mcp_fault=idle_cut=300{flag} method=GET name=cut")
    conn, stream = _open_standby(done.proxy.port)
    started = time.monotonic()
    try:
        if graceful:
            assert stream.read() == b""  # a complete chunked body, nothing in it
        else:
            with pytest.raises(http.client.IncompleteRead):
                stream.read()
        waited = time.monotonic() - started
        assert 0.25 <= waited < 5, waited
        assert conn.sock is None or conn.sock.recv(1) == b""  # the proxy closed it
    finally:
        conn.close()
    done.finish()
    (rec,) = [r for r in done.records if r["kind"] == "stream"]
    assert rec["injected"] == injected("cut", "idle_cut") and rec["sse"]["end"] == "error"
