"""The Python SDK reference client: the official ``mcp`` Client inside a minimal agent loop.

``python -m mcp_layers_lab.sdk_agent --mcp URL --model URL [--prompt TEXT]``

It does what the coding agents do, with nothing of its own on top of the SDK: connect
(the 2025-11-25 handshake with a session, ``mode="legacy"``, the era the agents speak;
``--mode auto`` lets the SDK pick, which is 2026-07-28, stateless, against the lab's server),
list the tools, offer them to the model (Anthropic Messages, one JSON answer per turn),
call what the model asks for and hand the result back (an exception becomes an error
result, as the agents do), until the model answers with text. If the server cannot be
reached, the model is asked without tools (as Claude Code does). Any retry on the wire is
therefore the SDK's own, or the model's.

It prints the model's final text and, last, ``RESULT <json>``: what it saw.
Exit 0 when the model answered with text, 1 otherwise.
"""

from __future__ import annotations

import argparse
import json
import sys
import urllib.request
from typing import Any, Final

import anyio
import mcp_types as types
from mcp import Client
from mcp.client.streamable_http import streamable_http_client

NAME: Final = "lab-py-sdk"
MAX_TURNS: Final = 4
#: The whole run is bounded (the SDK's own timeouts are left at their defaults: they are
#: part of what the lab observes).
RUN_TIMEOUT_S: Final = 100.0
MODEL_TIMEOUT_S: Final = 30.0


def _sdk_version() -> str:
    from importlib.metadata import version

    return version("mcp")


def _error_text(exc: BaseException) -> str:
    # Task groups wrap the real cause; the innermost message is what a model would see.
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


def ask_model(model_url: str, messages: list[Any], tools: list[dict[str, Any]]) -> dict[str, Any]:
    body = {"model": "lab-model", "max_tokens": 1024, "messages": messages}
    if tools:
        body["tools"] = tools
    request = urllib.request.Request(
        f"{model_url}/v1/messages",
        data=json.dumps(body).encode(),
        headers={
            "content-type": "application/json",
            "anthropic-version": "2023-06-01",
            "x-api-key": "lab-dummy-key",
            "user-agent": f"{NAME}/{_sdk_version()}",
        },
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=MODEL_TIMEOUT_S) as response:
        message: dict[str, Any] = json.loads(response.read())  # a Messages API answer
    return message


class Agent:
    def __init__(self, mcp_url: str, model_url: str, prompt: str, mode: str = "legacy") -> None:
        self.mcp_url = mcp_url
        self.model_url = model_url
        self.prompt = prompt
        self.mode = mode  #: the SDK's connect mode: `legacy` (a session) or `auto`
        self.out: dict[str, Any] = {"connectError": None, "tools": [], "calls": [], "final": None}
        self.started = False

    async def converse(self, client: Client | None, tools: list[types.Tool]) -> None:
        self.started = True
        offered = [
            {"name": t.name, "description": t.description or "", "input_schema": t.input_schema}
            for t in tools
        ]
        messages: list[Any] = [{"role": "user", "content": self.prompt}]
        for _ in range(MAX_TURNS):
            reply = await anyio.to_thread.run_sync(ask_model, self.model_url, messages, offered)
            content = reply.get("content") or []
            uses = [b for b in content if b.get("type") == "tool_use"]
            if not uses or client is None:
                self.out["final"] = "".join(b.get("text", "") for b in content)
                return
            messages.append({"role": "assistant", "content": content})
            results = []
            for use in uses:
                try:
                    answer = await client.call_tool(use["name"], use.get("input") or {})
                    text = "\n".join(
                        c.text for c in answer.content if isinstance(c, types.TextContent)
                    )
                    is_error = bool(answer.is_error)
                except Exception as exc:  # the error goes back to the model, like the agents do
                    text, is_error = _error_text(exc), True
                self.out["calls"].append({"tool": use["name"], "isError": is_error, "text": text})
                results.append(
                    {
                        "type": "tool_result",
                        "tool_use_id": use["id"],
                        "content": text,
                        "is_error": is_error,
                    }
                )
            messages.append({"role": "user", "content": results})

    async def run(self) -> dict[str, Any]:
        info = types.Implementation(name=NAME, version=_sdk_version())
        try:
            async with Client(
                streamable_http_client(self.mcp_url),
                mode=self.mode,
                client_info=info,
            ) as client:
                try:
                    tools = (await client.list_tools()).tools
                except Exception as exc:
                    self.out["listError"] = _error_text(exc)
                    tools = []
                self.out["tools"] = [t.name for t in tools]
                await self.converse(client, tools)
        except Exception as exc:
            if self.started:
                self.out["crash"] = _error_text(exc)
            else:
                self.out["connectError"] = _error_text(exc)
                await self.converse(None, [])
        return self.out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mcp_layers_lab.sdk_agent")
    parser.add_argument("--mcp", required=True, help="the MCP endpoint")
    parser.add_argument("--model", required=True, help="the fake model API, without a path")
    parser.add_argument("--prompt", default="Call the echo tool with text hello")
    parser.add_argument(
        "--mode",
        choices=["legacy", "auto"],
        default="legacy",
        help="legacy: 2025-11-25 with a session (default); auto: the SDK's choice",
    )
    args = parser.parse_args(argv)
    agent = Agent(args.mcp, args.model, args.prompt, args.mode)

    async def bounded() -> dict[str, Any]:
        with anyio.fail_after(RUN_TIMEOUT_S):
            return await agent.run()

    try:
        out = anyio.run(bounded)
    except Exception as exc:
        agent.out["crash"] = _error_text(exc)
        out = agent.out
    if out.get("final"):
        print(out["final"])
    print("RESULT " + json.dumps(out), flush=True)
    return 0 if out.get("final") else 1


if __name__ == "__main__":
    sys.exit(main())
