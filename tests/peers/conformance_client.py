"""An MCP client behind mitmdump with the addon, as conformance's `--command`.

    conformance client --command "PYTHON tests/peers/conformance_client.py" --scenario S

conformance (0.1.16) starts the scenario's server, appends its URL to the command and
names the scenario in ``MCP_CONFORMANCE_SCENARIO``. This script puts mitmdump in reverse
mode with the addon in front of that URL, runs the client (by default the official Python
SDK client, ``mcp`` 2.3.0, ``Client(url, mode="legacy")``) against the proxy, then stops the proxy with SIGTERM so
that the addon writes what is still open. The recording lands in
``$MCP_LAYERS_RECORD_DIR`` (required), the proxy's log next to it; the scenario name is
the records' ``scenario`` label (``conformance:<scenario>``).

With ``MCP_LAYERS_NODE`` and ``MCP_LAYERS_TS_CLIENT`` (demo/node/client.mjs) set, the
official TypeScript SDK client (1.32.2) runs instead, as a subprocess against the same
proxy, named ``mcp-layers-conformance-ts-client``; it makes the same calls (not the
elicitation one: it has no elicitation handler) and ends its session with a DELETE.

With ``MCP_LAYERS_SCRIPTED_CLIENT`` set (JSON: ``reconnectMs``, ``lastEventId``,
``standaloneGet``), a scripted client (stdlib HTTP, named
``mcp-layers-conformance-scripted``) runs instead, for `sse-retry` only: it initialises,
opens a standalone GET stream first if ``standaloneGet``, calls the tool, reads the POST's
stream to its end, then reconnects with GET ``reconnectMs`` later (with ``Last-Event-ID``
if ``lastEventId``) and reads the answer there; with ``reconnectMs`` null it never
reconnects and lingers `SCRIPTED_LINGER_S` instead. It ends with a DELETE. It behaves in
the ways the SDK clients do not (late, early, without ``Last-Event-ID``, not at all), so
that each of conformance's statuses for its SSE checks happens on a real run.

conformance splits ``--command`` on spaces, so neither path may contain one. Its servers
bind every interface and hand out ``http://localhost:PORT``: the tests run it inside a
network namespace that has only ``lo`` (see tests/e2e/conformance_run.py).

The last stdout line is ``CLIENT OK`` on success; the exit code is 0 then, 1 otherwise.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import mcp_types as types
from mcp import Client
from mcp_layers_demo import procs

CLIENT_NAME = "mcp-layers-conformance-client"
CLIENT_VERSION = "0.1.0"
#: The client's whole run; conformance's own timeout (30 s by default) is above it, so a
#: stall ends here, with the proxy still stopped cleanly.
CLIENT_TIMEOUT_S = 15.0
TS_CLIENT_NAME = "mcp-layers-conformance-ts-client"
SCRIPTED_NAME = "mcp-layers-conformance-scripted"
#: How long the scripted client stays after a cut it does not resume: past the 2 s that
#: `mcp-layers verdicts` gives a client to reconnect, so that the recording can tell.
SCRIPTED_LINGER_S = 2.5
SSE = "text/event-stream"

#: scenario -> the tool the scenario's server expects to be called (and its arguments).
SCENARIO_CALLS: dict[str, tuple[str, dict[str, Any]]] = {
    "tools_call": ("add_numbers", {"a": 1, "b": 2}),
    "sse-retry": ("test_reconnection", {}),
    "elicitation-sep1034-client-defaults": ("test_client_elicitation_defaults", {}),
}


async def accept_with_defaults(_ctx: Any, params: Any) -> types.ElicitResult:
    """Answer an elicitation the way SEP-1034 asks: accept, with each field's default."""
    schema = getattr(params, "requested_schema", None) or {}
    props = schema.get("properties", {}) if isinstance(schema, dict) else {}
    content = {
        name: spec["default"]
        for name, spec in props.items()
        if isinstance(spec, dict) and "default" in spec
    }
    return types.ElicitResult(action="accept", content=content)


async def run_client(url: str, scenario: str) -> None:
    """Connect, list the tools, make the scenario's call; raise on any failure."""
    with anyio.fail_after(CLIENT_TIMEOUT_S):
        async with Client(
            url,
            mode="legacy",
            client_info=types.Implementation(name=CLIENT_NAME, version=CLIENT_VERSION),
            elicitation_callback=accept_with_defaults,
        ) as client:
            tools = await client.list_tools()
            print("tools:", [t.name for t in tools.tools], flush=True)
            call = SCENARIO_CALLS.get(scenario)
            if call is not None:
                result = await client.call_tool(*call)
                print(f"{call[0]}: isError={result.is_error}", flush=True)


def run_ts_client(node: str, script: str, url: str, scenario: str) -> None:
    """The TS SDK client's run (demo/node/client.mjs); raise on any failure it saw."""
    call = SCENARIO_CALLS.get(scenario)
    calls = [list(call)] if call is not None else []
    done = subprocess.run(
        [node, script, url, json.dumps(calls), "--terminate", "--name", TS_CLIENT_NAME],
        capture_output=True,
        text=True,
        timeout=CLIENT_TIMEOUT_S + 5,
    )
    print(done.stdout, end="", flush=True)
    print(done.stderr, end="", file=sys.stderr, flush=True)
    if done.returncode != 0:
        raise RuntimeError(f"the TS SDK client exited {done.returncode}")
    seen = json.loads(done.stdout.strip().splitlines()[-1].removeprefix("RESULT "))
    failed = [c for c in seen["calls"] if c.get("error")]
    if failed:
        raise RuntimeError(f"the TS SDK client's calls failed: {failed}")


