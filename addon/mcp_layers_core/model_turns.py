"""The model's half of the agent's turn: open model exchanges, their records, and the join.

`ModelBook` follows each model request the tracker hands it (a POST `model_api` read as
one) from its request to the end of its answer, and writes one `model_turn` record per
request. It remembers, bounded, the tool calls the models asked for and the tool result
ids already carried back, so that:

- a `tools/call` is joined to the model's tool call (`join`): exactly by the id the agent
  carries in `_meta` (Claude Code `claudecode/toolUseId`, Codex `callId`), else inferred:
  the first tool call not yet joined whose name ends with the MCP tool's name and whose
  arguments hash the same (the order the model asked in is the order agents call in);
- a tool result id counts on the first request that carries it only (every request
  resends the whole history).

Sans-IO like the rest of the core: times come with the calls, nothing here raises on what
a peer sends, and every collection has a cap.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass, field
from typing import Any, Final

from .budget import BufferBudget
from .decode import StreamDecoder
from .model_api import ModelCall, ModelReader, ModelRequest, args_hash
from .record import Kind, ModelJoin, NoteCode, new_record
from .records import duration_ms, iso_ms
from .sse import SseEvent

#: Tool calls remembered for the join (the oldest go first).
MAX_KNOWN_CALLS: Final = 4096
#: Tool result ids remembered as already carried back.
MAX_KNOWN_RESULTS: Final = 16384
#: Model exchanges open at once; past it the oldest is written as it stands.
MAX_OPEN: Final = 256

#: `_meta` members that carry the model's tool call id, by agent.
EXACT_KEYS: Final = ("claudecode/toolUseId", "callId")


@dataclass(slots=True)
class _Known:
    """A tool call the model asked for, waiting to be joined."""

    turn: int
    id: str | None
    name: str | None
    args_hash: str | None
    joined: bool = False


@dataclass(slots=True)
class ModelFlow:
    """One model request on its way to a record."""

    flow: str
    record_id: int
    started: float
    server: str
    user_agent: str | None
    request: ModelRequest
    #: The tool result ids this request carried for the first time.
    new_results: list[str]
    reader: ModelReader
    status: int | None = None
    content_type: str | None = None
    decoder: StreamDecoder | None = None
    #: A turn on a WebSocket (Responses over WebSocket): the connection's flow; its
    #: events come as messages, not as a stream's bytes.
    ws: str | None = None
    registered: int = 0  # tool calls of the reader already in the book
    notes: list[str] = field(default_factory=list)


def _name_matches(model_name: str | None, tool: str) -> bool:
    """Does the model's spelling of a tool name this MCP tool? Agents prefix the server's
    name their own way (`mcp__srv__t`, `mcp_srv_t`, `srv_t`, `srv-t`, Codex `ns.t`)."""
    if model_name is None:
        return False
    if model_name == tool:
        return True
    return model_name.endswith(("_" + tool, "-" + tool, "." + tool))


class ModelBook:
    """Open model exchanges and what the join needs to remember, all bounded."""

    def __init__(self, max_event_bytes: int, budget: BufferBudget | None = None) -> None:
        self.open: OrderedDict[str, ModelFlow] = OrderedDict()
        self._calls: OrderedDict[int, _Known] = OrderedDict()
        self._by_id: dict[str, _Known] = {}
        #: argsHash -> the known calls with those arguments, oldest first: an inferred
        #: join looks at these few, not at every call remembered.
        self._by_hash: dict[str | None, list[_Known]] = {}
        self._seq = 0
        self._results: OrderedDict[str, None] = OrderedDict()
        self.max_event_bytes = max_event_bytes
        #: WebSocket connection flow -> the key in `open` of its turn still answering.
        self.ws: dict[str, str] = {}
        #: What every open stream's parser holds counts against the proxy's one budget
        #: (`mcp_max_buffered_mb`), MCP streams and model streams together.
        self.budget = budget

    # -- the model's side

    def start(
        self,
        flow: str,
        record_id: int,
        ts: float,
        server: str,
        user_agent: str | None,
        request: ModelRequest,
    ) -> ModelFlow | None:
        """A model request reached the proxy. Returns a flow pushed out by the cap, which
        the caller writes now (as it stands)."""
        new = [r for r in request.tool_results if r not in self._results]
        for r in new:
            self._results[r] = None
        while len(self._results) > MAX_KNOWN_RESULTS:
            self._results.popitem(last=False)
        m = ModelFlow(
            flow, record_id, ts, server, user_agent, request, new, ModelReader(request.api)
        )
        self.open[flow] = m
        if len(self.open) > MAX_OPEN:
            _, oldest = self.open.popitem(last=False)
            oldest.notes.append(NoteCode.EVICTED_PENDING_CAP.value)
            return oldest
        return None

    def headers(self, m: ModelFlow, status: int, headers: dict[str, str] | Any) -> None:
        m.status = status
        ctype = str(headers.get("content-type") or "").split(";", 1)[0].strip().lower()
        m.content_type = ctype or None
        if ctype == "text/event-stream":
            m.decoder = StreamDecoder(
                headers.get("content-encoding"), self.max_event_bytes, self.budget
            )

    def chunk(self, m: ModelFlow, data: bytes, ts: float) -> None:
        d = m.decoder
        if d is None or not d.readable:
            return
        m.reader.events_of([e for e in d.feed(data) if isinstance(e, SseEvent)], ts)
        self._register(m)

    def body(self, m: ModelFlow, body: bytes | None, size: int, ts: float) -> None:
        if body is None and size:
            m.notes.append(f"{NoteCode.BODY_OVER_CAP.value}:{size}")
        if m.decoder is not None:  # an event stream mitmproxy handed over whole
            self.chunk(m, body or b"", ts)
        elif body is not None and m.status is not None and m.content_type != "text/event-stream":
            m.reader.body(body, ts)
            self._register(m)

    def ws_event(self, m: ModelFlow, data: bytes | None, ts: float) -> None:
        """A server message of a WebSocket turn: one event, as an SSE event's data."""
        if data is None:
            return  # over the cap: its size alone is known
        text = data.decode("utf-8", "replace")
        m.reader.events_of([SseEvent("message", text, None, None, True)], ts)
        self._register(m)

    def finish(self, m: ModelFlow, ts: float, *, failed: str | None = None) -> dict[str, Any]:
        """The exchange ended (`failed`: why it broke); its record."""
        self.open.pop(m.flow, None)
        if m.ws is not None and self.ws.get(m.ws) == m.flow:
            del self.ws[m.ws]
        d = m.decoder
        if d is not None:
            if d.readable:
                m.reader.events_of([e for e in d.end() if isinstance(e, SseEvent)], ts)
            elif d.failure is not None:
                m.notes.append(d.failure.code)
            d.release()
        m.reader.end()
        self._register(m)
        return self._record(m, ts, failed)

    def _register(self, m: ModelFlow) -> None:
        calls = m.reader.tool_calls
        for call in calls[m.registered :]:
            self._seq += 1
            known = _Known(m.record_id, call.id, call.name, call.args_hash)
            self._calls[self._seq] = known
            if call.id is not None:
                self._by_id[call.id] = known
            self._by_hash.setdefault(call.args_hash, []).append(known)
            if len(self._calls) > MAX_KNOWN_CALLS:
                _, old = self._calls.popitem(last=False)
                if old.id is not None and self._by_id.get(old.id) is old:
                    del self._by_id[old.id]
                same = self._by_hash.get(old.args_hash)
                if same:
                    same.remove(old)  # the oldest: first in its list
                    if not same:
                        del self._by_hash[old.args_hash]
        m.registered = len(calls)

    # -- the MCP side

    def join(self, tool: str | None, params: object) -> ModelCall | None:
        """The model tool call a `tools/call` carries out, if the proxy saw it asked for."""
        if not self._calls or tool is None or not isinstance(params, dict):
            return None
        meta = params.get("_meta")
        if isinstance(meta, dict):
            for key in EXACT_KEYS:
                cid = meta.get(key)
                if isinstance(cid, str) and cid:
                    known = self._by_id.get(cid[:128])
                    if known is not None:
                        known.joined = True
                        return ModelCall(known.turn, known.id, ModelJoin.EXACT)
        wanted = args_hash(params.get("arguments") or {})
        latest: _Known | None = None
        for known in self._by_hash.get(wanted, ()):
            if _name_matches(known.name, tool):
                if not known.joined:
                    known.joined = True
                    return ModelCall(known.turn, known.id, ModelJoin.INFERRED)
                latest = known
        if latest is not None:
            # Every matching call is joined already: a repeat of the last (a transport
            # retry of the same call) carries that one out again.
            return ModelCall(latest.turn, latest.id, ModelJoin.INFERRED)
        return None

    # -- the record

    def _record(self, m: ModelFlow, ts: float, failed: str | None) -> dict[str, Any]:
        r, req = m.reader, m.request
        notes = [*req.notes, *r.notes, *m.notes]
        got_answer = m.ws is not None or (m.status is not None and 200 <= m.status < 300)
        streaming = m.decoder is not None or m.ws is not None
        complete = r.terminal and failed is None
        if got_answer and not complete and streaming:
            notes.append(NoteCode.MODEL_STREAM_CUT.value)
        if failed is not None:
            notes.append(f"{NoteCode.MODEL_FLOW_ERROR.value}:{failed[:80]}")
        if req.unnamed_results:
            notes.append(f"{NoteCode.MODEL_RESULTS_WITHOUT_ID.value}:{req.unnamed_results}")
        ttft = None
        if r.first_output is not None and streaming:
            ttft = duration_ms(m.started, r.first_output)
        return new_record(
            id=m.record_id,
            kind=Kind.MODEL_TURN.value,
            ts=iso_ms(m.started),
            durationMs=duration_ms(m.started, ts),
            server=m.server,
            userAgent=m.user_agent,
            httpStatuses=[] if m.status is None else [m.status],
            contentType=m.content_type,
            modelTurn={
                "provider": req.provider.value,
                "api": req.api.value,
                "model": r.model or req.model,
                "streamed": req.streamed,
                "ttftMs": ttft,
                "stopReason": r.stop_reason,
                "complete": complete,
                "error": r.error,
                "toolCalls": [
                    {"id": c.id, "name": c.name, "argsHash": c.args_hash} for c in r.tool_calls
                ],
                "toolResults": list(m.new_results),
                "inputTokens": r.input_tokens,
                "outputTokens": r.output_tokens,
            },
            notes=notes,
        )
