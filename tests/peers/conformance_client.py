"""The official Python SDK client behind mitmdump with the addon, as conformance's `--command`.

    conformance client --command "PYTHON tests/peers/conformance_client.py" --scenario S

conformance (0.1.16) starts the scenario's server, appends its URL to the command and
names the scenario in ``MCP_CONFORMANCE_SCENARIO``. This script puts mitmdump in reverse
mode with the addon in front of that URL, runs the SDK client (``mcp`` 2.3.0,
``Client(url, mode="legacy")``) against the proxy, then stops the proxy with SIGTERM so
that the addon writes what is still open. The recording lands in
``$MCP_LAYERS_RECORD_DIR`` (required), the proxy's log next to it; the scenario name is
the records' ``scenario`` label (``conformance:<scenario>``).

conformance splits ``--command`` on spaces, so neither path may contain one. Its servers
bind every interface and hand out ``http://localhost:PORT``: the tests run it inside a
network namespace that has only ``lo`` (see tests/e2e/test_eras_and_retries.py).

The last stdout line is ``CLIENT OK`` on success; the exit code is 0 then, 1 otherwise.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import mcp_types as types
from mcp import Client
from mcp_layers_support import procs

CLIENT_NAME = "mcp-layers-conformance-client"
CLIENT_VERSION = "0.1.0"
#: The client's whole run; conformance's own timeout (30 s by default) is above it, so a
#: stall ends here, with the proxy still stopped cleanly.
CLIENT_TIMEOUT_S = 15.0

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