class RawSession:
    """One MCP session over plain HTTP (http.client): nothing retries behind the script."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.host, self.port, self.path = parts.hostname or "", parts.port, parts.path or "/"
        self.session: str | None = None
        self.version: str | None = None

    def open(
        self, method: str, message: dict[str, Any] | None = None, **extra: str
    ) -> tuple[http.client.HTTPConnection, http.client.HTTPResponse]:
        conn = http.client.HTTPConnection(self.host, self.port, timeout=CLIENT_TIMEOUT_S)
        headers = {"Accept": SSE if method == "GET" else f"application/json, {SSE}", **extra}
        if self.session:
            headers["Mcp-Session-Id"] = self.session
        if self.version:
            headers["MCP-Protocol-Version"] = self.version
        body = None
        if message is not None:
            body = json.dumps(message).encode()
            headers["Content-Type"] = "application/json"
        conn.request(method, self.path, body=body, headers=headers)
        return conn, conn.getresponse()

    def exchange(self, method: str, message: dict[str, Any] | None = None) -> bytes:
        conn, resp = self.open(method, message)
        try:
            if resp.status >= 400 and method != "DELETE":  # the scenario refuses DELETE
                raise RuntimeError(f"{method} {message and message.get('method')}: {resp.status}")
            self.session = resp.getheader("mcp-session-id") or self.session
            return resp.read()
        finally:
            conn.close()


def sse_events(resp: http.client.HTTPResponse) -> Iterator[tuple[str | None, str]]:
    """(id, data) of each event of an SSE body, until the stream ends."""
    event_id, data = None, []
    for raw in resp:
        line = raw.decode("utf-8").rstrip("\r\n")
        if not line:
            if event_id is not None or data:
                yield event_id, "\n".join(data)
            event_id, data = None, []
        elif line.startswith("id:"):
            event_id = line[3:].strip()
        elif line.startswith("data:"):
            data.append(line[5:].removeprefix(" "))


def run_scripted(url: str, scenario: str, plan: dict[str, Any]) -> None:
    """The scripted client's run (see the module's doc); raise on any failure."""
    if scenario != "sse-retry":
        raise RuntimeError(f"the scripted client plays sse-retry only, not {scenario}")
    raw = RawSession(url)
    info = {"name": SCRIPTED_NAME, "version": CLIENT_VERSION}
    init = {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": info}
    answer = json.loads(raw.exchange("POST", rpc(1, "initialize", init)))
    raw.version = answer["result"]["protocolVersion"]
    raw.exchange("POST", {"jsonrpc": "2.0", "method": "notifications/initialized"})
    standalone = raw.open("GET")[0] if plan.get("standaloneGet") else None
    call_id = 2
    conn, resp = raw.open("POST", rpc(call_id, "tools/call", {"name": "test_reconnection"}))
    last_id = None
    for event_id, _data in sse_events(resp):
        last_id = event_id or last_id
    cut = time.monotonic()
    conn.close()
    print(f"POST stream ended; last event id {last_id}", flush=True)
    reconnect_ms = plan.get("reconnectMs")
    if reconnect_ms is None:
        time.sleep(SCRIPTED_LINGER_S)
    else:
        time.sleep(max(0.0, reconnect_ms / 1000 - (time.monotonic() - cut)))
        extra = {"Last-Event-ID": last_id} if plan.get("lastEventId") and last_id else {}
        conn, resp = raw.open("GET", **extra)
        answered = any(
            data and json.loads(data).get("id") == call_id for _id, data in sse_events(resp)
        )
        conn.close()
        if not answered:
            raise RuntimeError("the resumed GET stream ended without the answer")
        print(f"answer on the GET after {reconnect_ms} ms", flush=True)
    if standalone is not None:
        standalone.close()
    raw.exchange("DELETE")


def rpc(rid: int, method: str, params: dict[str, Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": rid, "method": method, "params": params}


def loopback(url: str) -> tuple[int, str]:
    """The scenario server's port and path (its `localhost` is 127.0.0.1 in the namespace)."""
    parts = urlsplit(url)
    if parts.hostname not in ("localhost", "127.0.0.1") or parts.port is None:
        raise SystemExit(f"conformance_client: expected http://localhost:PORT/..., got {url!r}")
    return parts.port, parts.path or "/"


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: conformance_client.py SERVER_URL", file=sys.stderr)
        return 2
    record_dir = os.environ.get("MCP_LAYERS_RECORD_DIR")
    if not record_dir:
        print("conformance_client: set MCP_LAYERS_RECORD_DIR", file=sys.stderr)
        return 2
    scenario = os.environ.get("MCP_CONFORMANCE_SCENARIO", "initialize")
    upstream_port, path = loopback(argv[1])
    records = Path(record_dir)
    records.mkdir(parents=True, exist_ok=True)
    listen = procs.free_port()
    proxy = procs.start_mitmdump(
        upstream_port,
        listen,
        records / "mitmdump.log",
        record_dir=records,
        scenario=f"conformance:{scenario}",
    )
    try:
        url = urlunsplit(("http", f"{procs.HOST}:{listen}", path, "", ""))
        node, ts_client = os.environ.get("MCP_LAYERS_NODE"), os.environ.get("MCP_LAYERS_TS_CLIENT")
        scripted = os.environ.get("MCP_LAYERS_SCRIPTED_CLIENT")
        if scripted:
            run_scripted(url, scenario, json.loads(scripted))
        elif node and ts_client:
            run_ts_client(node, ts_client, url, scenario)
        else:
            anyio.run(run_client, url, scenario)
    except Exception as exc:
        print(f"conformance_client: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    finally:
        # SIGTERM: the addon writes the exchanges still open (an aborted GET stream).
        procs.stop(proxy)
    print("CLIENT OK", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
