"""A real MCP client (the official Python SDK ``mcp`` 2.x ``Client``) that drives the demo server.

``python -m mcp_layers_demo.client URL [--mode legacy|auto] [--name NAME]`` makes the default
handful of calls and prints one line per call. ``run_calls`` is the same thing as a function,
for the demo runner and the end-to-end tests.

Modes (the SDK's ``Client(mode=...)``):

- ``legacy``: the 2025-11-25 ``initialize`` handshake; against a stateful server, a session.
- ``auto``: the SDK default. It probes ``server/discover`` first and, against this server,
  adopts 2026-07-28 (per-request, no initialize, no session).
"""

import argparse
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import anyio
import httpx2
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

CLIENT_NAME = "mcp-layers-demo"
CLIENT_VERSION = "0.1.0"

# Not a tool name: MCP tool names allow only letters, digits, "_", "-" and ".", so a "/" can
# never collide with a real tool. It stands for "list the tools" in a call list.
LIST_TOOLS = "tools/list"

SLOW_STEPS = 3
SLOW_DELAY_MS = 200

DEFAULT_CALLS: list[tuple[str, dict[str, Any]]] = [
    (LIST_TOOLS, {}),
    ("echo", {"text": "hello"}),
    ("fail", {"reason": "on purpose"}),
    ("slow", {"steps": SLOW_STEPS, "delay_ms": SLOW_DELAY_MS}),
    ("add_note", {"text": "remember the milk"}),
    ("no_such_tool", {}),
    ("echo", {"text": 42, "unexpected": True}),
]

# The whole run is bounded: a hung server or proxy must not hang the demo or a test.
RUN_TIMEOUT_S = 60.0
CALL_TIMEOUT_S = 20.0
HTTP_TIMEOUT_S = 10.0
HTTP_READ_TIMEOUT_S = 60.0

RequestHook = Callable[[httpx2.Request], None]
ResponseHook = Callable[[httpx2.Response], None]


@dataclass
class CallResult:
    """What one call gave the client.

    ``tool`` is the tool name (``LIST_TOOLS`` for the listing), ``is_error`` the result's
    ``isError`` (None when no result arrived), ``text`` the first text content (for the
    listing: the tool names, comma-separated), ``error`` the text of an exception the SDK
    raised instead of returning a result. ``progress_at``/``elapsed_s`` are seconds since the
    call started: when each progress notification reached the client, and when the call ended.
    ``logs`` counts the log notifications that arrived during the call.
    """

    tool: str
    is_error: bool | None = None
    text: str | None = None
    error: str | None = None
    logs: int = 0
    progress_at: list[float] = field(default_factory=list)
    progress: list[tuple[float, float | None, str | None]] = field(default_factory=list)
    elapsed_s: float = 0.0

    def summary(self) -> str:
        if self.error is not None:
            return f"{self.tool}: exception: {self.error}"
        shown = (self.text or "").replace("\n", " ")
        if len(shown) > 80:
            shown = shown[:77] + "..."
        extra = f" ({len(self.progress)} progress)" if self.progress else ""
        return f"{self.tool}: isError={self.is_error} {shown!r}{extra}"


def _first_text(result: types.CallToolResult) -> str | None:
    for item in result.content:
        if isinstance(item, types.TextContent):
            return item.text
    return None


def _exception_text(exc: BaseException) -> str:
    # Task groups wrap the real cause; the innermost message is what a reader wants.
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


