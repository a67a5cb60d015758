"""The fake model's Responses over WebSocket (what Codex uses with `supports_websockets`),
spoken to over a real socket by a minimal RFC 6455 client: masked frames, fragments, a
ping, the close handshake, and the conversation put back together when the client sends
only what is new (`previous_response_id`)."""

from __future__ import annotations

import base64
import json
import os
import socket
import struct
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from mcp_layers_lab import fake_model_ws
from mcp_layers_lab.fake_model import DONE_PREFIX, FakeModel

ECHO = [{"type": "namespace", "name": "mcp__echo", "tools": [{"type": "function", "name": "echo"}]}]
USER = {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "echo"}]}


class Client:
    """A WebSocket client on a socket: just what the tests need."""

    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=10)
        self.key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(
            (
                "GET /v1/responses HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                f"Connection: Upgrade\r\nSec-WebSocket-Key: {self.key}\r\n"
                "Sec-WebSocket-Version: 13\r\n"
                "Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n"
            ).encode()
        )
        self.file = self.sock.makefile("rb")
        self.head = b""
        while not self.head.endswith(b"\r\n\r\n"):
            self.head += self.file.read(1)

    def send(self, opcode: int, payload: bytes, *, fin: bool = True) -> None:
        mask = os.urandom(4)
        n = len(payload)
        first = (0x80 if fin else 0) | opcode
        if n < 126:
            head = struct.pack("!BB", first, 0x80 | n)
        elif n < 1 << 16:
            head = struct.pack("!BBH", first, 0x80 | 126, n)
        else:
            head = struct.pack("!BBQ", first, 0x80 | 127, n)
        masked = bytes(c ^ mask[i % 4] for i, c in enumerate(payload))
        self.sock.sendall(head + mask + masked)

    def create(self, body: dict[str, Any]) -> None:
        self.send(fake_model_ws.TEXT, json.dumps({"type": "response.create", **body}).encode())

    def frame(self) -> tuple[int, bytes]:
        _, opcode, payload = fake_model_ws.read_frame(self.file)  # type: ignore[arg-type]
        return opcode, payload

    def events(self) -> list[dict[str, Any]]:
        """The messages of one answer, up to `response.completed`."""
        out: list[dict[str, Any]] = []
        while not out or out[-1]["type"] != "response.completed":
            opcode, payload = self.frame()
            assert opcode == fake_model_ws.TEXT
            out.append(json.loads(payload))
        return out

    def close(self) -> None:
        self.sock.close()


@pytest.fixture
def fake(tmp_path: Path) -> Iterator[FakeModel]:
    with FakeModel("again_after_error", tmp_path / "model.log") as model:
        yield model


def _done(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [e["item"] for e in events if e["type"] == "response.output_item.done"]


def test_the_handshake_declines_compression_and_answers_the_key(fake: FakeModel) -> None:
    c = Client(fake.port)
    head = c.head.decode().lower()
    assert head.startswith("http/1.1 101")
    assert f"sec-websocket-accept: {fake_model_ws.accept_key(c.key)}".lower() in head
    assert "permessage-deflate" not in head  # no extension: frames stay uncompressed
    c.close()


def test_a_turn_per_response_create_and_the_conversation_kept(fake: FakeModel) -> None:
    """A tool call, an error result sent incrementally (only the new input, with
    `previous_response_id`): the script calls again, as it would over HTTP."""
    c = Client(fake.port)
    c.send(fake_model_ws.PING, b"hi")
    assert c.frame() == (fake_model_ws.PONG, b"hi")
    c.create({"model": "m", "tools": ECHO, "input": [USER]})
    [call] = _done(c.events())
    assert (call["type"], call["namespace"], call["name"]) == ("function_call", "mcp__echo", "echo")
    error = {"type": "function_call_output", "call_id": call["call_id"], "output": "Error: boom"}
    # Fragmented: the text message in two frames, a ping between them.
    message = json.dumps(
        {
            "type": "response.create",
            "model": "m",
            "tools": ECHO,
            "previous_response_id": "r1",
            "input": [error],
        }
    ).encode()
    c.send(fake_model_ws.TEXT, message[:20], fin=False)
    c.send(fake_model_ws.PING, b"")
    c.send(fake_model_ws.CONTINUATION, message[20:])
    assert c.frame() == (fake_model_ws.PONG, b"")
    [again] = _done(c.events())
    assert again["type"] == "function_call"  # the error came back: the script calls again
    ok = {"type": "function_call_output", "call_id": again["call_id"], "output": "echo: hello"}
    c.create({"model": "m", "tools": ECHO, "previous_response_id": "r2", "input": [ok]})
    [text] = _done(c.events())
    assert text["content"][0]["text"] == f"{DONE_PREFIX}error,ok"
    c.send(fake_model_ws.CLOSE, struct.pack("!H", 1000))
    assert c.frame()[0] == fake_model_ws.CLOSE
    c.close()
    log = fake.log.entries
    assert [e["api"] for e in log] == ["responses-ws"] * 3
    assert [e["calls"] for e in log] == [0, 1, 2]


def test_the_whole_conversation_sent_again_is_not_doubled() -> None:
    history = [USER, {"type": "function_call", "call_id": "c1"}]
    full = {"previous_response_id": "r", "input": [*history, {"type": "function_call_output"}]}
    assert fake_model_ws.whole(full, history) == full
    new = {"previous_response_id": "r", "input": [{"type": "function_call_output"}]}
    assert fake_model_ws.whole(new, history)["input"] == [*history, *new["input"]]
    assert fake_model_ws.whole({"input": [USER]}, history) == {"input": [USER]}


def test_a_warm_up_gets_an_empty_response_and_no_decision(fake: FakeModel) -> None:
    c = Client(fake.port)
    c.create({"model": "m", "tools": ECHO, "input": [USER], "generate": False})
    events = c.events()
    assert [e["type"] for e in events] == ["response.created", "response.completed"]
    assert events[-1]["response"]["output"] == []
    c.close()
    assert fake.log.entries == []
