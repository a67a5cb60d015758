"""Ax for Python (`axllm`) as an MCP client, run by the lab in the client's own virtualenv.

`AxMCPClient` on `AxMCPStreamableHTTPTransport` (Ax's own transport on urllib, no MCP SDK
underneath), its tools used by an `ax()` program (`question -> answer`) with Ax's
OpenAI-compatible provider pointed at the lab's fake model::

    LAB_AX_ERA=legacy|modern|auto python ax_agent.py MCP_URL MODEL_URL [PROMPT]

Standard library and `axllm` only: the virtualenv has nothing else, so nothing of the
project's own is imported (mypy takes `axllm` as untyped). The era is pinned by the lab
(`legacy`: 2025-11-25 sessions; `modern`: 2026-07-28, stateless). Everything else is Ax's
defaults, except its SSRF guard, told to allow plain HTTP on loopback (Python's Ax calls
127.0.0.1 private, so it needs both flags). A failed init runs the turn without tools, as
the agents do. Prints the final text, then ``RESULT <json>``; exit 0 when the model
answered with text.
"""

import json
import os
import sys
import threading

from axllm import AxMCPClient, AxMCPStreamableHTTPTransport, ai, ax

#: Past the lab's cut-stream waits, short of its 120 s kill, so a hang shows as TIMEOUT.
RUN_TIMEOUT_S = 100.0


def _timeout() -> None:
    print("TIMEOUT", file=sys.stderr, flush=True)
    os._exit(3)


def _error(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {exc}"


def main(argv: list[str]) -> int:
    if len(argv) < 2:
        print(
            "usage: LAB_AX_ERA=ERA python ax_agent.py MCP_URL MODEL_URL [PROMPT]", file=sys.stderr
        )
        return 2
    mcp_url, model_url = argv[0], argv[1]
    prompt = argv[2] if len(argv) > 2 else "Call the echo tool with text hello"
    era = os.environ.get("LAB_AX_ERA") or "legacy"
    timer = threading.Timer(RUN_TIMEOUT_S, _timeout)
    timer.daemon = True
    timer.start()

    out: dict[str, object] = {"era": era, "negotiated": None, "initError": None, "tools": []}
    guard = {"requireHttps": False, "allowLocalhost": True, "allowPrivateNetworks": True}
    connecting = AxMCPClient(
        AxMCPStreamableHTTPTransport(mcp_url, {"ssrfProtection": guard}),
        {"namespace": "lab", "era": era},
    )
    client: AxMCPClient | None = connecting
    try:
        connecting.init()
        out["negotiated"] = connecting.negotiated_protocol_version
        out["tools"] = [t.get("name") for t in connecting.tools]
    except Exception as exc:  # any failure: the turn runs without tools
        out["initError"] = _error(exc)
        client = None

    llm = ai(
        "openai-compatible", base_url=f"{model_url}/v1", api_key="lab-dummy-key", model="lab-model"
    )
    program = ax("question:string -> answer:string", {"mcp": client} if client else {})
    code = 1
    try:
        result = program.forward(llm, {"question": prompt})
        text = str(result.get("answer", "") if isinstance(result, dict) else result)
        out["final"] = text
        print(text, flush=True)
        code = 0 if text else 1
    except Exception as exc:  # reported; the run goes on to close
        print(f"model turn failed: {_error(exc)}", file=sys.stderr)
    if client is not None:
        try:
            client.close()
        except Exception as exc:
            out["closeError"] = _error(exc)
    print(f"RESULT {json.dumps(out)}", flush=True)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