class _Calls:
    """Runs calls one at a time and routes log notifications to the call in flight.

    The SDK delivers logs through one client-wide callback; calls are sequential, so the
    call in flight is the one the server was logging for.
    """

    def __init__(self) -> None:
        self.current: CallResult | None = None

    async def on_log(self, params: types.LoggingMessageNotificationParams) -> None:
        if self.current is not None:
            self.current.logs += 1

    async def one(self, client: Client, tool: str, args: dict[str, Any]) -> CallResult:
        result = CallResult(tool=tool)
        self.current = result
        start = time.monotonic()

        async def on_progress(progress: float, total: float | None, message: str | None) -> None:
            result.progress_at.append(time.monotonic() - start)
            result.progress.append((progress, total, message))

        try:
            with anyio.fail_after(CALL_TIMEOUT_S):
                if tool == LIST_TOOLS:
                    listing = await client.list_tools()
                    result.is_error = False
                    result.text = ",".join(t.name for t in listing.tools)
                else:
                    answer = await client.call_tool(tool, args, progress_callback=on_progress)
                    result.is_error = answer.is_error
                    result.text = _first_text(answer)
        except Exception as exc:  # one failing call must not stop the others: record it
            result.error = _exception_text(exc)
        finally:
            self.current = None
        result.elapsed_s = time.monotonic() - start
        return result


async def run_calls(
    url: str,
    mode: str = "legacy",
    name: str = CLIENT_NAME,
    calls: list[tuple[str, dict[str, Any]]] | None = None,
    *,
    headers: dict[str, str] | None = None,
    on_request: RequestHook | None = None,
    on_response: ResponseHook | None = None,
) -> list[CallResult]:
    """Connect to ``url`` with the SDK client in ``mode`` and make ``calls`` in order.

    ``calls`` defaults to ``DEFAULT_CALLS``; each is ``(tool name, arguments)``, or
    ``(LIST_TOOLS, {})`` to list the tools. An exception on one call is recorded in its
    ``CallResult`` and the next call goes on. A failure to connect raises.

    ``headers`` are sent on every HTTP request (e.g. an ``Authorization`` header).
    ``on_request`` is called with every HTTP request the client sends (POST, GET, DELETE),
    before it goes out: the client's own account of what it put on the wire, including the
    requests the SDK makes by itself (``initialize``, ``server/discover``, a tools/list it
    needs to validate a result). ``on_response`` is called with every response once its
    headers arrived (``response.request`` is its request).
    """
    todo = DEFAULT_CALLS if calls is None else calls

    async def request_hook(request: httpx2.Request) -> None:
        if on_request is not None:
            on_request(request)

    async def response_hook(response: httpx2.Response) -> None:
        if on_response is not None:
            on_response(response)

    # Our own httpx2 client (what the SDK docs prescribe for custom headers) also carries the
    # hooks; its timeouts are bounded, unlike the SDK default 300 s read timeout.
    http = httpx2.AsyncClient(
        headers=headers,
        timeout=httpx2.Timeout(HTTP_TIMEOUT_S, read=HTTP_READ_TIMEOUT_S),
        event_hooks={"request": [request_hook], "response": [response_hook]},
    )
    runner = _Calls()
    results: list[CallResult] = []
    with anyio.fail_after(RUN_TIMEOUT_S):
        async with (
            http,
            Client(
                streamable_http_client(url, http_client=http),
                mode=mode,
                client_info=types.Implementation(name=name, version=CLIENT_VERSION),
                # Ask for log notifications too: on 2026-07-28 the server sends them only
                # to requests that opt in, and they make the slow call's stream longer.
                log_level="info",
                logging_callback=runner.on_log,
                read_timeout_seconds=CALL_TIMEOUT_S,
            ) as client,
        ):
            for tool, args in todo:
                results.append(await runner.one(client, tool, args))
    return results


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m mcp_layers_demo.client",
        description="Drive an MCP server with the SDK client.",
    )
    parser.add_argument("url", help="MCP endpoint, e.g. http://127.0.0.1:8080/mcp")
    parser.add_argument("--mode", choices=["legacy", "auto"], default="legacy")
    parser.add_argument("--name", default=CLIENT_NAME, help="clientInfo name")
    args = parser.parse_args(argv)
    try:
        results = anyio.run(run_calls, args.url, args.mode, args.name)
    except Exception as exc:
        print(f"client {args.mode}: could not run: {_exception_text(exc)}", file=sys.stderr)
        return 1
    print(f"client {args.mode}: {len(results)} calls")
    for r in results:
        print(f"  {r.summary()}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
