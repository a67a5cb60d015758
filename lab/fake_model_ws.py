"""OpenAI Responses over WebSocket for the fake model (RFC 6455, server side, stdlib).

Codex opens a WebSocket to its provider's `/responses` when the provider says
`supports_websockets = true` (header `OpenAI-Beta: responses_websockets=…`). Each client
text message is a `{"type": "response.create", …}` holding the Responses request's fields;
the answer is the same events the HTTP API streams as SSE, each as one text message. The
decision is the fake model's own (`answer`, given by the caller), so the script and the
log are the HTTP path's.

Only what a client sends is read: text messages (fragmented or not, masked as RFC 6455
requires of a client), ping (answered with pong) and close. No extension is accepted
(`permessage-deflate` offered is declined by not naming it), so no frame is compressed.
"""

from __future__ import annotations

import base64
import hashlib
import json
import struct
from collections.abc import Callable
from typing import Any, Final, Protocol

GUID: Final = b"258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
TEXT: Final = 0x1
CONTINUATION: Final = 0x0
CLOSE: Final = 0x8
PING: Final = 0x9
PONG: Final = 0xA
#: A message longer than this is refused (close 1009): the lab's requests are a few KiB.
MAX_MESSAGE: Final = 16 * 1024 * 1024


class Closed(Exception):
    """The client closed the connection (or it broke)."""


def accept_key(key: str) -> str:
    """`Sec-WebSocket-Accept` for a client's `Sec-WebSocket-Key` (RFC 6455 §4.2.2)."""
    return base64.b64encode(hashlib.sha1(key.encode() + GUID).digest()).decode()


def frame(opcode: int, payload: bytes) -> bytes:
    """One final, unmasked frame (a server never masks)."""
    n = len(payload)
    if n < 126:
        head = struct.pack("!BB", 0x80 | opcode, n)
    elif n < 1 << 16:
        head = struct.pack("!BBH", 0x80 | opcode, 126, n)
    else:
        head = struct.pack("!BBQ", 0x80 | opcode, 127, n)
    return head + payload


class Reader(Protocol):
    """What the frames are read from: the request handler's `rfile`, a socket's file."""

    def read(self, n: int, /) -> bytes: ...


class Writer(Protocol):
    """What the frames are written to: the request handler's `wfile`, a socket's file."""

    def write(self, data: bytes, /) -> int: ...

    def flush(self) -> None: ...


def _exactly(rfile: Reader, n: int) -> bytes:
    data = rfile.read(n)
    if data is None or len(data) < n:
        raise Closed
    return data


def read_frame(rfile: Reader) -> tuple[bool, int, bytes]:
    """(fin, opcode, unmasked payload) of the next frame."""
    b0, b1 = _exactly(rfile, 2)
    n = b1 & 0x7F
    if n == 126:
        (n,) = struct.unpack("!H", _exactly(rfile, 2))
    elif n == 127:
        (n,) = struct.unpack("!Q", _exactly(rfile, 8))
    if n > MAX_MESSAGE:
        raise Closed
    mask = _exactly(rfile, 4) if b1 & 0x80 else b"\0\0\0\0"
    data = _exactly(rfile, n)
    payload = bytes(c ^ mask[i % 4] for i, c in enumerate(data)) if b1 & 0x80 else data
    return bool(b0 & 0x80), b0 & 0x0F, payload


def read_message(rfile: Reader, wfile: Writer) -> str:
    """The next text message; control frames between its fragments are handled."""
    parts: list[bytes] = []
    while True:
        fin, opcode, payload = read_frame(rfile)
        if opcode == CLOSE:
            wfile.write(frame(CLOSE, payload[:2]))
            wfile.flush()
            raise Closed
        if opcode == PING:
            wfile.write(frame(PONG, payload))
            wfile.flush()
            continue
        if opcode == PONG:
            continue
        parts.append(payload)
        if sum(map(len, parts)) > MAX_MESSAGE:
            raise Closed
        if fin:
            return b"".join(parts).decode("utf-8", "replace")


def sse_data(chunks: list[bytes]) -> list[str]:
    """The `data:` of each SSE event the HTTP path would stream: the WebSocket messages."""
    out: list[str] = []
    for chunk in chunks:
        lines = chunk.decode().split("\n")
        data = [line[5:].lstrip(" ") for line in lines if line.startswith("data:")]
        if data:
            out.append("\n".join(data))
    return out


def output_items(data: list[str]) -> list[Any]:
    """The items an answer's events produced (`response.output_item.done`)."""
    items: list[Any] = []
    for d in data:
        try:
            event = json.loads(d)
        except ValueError:
            continue
        if isinstance(event, dict) and event.get("type") == "response.output_item.done":
            items.append(event.get("item"))
    return items


def whole(body: dict[str, Any], history: list[Any]) -> dict[str, Any]:
    """The request as the HTTP API would have received it. On a WebSocket a client may
    send only what is new (`previous_response_id`: the input after the last answer; Codex
    0.171.0 was seen doing both), and the fake model decides on the whole conversation:
    an input that does not start where the connection's conversation started gets the
    earlier input and answers put back in front."""
    new = body.get("input")
    if not body.get("previous_response_id") or not isinstance(new, list) or not history:
        return body
    if new and new[0] == history[0]:
        return body  # the whole conversation, sent again
    return {**body, "input": [*history, *new]}


def prewarm(body: dict[str, Any]) -> list[bytes] | None:
    """`generate: false` (Codex's warm-up of a connection): an empty, completed response,
    as the real API gives, and no decision of the script's."""
    if body.get("generate") is not False:
        return None
    response: dict[str, Any] = {
        "id": f"resp_warm{len(json.dumps(body)) % 997}",
        "object": "response",
        "status": "completed",
        "output": [],
        "model": body.get("model"),
        "usage": {"input_tokens": 0, "output_tokens": 0, "total_tokens": 0},
    }
    created = {**response, "status": "in_progress"}
    return [
        f"data: {json.dumps({'type': 'response.created', 'response': created})}\n\n".encode(),
        f"data: {json.dumps({'type': 'response.completed', 'response': response})}\n\n".encode(),
    ]


def serve(
    rfile: Reader,
    wfile: Writer,
    answer: Callable[[dict[str, Any]], list[bytes] | None],
) -> None:
    """Answer `response.create` messages until the client closes: `answer` gives the SSE
    chunks of a request body, or None to send nothing (a hung model)."""
    history: list[Any] = []  # this connection's conversation so far: input, then output
    try:
        while True:
            text = read_message(rfile, wfile)
            try:
                message = json.loads(text)
            except ValueError:
                continue
            if not isinstance(message, dict) or message.get("type") != "response.create":
                continue
            body = whole({k: v for k, v in message.items() if k != "type"}, history)
            chunks = prewarm(body) or answer(body)
            if chunks is None:
                continue
            sent = sse_data(chunks)
            history = [*(body.get("input") or []), *output_items(sent)]
            for data in sent:
                wfile.write(frame(TEXT, data.encode()))
                wfile.flush()
    except (Closed, BrokenPipeError, ConnectionResetError, OSError):
        return
