"""mcp-use (Python) as an MCP client, run by the lab in the client's own virtualenv.

`MCPClient` from mcp-use, on the Python `mcp` 1.x SDK with connect logic of its own (a
pre-flight GET, and a fallback to the legacy HTTP+SSE transport when Streamable HTTP's
`initialize` fails), driving its `MCPAgent` (a LangChain agent) with `ChatOpenAI` pointed
at the lab's fake model::

    MCP_USE_ANONYMIZED_TELEMETRY=false python mcp_use_agent.py MCP_URL MODEL_URL [PROMPT]

Everything is the library's defaults (the agent's `retry_on_error` included), except the
model connection, which retries nothing (`max_retries=0`): a retry on the wire must be
the MCP client's. Telemetry (PostHog and Scarf) is off by the environment the lab gives
it. Prints the final text, then ``RESULT <json>``; exit 0 when the model answered with
text.
"""

import asyncio
import json
import os
import sys
import threading
from typing import Any

from langchain_openai import ChatOpenAI
from mcp_use import MCPAgent, MCPClient

#: Past the lab's cut-stream waits, short of its 120 s kill, so a hang shows as TIMEOUT.
RUN_TIMEOUT_S = 100.0
MAX_STEPS = 5


def _timeout() -> None:
    print("TIMEOUT", file=sys.stderr, flush=True)
    os._exit(3)


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


async def run(mcp_url: str, model_url: str, prompt: str) -> int:
    out: dict[str, Any] = {"final": None, "closeError": None}
    client = MCPClient({"mcpServers": {"echo": {"url": mcp_url}}})
    model = ChatOpenAI(
        model="lab-model", base_url=f"{model_url}/v1", api_key="lab-dummy-key", max_retries=0
    )
    agent = MCPAgent(llm=model, client=client, max_steps=MAX_STEPS)
    code = 1
    try:
        text = str(await agent.run(prompt))
        out["final"] = text
        print(text, flush=True)
        code = 0 if text else 1
    except Exception as exc:  # reported; the result line still follows
        print(f"agent failed: {_error(exc)}", file=sys.stderr)
    try:
        await client.close_all_sessions()
    except Exception as exc:  # reported in the result line
        out["closeError"] = _error(exc)
    print(f"RESULT {json.dumps(out)}", flush=True)
    return code


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python mcp_use_agent.py MCP_URL MODEL_URL [PROMPT]", file=sys.stderr)
        return 2
    prompt = argv[2] if len(argv) > 2 else "Call the echo tool with text hello"
    timer = threading.Timer(RUN_TIMEOUT_S, _timeout)
    timer.daemon = True
    timer.start()
    return asyncio.run(run(argv[0], argv[1], prompt))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
