"""The scripted upstream in a process of its own, so that a test can kill it mid-stream.

    python -m mcp_layers_support.upstream_proc PORT [LIFETIME_S]

A POST whose `params.arguments.mode` is `endless` gets an SSE stream of progress
notifications, `event(k)` below, one every `GAP_S`, and never the answer (bounded by
`MAX_EVENTS`); any other POST gets a JSON tool result. Binds 127.0.0.1 only; the
lifetime bounds the process even if nobody stops it.
"""

from __future__ import annotations

import json
import sys
import time

from mcp_layers_support.scripted_upstream import Received, Reply, ScriptedUpstream

GAP_S = 0.05
MAX_EVENTS = 2000


def event(k: int) -> bytes:
    """The k-th event of an endless stream: the test rebuilds the stream from this."""
    message = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": k}}
    return b"event: message\ndata: " + json.dumps(message).encode() + b"\n\n"


def respond(request: Received) -> Reply:
    msg = json.loads(request.body)
    arguments = (msg.get("params") or {}).get("arguments") or {}
    if arguments.get("mode") == "endless":
        chunks = [(GAP_S if k else 0.0, event(k)) for k in range(MAX_EVENTS)]
        return Reply(200, [("Content-Type", "text/event-stream")], chunks=chunks)
    result = {"content": [{"type": "text", "text": "ok"}], "isError": False}
    body = json.dumps({"jsonrpc": "2.0", "id": msg.get("id"), "result": result}).encode()
    return Reply(200, [("Content-Type", "application/json")], body)


def main() -> None:
    port = int(sys.argv[1])
    lifetime = float(sys.argv[2]) if len(sys.argv) > 2 else 120.0
    with ScriptedUpstream(responder=respond, keep_log=False, port=port):
        time.sleep(lifetime)


if __name__ == "__main__":
    main()
