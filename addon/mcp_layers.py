"""mcp-layers: record where each MCP call failed (transport, protocol, application).

Put it between an MCP client and server:

    mitmdump -s addon/mcp_layers.py --mode reverse:https://mcp.example.com@8080 \\
        --set connection_strategy=lazy

and point the client at http://127.0.0.1:8080/mcp. Every POST that carries JSON-RPC is
paired with its answer (a JSON body or an SSE stream), classified, and written as one
JSONL record to `recordings/mcp-<UTC start>.jsonl` (see docs/record-format.md).

The addon only observes: it never alters, reorders or delays a byte. SSE answers are
streamed through a tap that returns every chunk unchanged (mitmproxy would otherwise
hold a stream until it ends, which stalls MCP's long-lived streams). This file is the
thin adapter: hooks turn flows into the core's events (`mcp_layers_core`, which never
imports mitmproxy) and hand the records it returns to the writer.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

# mitmproxy puts this file's folder on sys.path only while importing it, so the core
# must be imported here, at the top, not lazily inside a hook.
from mcp_layers_core import limits
from mcp_layers_core.events import (
    WANTED_REQUEST_HEADERS,
    WANTED_RESPONSE_HEADERS,
    Event,
    FlowFailed,
    OtherRequest,
    PostReceived,
    ProxyStopping,
    ResponseBody,
    ResponseStarted,
    StreamChunk,
    StreamEnded,
)
from mcp_layers_core.jsonl import RecordWriter
from mcp_layers_core.tracker import Settings, Tracker
from mitmproxy import exceptions, http
from mitmproxy.addonmanager import Loader

logger = logging.getLogger(__name__)

MAX_SCENARIO_CHARS = 200


class StreamTap:
    """The `flow.response.stream` callable: feeds the core, returns every chunk as it came.

    It runs on the proxy's only event loop for every chunk, outside mitmproxy's own
    exception guard: a raise here drops the chunk, and a raise on the final `b""` hangs
    the client. So it never raises, and it returns the very object it was given.
    """

    __slots__ = ("_addon", "_flow", "seen")

    def __init__(self, addon: McpLayers, flow_id: str) -> None:
        self._addon = addon
        self._flow = flow_id
        self.seen = False  # did any chunk pass? (an addon-made reply never streams)

    def __call__(self, data: bytes) -> bytes:
        if data:  # b"" marks the end of the message; the `response` hook records it
            self.seen = True
            with self._addon.guard("stream tap"):
                self._addon.feed(StreamChunk(self._flow, time.time(), data))
        return data


class _Chained:
    """Our tap first (it only looks), then a stream callable another addon set before us."""

    __slots__ = ("_then", "first")

    def __init__(self, first: StreamTap, then: Callable[[bytes], Any]) -> None:
        self.first, self._then = first, then

    def __call__(self, data: bytes) -> bytes | Iterable[bytes]:
        return self._then(self.first(data))


class McpLayers:
    def __init__(self, outfile: Any = None) -> None:
        self.tracker = Tracker()
        self.started = time.time()
        self.writer = RecordWriter(
            None, started=self.started, outfile=outfile, on_error=logger.warning
        )
        self._outfile = outfile
        self._max_body = limits.MAX_BODY_BYTES
        self._reported: set[str] = set()
        self.errors = 0

    # -- options --------------------------------------------------------------------

    def load(self, loader: Loader) -> None:
        loader.add_option(
            "mcp_record_dir",
            str,
            "recordings",
            "Directory for the JSONL recordings; one file per proxy run, "
            "named by its UTC start time.",
        )
        loader.add_option(
            "mcp_scenario",
            str,
            "",
            "A label copied into every record's `scenario` field (a fault preset, a test name).",
        )
        loader.add_option(
            "mcp_max_body_kb",
            int,
            limits.MAX_BODY_BYTES // 1024,
            "Largest JSON body (KiB) the addon parses; larger answers pass through "
            "and are recorded as UNINSPECTED.",
        )
        loader.add_option(
            "mcp_max_event_kb",
            int,
            limits.MAX_EVENT_BYTES // 1024,
            "Largest SSE event (KiB) the addon buffers; a larger event passes through "
            "unparsed and is noted.",
        )
        loader.add_option(
            "mcp_record_max_mb",
            int,
            0,
            "Rotate the recording to a numbered part once it reaches this many MiB "
            "(0: never); a record is never split.",
        )
        loader.add_option(
            "mcp_record_bodies",
            bool,
            False,
            "Also write each request and its answer, redacted (secret-named members "
            "blanked, token shapes scrubbed, strings cut), for deeper debugging.",
        )
        loader.add_option(
            "mcp_raw_session_ids",
            bool,
            False,
            "Write Mcp-Session-Id values as they are instead of a stable hash "
            "(they can be credentials).",
        )

    def configure(self, updated: set[str]) -> None:
        from mitmproxy import ctx  # the option store exists only once the addon is loaded

        opts = ctx.options
        if "mcp_max_body_kb" in updated:
            self._max_body = _positive_kib(opts.mcp_max_body_kb, "mcp_max_body_kb")
        if "mcp_max_event_kb" in updated:
            _positive_kib(opts.mcp_max_event_kb, "mcp_max_event_kb")
        if "mcp_scenario" in updated and (
            len(opts.mcp_scenario) > MAX_SCENARIO_CHARS or not opts.mcp_scenario.isprintable()
        ):
            raise exceptions.OptionsError(
                f"mcp_scenario must be printable text of at most {MAX_SCENARIO_CHARS} characters, "
                f"e.g. --set mcp_scenario=errors.http_status_sequence"
            )
        if "mcp_record_max_mb" in updated and opts.mcp_record_max_mb < 0:
            raise exceptions.OptionsError(
                f"mcp_record_max_mb must be 0 (no rotation) or a number of MiB, "
                f"not {opts.mcp_record_max_mb}; e.g. --set mcp_record_max_mb=100"
            )
        if updated & {"mcp_record_dir", "mcp_record_max_mb"} and self._outfile is None:
            directory = _writable_dir(opts.mcp_record_dir)
            self.writer.close()
            self.writer = RecordWriter(
                directory,
                started=self.started,
                on_error=logger.warning,
                max_bytes=opts.mcp_record_max_mb * 1024 * 1024 or None,
            )
        self.tracker.settings = Settings(
            scenario=opts.mcp_scenario or None,
            raw_session_ids=opts.mcp_raw_session_ids,
            max_body_bytes=opts.mcp_max_body_kb * 1024,
            max_event_bytes=opts.mcp_max_event_kb * 1024,
            record_bodies=opts.mcp_record_bodies,
        )

    # -- hooks: each turns the flow into one core event -------------------------------

    def request(self, flow: http.HTTPFlow) -> None:
        with self.guard("request"):
            method = flow.request.method
            if method == "POST":
                self.feed(self._post(flow))
            elif method in ("GET", "DELETE"):
                self.feed(_other_request(flow))

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        with self.guard("responseheaders"):
            assert flow.response is not None
            if self.tracker.is_tracked(flow.id):
                self.feed(_response_started(flow))
                if self.tracker.wants_stream(flow.id):
                    self._set_stream(flow, StreamTap(self, flow.id))
                    return
            if _is_event_stream(flow.response) and not flow.response.stream:
                # Not ours to record (yet), but never hold an event stream back.
                flow.response.stream = True

    def response(self, flow: http.HTTPFlow) -> None:
        with self.guard("response"):
            if self.tracker.is_tracked(flow.id):
                self.feed(self._response_end(flow))

    def error(self, flow: http.HTTPFlow) -> None:
        with self.guard("error"):
            if self.tracker.is_tracked(flow.id):
                reason = flow.error.msg if flow.error else "error"
                self.feed(FlowFailed(flow.id, time.time(), reason))

    def done(self) -> None:
        # `done` comes before the `error` hooks of flows still open; the tracker writes
        # those now, and ignores their errors when they arrive.
        with self.guard("done"):
            self.feed(ProxyStopping(time.time()))
            if self.writer.lost:
                logger.warning(f"mcp-layers: {self.writer.lost} records could not be written")
            self.writer.close()

    # -- plumbing -----------------------------------------------------------------------

    def feed(self, event: Event) -> None:
        records = self.tracker.handle(event)
        if records:
            self.writer.write(records)

    @contextlib.contextmanager
    def guard(self, where: str) -> Iterator[None]:
        """Nothing the addon does may reach mitmproxy or the client: log once, count, go on."""
        try:
            yield
        except Exception as e:
            self.errors += 1
            key = f"{where}:{type(e).__name__}"
            if key not in self._reported:
                self._reported.add(key)
                logger.warning(
                    f"mcp-layers: {where} failed ({e!r}); traffic is unaffected", exc_info=True
                )

    def _post(self, flow: http.HTTPFlow) -> PostReceived:
        req = flow.request
        raw = req.raw_content
        body = None
        if raw is not None and len(raw) <= self._max_body:
            body = req.get_content(strict=False)
        return PostReceived(
            flow=flow.id,
            ts=req.timestamp_start,
            server=f"{req.host}:{req.port}",
            peer=_peer(flow),
            headers=_pick(req.headers, WANTED_REQUEST_HEADERS),
            body=body,
            body_size=len(raw) if raw is not None else 0,
            query_session=_query_session(req),
        )

    def _response_end(self, flow: http.HTTPFlow) -> Event:
        resp = flow.response
        assert resp is not None
        ts = resp.timestamp_end or time.time()
        tap = _tap_of(resp.stream)
        if tap is not None and not tap.seen and resp.raw_content:
            # A reply made by an addon (a fault rule, say) is sent whole, never through
            # the tap: hand its body to the stream parser in one piece.
            self.feed(StreamChunk(flow.id, ts, resp.raw_content))
        if resp.stream:
            return StreamEnded(flow.id, ts)
        raw = resp.raw_content
        too_big = raw is not None and len(raw) > self._max_body
        body = None if too_big or raw is None else resp.get_content(strict=False)
        return ResponseBody(flow.id, ts, body, len(raw) if raw is not None else 0)

    @staticmethod
    def _set_stream(flow: http.HTTPFlow, tap: StreamTap) -> None:
        assert flow.response is not None
        previous = flow.response.stream
        flow.response.stream = _Chained(tap, previous) if callable(previous) else tap


def _tap_of(stream: object) -> StreamTap | None:
    if isinstance(stream, StreamTap):
        return stream
    if isinstance(stream, _Chained):
        return stream.first
    return None


def _other_request(flow: http.HTTPFlow) -> OtherRequest:
    req = flow.request
    return OtherRequest(
        flow=flow.id,
        ts=req.timestamp_start,
        method=req.method,
        server=f"{req.host}:{req.port}",
        peer=_peer(flow),
        headers=_pick(req.headers, WANTED_REQUEST_HEADERS),
        query_session=_query_session(req),
    )


def _peer(flow: http.HTTPFlow) -> str:
    peer = flow.client_conn.peername
    return f"{peer[0]}:{peer[1]}" if peer else "unknown"


def _query_session(req: http.Request) -> str | None:
    """2024-11-05 servers name the session in the POST URL the `endpoint` event gave."""
    if "?" not in req.path:
        return None
    query = req.query
    return query.get("session_id") or query.get("sessionId")


def _response_started(flow: http.HTTPFlow) -> ResponseStarted:
    resp = flow.response
    assert resp is not None
    framed = (
        not resp.http_version.startswith("HTTP/1")
        or "content-length" in resp.headers
        or "chunked" in resp.headers.get("transfer-encoding", "").lower()
    )
    return ResponseStarted(
        flow=flow.id,
        ts=resp.timestamp_start or time.time(),
        status=resp.status_code,
        headers=_pick(resp.headers, WANTED_RESPONSE_HEADERS),
        framed=framed,
    )


def _pick(headers: http.Headers, names: tuple[str, ...]) -> dict[str, str]:
    """Only the headers the core reads: secrets never leave the proxy's own objects."""
    return {name: value for name in names if (value := headers.get(name)) is not None}


