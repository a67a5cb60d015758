"""Drive the tracker with hand-made events: the helpers the core tests share."""

from __future__ import annotations

import json
from typing import Any

from mcp_layers_core.events import (
    Event,
    FlowFailed,
    OtherRequest,
    PostReceived,
    ResponseBody,
    ResponseStarted,
    StreamChunk,
    StreamEnded,
)
from mcp_layers_core.tracker import Settings, Tracker, records_of

SERVER = "127.0.0.1:9000"
PEER = "127.0.0.1:50000"
SSE = {"content-type": "text/event-stream"}
JSON = {"content-type": "application/json"}


def rpc(id_: object, method: str, **params: Any) -> bytes:
    msg: dict[str, Any] = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params:
        msg["params"] = params
    return json.dumps(msg).encode()


def call(id_: object, tool: str = "echo") -> bytes:
    return rpc(id_, "tools/call", name=tool, arguments={})


def result(id_: object, **res: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": id_, "result": res}


def event(msg: object, name: str = "message") -> bytes:
    return f"event: {name}\ndata: {json.dumps(msg)}\n\n".encode()


class Run:
    """A tracker plus a clock, with one-line helpers for the usual exchanges."""

    def __init__(self, **settings: Any) -> None:
        self.t = Tracker(Settings(**settings))
        self.now = 1_700_000_000.0
        self.n = 0
        self.released: list[dict] = []
        self.flows: dict[int, str | None] = {}

    def tick(self) -> float:
        self.now += 0.01
        return self.now

    def post(
        self,
        body: bytes,
        headers: dict[str, str] | None = None,
        peer: str = PEER,
        query_session: str | None = None,
    ) -> str:
        """Send a POST; records it releases (held or expired ones) land in `self.released`."""
        self.n += 1
        flow = f"f{self.n}"
        event = PostReceived(
            flow, self.tick(), SERVER, peer, headers or {}, body, len(body), query_session
        )
        self.released = self.handle(event)
        return flow

    def json(
        self, flow: str, status: int, answer: object, headers: dict[str, str] | None = None
    ) -> list[dict]:
        self.handle(ResponseStarted(flow, self.tick(), status, {**JSON, **(headers or {})}))
        raw = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
        return self.handle(ResponseBody(flow, self.tick(), raw, len(raw)))

    def sse(
        self,
        flow: str,
        chunks: list[bytes],
        headers: dict[str, str] | None = None,
        end: str = "ok",
        framed: bool = True,
    ) -> list[dict]:
        self.handle(ResponseStarted(flow, self.tick(), 200, {**SSE, **(headers or {})}, framed))
        for c in chunks:
            assert self.handle(StreamChunk(flow, self.tick(), c)) == []
        if end == "ok":
            return self.handle(StreamEnded(flow, self.tick()))
        return self.handle(FlowFailed(flow, self.tick(), end))

    def exchange(self, body: bytes, answer: object, headers: dict[str, str] | None = None) -> dict:
        (record,) = self.json(self.post(body, headers), 200, answer)
        return record

    def other(
        self,
        method: str,
        headers: dict[str, str] | None = None,
        query_session: str | None = None,
        peer: str = PEER,
    ) -> str:
        self.n += 1
        flow = f"f{self.n}"
        self.handle(
            OtherRequest(flow, self.tick(), method, SERVER, peer, headers or {}, query_session)
        )
        return flow

    def handle(self, event: Event) -> list[dict]:
        """Feed the tracker; its records, noting the flow each is of (`self.flows`)."""
        emitted = self.t.handle(event)
        self.flows.update((e.record["id"], e.flow) for e in emitted)
        return records_of(emitted)

    def chunk(self, flow: str, data: bytes) -> list[dict]:
        return self.handle(StreamChunk(flow, self.tick(), data))
