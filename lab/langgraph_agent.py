"""LangChain's MCP adapters with a LangGraph agent, run by the lab in the client's virtualenv.

`MultiServerMCPClient` (langchain-mcp-adapters) over Streamable HTTP, on the Python `mcp`
1.x SDK that the adapters pin (the lab's own py-sdk is 2.x: a different client codebase),
its tools given to LangGraph's prebuilt ReAct agent with `ChatOpenAI` pointed at the lab's
fake model::

    python langgraph_agent.py MCP_URL MODEL_URL [PROMPT]

The adapters open a new MCP session for every operation (initialize, the operation,
DELETE): one for the tool list, one per tool call. Everything is the libraries' defaults
(the agent's tool-error handling included), except the model connection, which retries
nothing (`max_retries=0`): a retry on the wire must be the MCP client's. A failed tool
list runs the turn without tools, as the agents do. Prints the final text, then
``RESULT <json>``; exit 0 when the model answered with text.
"""

import asyncio
import json
import os
import sys
import threading
from typing import Any

from langchain_mcp_adapters.client import MultiServerMCPClient
from langchain_openai import ChatOpenAI
from langgraph.prebuilt import create_react_agent

#: Past the lab's cut-stream waits, short of its 120 s kill, so a hang shows as TIMEOUT.
RUN_TIMEOUT_S = 100.0
#: The agent's step bound (each tool call is two steps: the model, then the tool).
RECURSION_LIMIT = 10


def _timeout() -> None:
    print("TIMEOUT", file=sys.stderr, flush=True)
    os._exit(3)


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


async def run(mcp_url: str, model_url: str, prompt: str) -> int:
    out: dict[str, Any] = {"toolsError": None, "tools": [], "final": None}
    client = MultiServerMCPClient({"echo": {"transport": "streamable_http", "url": mcp_url}})
    tools: list[Any] = []
    try:
        tools = await client.get_tools()
        out["tools"] = [t.name for t in tools]
    except Exception as exc:  # any failure: the turn runs without tools
        out["toolsError"] = _error(exc)
    model = ChatOpenAI(
        model="lab-model", base_url=f"{model_url}/v1", api_key="lab-dummy-key", max_retries=0
    )
    agent = create_react_agent(model, tools)
    code = 1
    try:
        state = await agent.ainvoke(
            {"messages": [("user", prompt)]}, {"recursion_limit": RECURSION_LIMIT}
        )
        text = str(state["messages"][-1].content)
        out["final"] = text
        print(text, flush=True)
        code = 0 if text else 1
    except Exception as exc:  # reported; the result line still follows
        print(f"agent failed: {_error(exc)}", file=sys.stderr)
    print(f"RESULT {json.dumps(out)}", flush=True)
    return code


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print("usage: python langgraph_agent.py MCP_URL MODEL_URL [PROMPT]", file=sys.stderr)
        return 2
    prompt = argv[2] if len(argv) > 2 else "Call the echo tool with text hello"
    timer = threading.Timer(RUN_TIMEOUT_S, _timeout)
    timer.daemon = True
    timer.start()
    return asyncio.run(run(argv[0], argv[1], prompt))


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