def _is_event_stream(resp: http.Response) -> bool:
    ctype = resp.headers.get("content-type", "")
    return ctype.split(";", 1)[0].strip().lower() == "text/event-stream"


def _positive_kib(value: int, name: str) -> int:
    if value <= 0:
        raise exceptions.OptionsError(
            f"{name} must be a positive number of KiB, not {value}; e.g. --set {name}=16384"
        )
    return value * 1024


def _writable_dir(value: str) -> Path:
    if not value.strip():
        raise exceptions.OptionsError(
            "mcp_record_dir is empty; name a directory, e.g. --set mcp_record_dir=recordings"
        )
    path = Path(value).expanduser()
    try:
        path.mkdir(mode=0o700, parents=True, exist_ok=True)
    except OSError as e:
        raise exceptions.OptionsError(
            f"mcp_record_dir: cannot create {str(path)!r} ({e.strerror}); "
            f"point it at a writable directory, e.g. --set mcp_record_dir=./recordings"
        ) from e
    if not path.is_dir() or not os.access(path, os.W_OK | os.X_OK):
        raise exceptions.OptionsError(
            f"mcp_record_dir: {str(path)!r} is not a writable directory; "
            f"point it at one, e.g. --set mcp_record_dir=./recordings"
        )
    return path


addons = [McpLayers()]
