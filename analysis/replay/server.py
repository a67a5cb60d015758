"""The replay server: the standard library's threading HTTP server in front of a `Player`.

A server of its own, not a mitmproxy addon: mitmproxy calls stream hooks synchronously,
so it cannot pace an SSE stream event by event. One thread per connection sleeps until
each event's recorded offset (scaled by the speed); a recorded drop closes the connection
before any response, a recorded reset resets it (SO_LINGER 0), mid-stream included.
"""

from __future__ import annotations

import contextlib
import select
import socket
import struct
import sys
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Final

from mcp_layers_core.record import StreamEnd

from .player import Player, Reply
from .script import SESSION_HEADER

#: How often a held GET stream looks whether its session ended.
HOLD_POLL_S: Final = 0.05

#: The largest request body read (a client's request, not a server's answer).
MAX_REQUEST_BYTES: Final = 64 * 1024 * 1024


class ReplayServer(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = False  # a port in use is an error, not a silent second server

    def __init__(self, address: tuple[str, int], player: Player) -> None:
        self.player = player
        self.stopping = False
        super().__init__(address, _Handler)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out as separate writes; with Nagle's algorithm on, the body waits
    # for the client's delayed ACK (40 ms a request on Linux), and an SSE event would too.
    disable_nagle_algorithm = True
    server: ReplayServer

    def log_message(self, format: str, *args: object) -> None:
        pass  # one line per request would drown the misses the operator needs to see

    def do_POST(self) -> None:
        started = time.monotonic()
        body = self._body()
        if body is None:
            return
        reply = self.server.player.post(self.headers.get(SESSION_HEADER), body)
        self._send(reply, started)

    def do_GET(self) -> None:
        session = self.headers.get(SESSION_HEADER)
        last = self.headers.get("last-event-id")
        self._send(self.server.player.get(session, last), time.monotonic(), session)

    def do_DELETE(self) -> None:
        self._send(self.server.player.delete(self.headers.get(SESSION_HEADER)), time.monotonic())

    def _body(self) -> bytes | None:
        if self.headers.get("transfer-encoding", "").lower() == "chunked":
            return self._chunked()
        try:
            length = int(self.headers.get("content-length") or 0)
        except ValueError:
            length = -1
        if not 0 <= length <= MAX_REQUEST_BYTES:
            self.send_error(400 if length < 0 else 413)
            return None
        return self.rfile.read(length)

    def _chunked(self) -> bytes | None:
        parts: list[bytes] = []
        total = 0
        while True:
            size = int(self.rfile.readline().split(b";")[0].strip() or b"0", 16)
            if size == 0:
                self.rfile.readline()
                return b"".join(parts)
            total += size
            if total > MAX_REQUEST_BYTES:
                self.send_error(413)
                return None
            parts.append(self.rfile.read(size))
            self.rfile.readline()

    def _send(self, reply: Reply, started: float, session: str | None = None) -> None:
        try:
            self._write(reply, started, session)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client left; nothing to tell it

    def _write(self, reply: Reply, started: float, session: str | None) -> None:
        _sleep_until(started + reply.delay_s)
        if reply.status is None:
            self._reset()
            return
        self.send_response_only(reply.status)
        for name, value in reply.headers:
            self.send_header(name, value)
        if reply.sse is None:
            self.send_header("content-length", str(len(reply.body)))
            self.end_headers()
            self.wfile.write(reply.body)
            self.wfile.flush()
            return
        self.send_header("transfer-encoding", "chunked")
        self.end_headers()
        self.wfile.flush()
        for offset, event in reply.sse:
            _sleep_until(started + offset)
            self.wfile.write(b"%x\r\n%s\r\n" % (len(event), event))
            self.wfile.flush()
        if reply.hold_s is None:
            self._hold(session)
        else:
            _sleep_until(started + reply.hold_s)
        if reply.end is StreamEnd.ERROR:
            self._reset()
            return
        self.wfile.write(b"0\r\n\r\n")
        self.wfile.flush()
        self.close_connection = True  # a replayed stream ends its connection, as a cut would

    def _hold(self, session: str | None) -> None:
        """Keep a GET stream open until the client closes it or its session ends, as the
        recorded server did (how long that took was the client's doing)."""
        player = self.server.player
        while player.alive(session) and not self.server.stopping:
            readable, _, _ = select.select([self.connection], [], [], HOLD_POLL_S)
            if readable and not self.connection.recv(1, socket.MSG_PEEK):
                raise ConnectionResetError  # the client closed it
        return

    def _reset(self) -> None:
        """Close with a TCP reset, the way a crashed server or a middlebox ends it."""
        self.close_connection = True
        with contextlib.suppress(OSError):
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        self.connection.close()


def _sleep_until(deadline: float) -> None:
    left = deadline - time.monotonic()
    if left > 0:
        time.sleep(left)


def serve(server: ReplayServer, announce: str) -> None:
    """Serve until interrupted (SIGINT, or SIGTERM turned into KeyboardInterrupt)."""
    print(announce, file=sys.stderr, flush=True)
    try:
        server.serve_forever(poll_interval=0.1)
    except KeyboardInterrupt:
        pass
    finally:
        server.stopping = True  # held streams end, so that their threads do
        server.server_close()
