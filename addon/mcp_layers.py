"""mcp-layers: record where each MCP call failed (transport, protocol, application).

Put it between an MCP client and server:

    mitmdump -s addon/mcp_layers.py --mode reverse:https://mcp.example.com@8080 \\
        --set connection_strategy=lazy

and point the client at http://127.0.0.1:8080/mcp. Every POST that carries JSON-RPC is
paired with its answer (a JSON body or an SSE stream), classified, and written as one
JSONL record to `recordings/mcp-<UTC start>.jsonl` (see docs/record-format.md).

Two addons are loaded, in this order: the fault injector (`mcp_layers_faults.py`, idle
unless `--set mcp_faults` or `mcp_fault` is given; docs/faults.md) and the recorder.
The recorder only observes: it never alters, reorders or delays a byte. SSE answers are
streamed through a tap that returns every chunk unchanged (mitmproxy would otherwise
hold a stream until it ends, which stalls MCP's long-lived streams); a stream callable
set before it (a fault's cutter) runs first, so the tap sees what the client gets. Of a
fault the recorder reads only `flow.metadata[INJECTED_KEY]`, the record's `injected`.
This file is the thin adapter: hooks turn flows into the core's events
(`mcp_layers_core`, which never imports mitmproxy) and hand the records it returns to
the writer. Each record's verdict is also put on its flow as `flow.comment` and
`flow.marked` (`mcp_flow_comments`, on by default; docs/mitmproxy.md): mitmproxy's own
metadata, shown by mitmweb and kept in saved flows; the traffic is not touched.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
from collections import OrderedDict
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

# mitmproxy puts this file's folder on sys.path only while importing it, so the core
# must be imported here, at the top, not lazily inside a hook.
from mcp_layers_core import faults, limits, options
from mcp_layers_core.decode import decoded_body
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
    Tick,
)
from mcp_layers_core.flow_comment import comment_of, mark_of
from mcp_layers_core.jsonl import RecordWriter, run_file_name
from mcp_layers_core.otel_config import parse_headers
from mcp_layers_core.otel_map import run_of
from mcp_layers_core.tracker import Settings, Tracker
from mcp_layers_faults import INJECTED_KEY, FaultInjector, RequestFacts
from mcp_layers_otel import LiveExporter
from mcp_layers_startup import check_updated, configure_or_refuse, refuse_bad_startup_options
from mitmproxy import exceptions, hooks, http
from mitmproxy.addonmanager import Loader
from mitmproxy.proxy import server_hooks

logger = logging.getLogger(__name__)

#: flow.metadata key set while a request the fault injector asked about (and so the
#: recorder already read) waits for the recorder's own `request` hook.
OBSERVED_KEY = "mcp_layers.observed"

#: Seconds between the recorder's clock ticks (idle sessions, expiries, retention).
TICK_S = 5.0

#: flow.metadata key: the ids of the records commented on this flow (a saved flow keeps
#: it, so a flow can be matched with its records).
RECORDS_KEY = "mcp_layers.records"

#: The comment of a POST whose record comes after its own end (replaced when it does).
PENDING_COMMENT = (
    "verdict pending: answered on a GET stream, or a probe held until the client's next POST"
)

#: Flows kept so a record written after its flow's own hooks can still comment it.
MAX_LIVE_FLOWS = limits.MAX_PENDING_EXCHANGES + limits.MAX_PARKED


class StreamTap:
    """The `flow.response.stream` callable: feeds the core, returns every chunk as it came.

    It runs on the proxy's only event loop for every chunk, outside mitmproxy's own
    exception guard: a raise here drops the chunk, and a raise on the final `b""` hangs
    the client. So it never raises, and it returns the very object it was given.
    """

    __slots__ = ("_addon", "_feeding", "_flow", "_guard", "seen")

    def __init__(self, addon: Recorder, flow_id: str) -> None:
        self._addon = addon
        self._flow = flow_id
        self._guard = addon.guard("stream tap")
        self._feeding = True  # False once the core has nothing more to learn here
        self.seen = False  # did any chunk pass? (an addon-made reply never streams)

    def __call__(self, data: bytes) -> bytes:
        if data and self._feeding:  # b"" ends the message; the `response` hook records it
            self.seen = True
            with self._guard:
                self._addon.feed(StreamChunk(self._flow, time.time(), data))
                # A stream found not to be MCP (or unreadable) costs nothing from here on.
                self._feeding = self._addon.tracker.wants_chunks(self._flow)
        return data


class _Chained:
    """A stream callable another addon set before us (a fault's cutter, say) first, then
    our tap on what it passes on: the tap sees what the client gets, and only looks."""

    __slots__ = ("_before", "tap")

    def __init__(self, before: Callable[[bytes], Any], tap: StreamTap) -> None:
        self._before, self.tap = before, tap

    def __call__(self, data: bytes) -> bytes | Iterable[bytes]:
        out = self._before(data)
        if isinstance(out, bytes):
            return self.tap(out)
        if isinstance(out, bytearray | memoryview):
            return self.tap(bytes(out))
        pieces = list(out)  # mitmproxy sends each piece; the tap looks at each
        for piece in pieces:
            self.tap(piece)
        return pieces


class _Guard:
    """`with addon.guard("hook"):` swallows and reports any exception. A class, not a
    generator-based context manager: it runs several times per exchange, and this is
    a few times cheaper."""

    __slots__ = ("_addon", "_where")

    def __init__(self, addon: Recorder, where: str) -> None:
        self._addon, self._where = addon, where

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: object, e: BaseException | None, tb: object) -> bool:
        if isinstance(e, Exception):
            self._addon.report(self._where, e)
            return True
        return False


class Recorder:
    """Pairs each MCP request with its answer and writes one record per exchange. It
    only observes: it never alters, reorders or delays a byte."""

    def __init__(self, outfile: Any = None, refuse_at_startup: bool = False) -> None:
        self.tracker = Tracker()
        self.started = time.time()
        self.writer = RecordWriter(
            None, started=self.started, outfile=outfile, on_error=logger.warning
        )
        self._outfile = outfile
        self._max_body = limits.MAX_BODY_BYTES
        #: The OTLP export, when `mcp_otlp_endpoint` is set (docs/otel.md).
        self.exporter: LiveExporter | None = None
        self._reported: set[str] = set()
        self.errors = 0
        #: MCP flows by id, from their request to their end; then, if their record is
        #: still to come, in `_awaiting` until it is (both bounded).
        self._live: OrderedDict[str, http.HTTPFlow] = OrderedDict()
        self._awaiting: OrderedDict[str, http.HTTPFlow] = OrderedDict()
        self._stopping = False
        self.comments = True
        self.tracker.record_flows = {}
        # The script's instance stops the proxy on a bad option at start-up (see
        # mcp_layers_startup); an instance a test builds raises OptionsError.
        self._refuse_at_startup = refuse_at_startup
        self._ticker: asyncio.Task[None] | None = None

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
            "mcp_retain_mb",
            int,
            0,
            "Keep at most this many MiB of this addon's recording files in mcp_record_dir, "
            "deleting the oldest (0: off). Parts rotate at a tenth of it unless "
            "mcp_record_max_mb says otherwise.",
        )
        loader.add_option(
            "mcp_retain_days",
            int,
            0,
            "Delete this addon's recording files older than this many days (0: off).",
        )
        loader.add_option(
            "mcp_max_buffered_mb",
            int,
            limits.MAX_BUFFERED_BYTES // 1024 // 1024,
            "All SSE streams together buffer at most this many MiB of unfinished events; "
            "past it the event that grows is dropped unparsed and noted.",
        )
        loader.add_option(
            "mcp_max_sessions",
            int,
            limits.MAX_SESSIONS,
            "Sessions remembered; past it the least recently seen is forgotten, and its "
            "session_end (evicted) written.",
        )
        loader.add_option(
            "mcp_session_idle_s",
            int,
            int(limits.SESSION_IDLE_S),
            "A session with no traffic for this many seconds ends (session_end idle); 0: never.",
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
        loader.add_option(
            "mcp_flow_comments",
            bool,
            True,
            "Put each record's verdict on its flow as mitmproxy's flow comment and marker "
            "(shown by mitmweb, kept in saved flows); the traffic is never touched.",
        )
        loader.add_option(
            "mcp_otlp_endpoint",
            str,
            "",
            "Also send every exchange as an OpenTelemetry span (and the MCP metrics) to "
            "this OTLP/HTTP collector, e.g. http://127.0.0.1:4318, in the background "
            "(needs `pip install 'mcp-layers[otel]'`; docs/otel.md). Empty: off.",
        )
        loader.add_option(
            "mcp_otlp_headers",
            str,
            "",
            "Headers for the OTLP collector, `name=value,name2=value2` (values "
            "URL-encoded), e.g. authorization=Bearer%20TOKEN. Never logged.",
        )
        # The recorder loads last: every addon's options exist now, and mitmproxy still
        # holds the `--set` values it has not applied.
        if self._refuse_at_startup:
            refuse_bad_startup_options(loader.master.options)

    def configure(self, updated: set[str]) -> None:
        configure_or_refuse(lambda: self._configure(updated), self._refuse_at_startup)

    def _configure(self, updated: set[str]) -> None:
        from mitmproxy import ctx  # the option store exists only once the addon is loaded

        opts = ctx.options
        check_updated(opts, updated, options.RECORDER_OPTIONS)
        if "mcp_flow_comments" in updated:
            self.comments = opts.mcp_flow_comments
            self.tracker.record_flows = {} if self.comments else None
            if not self.comments:
                self._live.clear()
                self._awaiting.clear()
        if "mcp_max_body_kb" in updated:
            self._max_body = opts.mcp_max_body_kb * 1024
        writer_options = {"mcp_record_dir", "mcp_record_max_mb", "mcp_retain_mb", "mcp_retain_days"}
        if updated & writer_options and self._outfile is None:
            directory = _writable_dir(opts.mcp_record_dir)
            self.writer.close()
            self.writer = RecordWriter(
                directory,
                started=self.started,
                on_error=logger.warning,
                max_bytes=opts.mcp_record_max_mb * 1024 * 1024 or None,
                retain_bytes=opts.mcp_retain_mb * 1024 * 1024 or None,
                retain_days=opts.mcp_retain_days or None,
            )
        if updated & {"mcp_otlp_endpoint", "mcp_otlp_headers"}:
            self._configure_export(opts.mcp_otlp_endpoint, opts.mcp_otlp_headers)
        # A fault preset names the scenario unless one is given (the fault addon's option).
        fault_preset = getattr(opts, "mcp_faults", "")
        default_scenario = fault_preset if fault_preset in faults.PRESETS else None
        self.tracker.settings = Settings(
            scenario=opts.mcp_scenario or default_scenario,
            raw_session_ids=opts.mcp_raw_session_ids,
            max_body_bytes=opts.mcp_max_body_kb * 1024,
            max_event_bytes=opts.mcp_max_event_kb * 1024,
            max_buffered_bytes=opts.mcp_max_buffered_mb * 1024 * 1024,
            max_sessions=opts.mcp_max_sessions,
            session_idle_s=float(opts.mcp_session_idle_s),
            record_bodies=opts.mcp_record_bodies,
        )

    def _configure_export(self, endpoint: str, headers: str) -> None:
        if self.exporter is not None:
            self.exporter.close()
            self.exporter = None
        if not endpoint.strip():
            return
        exporter = LiveExporter(
            endpoint,
            parse_headers(headers),
            run_of(run_file_name(self.started)),
            warn=logger.warning,
        )
        try:
            exporter.start()  # the only place the OpenTelemetry SDK is imported
        except ImportError as e:
            raise exceptions.OptionsError(
                f"mcp_otlp_endpoint needs the OpenTelemetry SDK ({e.name} is missing); "
                "install it with pip install 'mcp-layers[otel]'"
            ) from None
        self.exporter = exporter
        logger.info(f"mcp-layers: exporting OTLP to {exporter.endpoint}")

    # -- hooks: each turns the flow into one core event -------------------------------

    def request(self, flow: http.HTTPFlow) -> None:
        with self.guard("request"):
            if not flow.metadata.pop(OBSERVED_KEY, False):
                self._observe(flow)
            injected = flow.metadata.get(INJECTED_KEY)
            if injected is not None:
                self.tracker.mark_injected(flow.id, injected)

    def request_facts(self, flow: http.HTTPFlow) -> RequestFacts | None:
        """What the records will say of this request: (body, session, client, protocol
        version), or None if it is not recorded. The fault injector asks before it acts,
        so the request is read here first, as the client sent it."""
        with self.guard("request"):
            if not flow.metadata.get(OBSERVED_KEY):
                flow.metadata[OBSERVED_KEY] = True
                self._observe(flow)
            described = self.tracker.describe(flow.id)
            if described is None:
                return None
            req = flow.request
            body = _content(req, _pick(req.headers, _REQUEST_NAMES), self._max_body)
            return (body, *described)
        return None

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        with self.guard("responseheaders"):
            assert flow.response is not None
            if flow.error is not None:
                return  # killed by an addon before us: the answer never arrives
            picked = _pick(flow.response.headers, _RESPONSE_NAMES)
            if self.tracker.is_tracked(flow.id):
                self.feed(_response_started(flow, picked))
                if self.tracker.wants_stream(flow.id):
                    self._set_stream(flow, StreamTap(self, flow.id))
                    return
            if _is_event_stream(picked) and not flow.response.stream:
                # Not ours to record (yet), but never hold an event stream back.
                flow.response.stream = True

    def response(self, flow: http.HTTPFlow) -> None:
        with self.guard("response"):
            if self.tracker.is_tracked(flow.id):
                # The fault injector takes its mark back if it did not touch the answer.
                self.tracker.mark_injected(flow.id, flow.metadata.get(INJECTED_KEY))
                self.feed(self._response_end(flow))
            self._flow_ended(flow)

    def error(self, flow: http.HTTPFlow) -> None:
        with self.guard("error"):
            if self.tracker.is_tracked(flow.id):
                reason = flow.error.msg if flow.error else "error"
                self.feed(FlowFailed(flow.id, time.time(), reason))
            self._flow_ended(flow)

    def running(self) -> None:
        with self.guard("running"):
            from mitmproxy import ctx

            if self._ticker is None:
                # No loop: an instance a test drives by hand.
                with contextlib.suppress(RuntimeError):
                    self._ticker = asyncio.get_running_loop().create_task(self._tick())

            if getattr(ctx.options, "connection_strategy", "lazy") == "eager":
                logger.warning(
                    "mcp-layers: connection_strategy=eager: if the upstream cannot be reached, "
                    "mitmproxy shows no request to addons and those calls cannot be recorded; "
                    "add --set connection_strategy=lazy to record them as NO_RESPONSE"
                )

    def server_connect_error(self, data: server_hooks.ServerConnectionHookData) -> None:
        # In eager mode this is all an addon ever sees of an unreachable upstream.
        with self.guard("server_connect_error"):
            from mitmproxy import ctx

            lazy = getattr(ctx.options, "connection_strategy", "eager") == "lazy"
            if not lazy and "eager" not in self._reported:
                self._reported.add("eager")
                address = data.server.address
                logger.warning(
                    f"mcp-layers: cannot reach the upstream {address}; requests on connections "
                    "that fail this way before any request is read are not recorded "
                    "(use --set connection_strategy=lazy)"
                )

    async def _tick(self) -> None:
        """Time passes without traffic: idle sessions end, parked requests expire and old
        recordings go when they should, not only when the next request comes. Runs
        between hooks on the proxy's loop, so it never interleaves with one; its work
        per tick is bounded (`limits.MAX_IDLE_ENDS_PER_EVENT`)."""
        while True:
            idle_s = self.tracker.settings.session_idle_s
            # A short idle time (a test's) is checked at a quarter of itself.
            await asyncio.sleep(min(TICK_S, max(0.25, idle_s / 4)) if idle_s else TICK_S)
            with self.guard("tick"):
                self.feed(Tick(time.time()))
                self.writer.maintain()

    def done(self) -> None:
        # `done` comes before the `error` hooks of flows still open; the tracker writes
        # those now, and ignores their errors when they arrive.
        with self.guard("done"):
            if self._ticker is not None:
                self._ticker.cancel()
                self._ticker = None
            # Flows still open are commented now, before the save addon writes them.
            self._stopping = True
            self.feed(ProxyStopping(time.time()))
            self._live.clear()
            self._awaiting.clear()
            if self.writer.lost:
                logger.warning(f"mcp-layers: {self.writer.lost} records could not be written")
            self.writer.close()
            if self.exporter is not None:
                self.exporter.close()

    # -- plumbing -----------------------------------------------------------------------

    def feed(self, event: Event) -> None:
        records = self.tracker.handle(event)
        if records:
            self.writer.write(records)
            if self.exporter is not None:
                self.exporter.submit(records)
            if self.comments:
                with self.guard("flow comment"):
                    self._comment(records, getattr(event, "flow", None))

    def _comment(self, records: list[dict[str, Any]], current: str | None) -> None:
        """Put each record's verdict on its flow. A record may be of another flow than
        the event's (a parked answer, an eviction, a held probe): mitmproxy is then told
        that flow changed, so mitmweb shows it."""
        flows = self.tracker.record_flows
        if flows is None:
            return
        changed: list[http.HTTPFlow] = []
        for record in records:
            flow_id = flows.pop(record["id"], None)
            if flow_id is None:
                continue  # the proxy's own end of a session: no flow
            flow = self._live.get(flow_id) or self._awaiting.pop(flow_id, None)
            if flow is None:
                continue  # long gone (past the bound)
            ids = flow.metadata.get(RECORDS_KEY)
            comment = comment_of(record)
            if ids:  # a batch, or a request and the session its 404 ended
                flow.comment = f"{flow.comment} | {comment}"
                ids.append(record["id"])
            else:
                flow.comment = comment
                flow.metadata[RECORDS_KEY] = [record["id"]]
            mark = mark_of(record)
            if mark and not flow.marked:
                flow.marked = mark
            if flow_id != current and not self._stopping:
                changed.append(flow)
        if changed:
            from mitmproxy import ctx

            ctx.master.addons.trigger(hooks.UpdateHook(changed))

    def _flow_ended(self, flow: http.HTTPFlow) -> None:
        """Its own hooks are over: forget the flow, unless its record is still to come
        (a POST answered elsewhere later, or a probe held until the client's next POST)."""
        if not self._live:
            return
        ended = self._live.pop(flow.id, None)
        if ended is not None and flow.request.method == "POST" and RECORDS_KEY not in flow.metadata:
            # A saved flow (`-w`) is written right after this hook: say why it has no verdict.
            flow.comment = PENDING_COMMENT
            self._awaiting[flow.id] = ended
            if len(self._awaiting) > MAX_LIVE_FLOWS:
                self._awaiting.popitem(last=False)

    def guard(self, where: str) -> _Guard:
        """Nothing the addon does may reach mitmproxy or the client: log once, count, go on."""
        return _Guard(self, where)

    def report(self, where: str, e: Exception) -> None:
        self.errors += 1
        key = f"{where}:{type(e).__name__}"
        if key not in self._reported:
            self._reported.add(key)
            logger.warning(f"mcp-layers: {where} failed ({e!r}); traffic is unaffected", exc_info=e)

    def _observe(self, flow: http.HTTPFlow) -> None:
        """Feed the request to the core (once per flow: see OBSERVED_KEY)."""
        method = flow.request.method
        if method == "POST":
            self.feed(self._post(flow))
        elif method in ("GET", "DELETE"):
            self.feed(_other_request(flow))
        else:
            return
        if self.comments and self.tracker.is_tracked(flow.id):
            live = self._live
            live[flow.id] = flow
            if len(live) > MAX_LIVE_FLOWS:
                live.popitem(last=False)

    def _post(self, flow: http.HTTPFlow) -> PostReceived:
        req = flow.request
        raw = req.raw_content
        headers = _pick(req.headers, _REQUEST_NAMES)
        body = None
        if raw is not None and len(raw) <= self._max_body:
            body = _content(req, headers, self._max_body)
        return PostReceived(
            flow=flow.id,
            ts=req.timestamp_start,
            server=f"{req.host}:{req.port}",
            peer=_peer(flow),
            headers=headers,
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
        if tap is not None:
            return StreamEnded(flow.id, ts)
        raw = resp.raw_content
        if resp.stream or raw is None:
            # Streamed by mitmproxy itself (`stream_large_bodies`) or by another addon, not
            # through our tap: the body passed unseen, so the verdict is unknown.
            return ResponseBody(flow.id, ts, None, 0)
        body = None
        if len(raw) <= self._max_body:
            body = _content(resp, _pick(resp.headers, _RESPONSE_NAMES), self._max_body)
        return ResponseBody(flow.id, ts, body, len(raw))

    @staticmethod
    def _set_stream(flow: http.HTTPFlow, tap: StreamTap) -> None:
        assert flow.response is not None
        previous = flow.response.stream
        flow.response.stream = _Chained(previous, tap) if callable(previous) else tap


def _tap_of(stream: object) -> StreamTap | None:
    if isinstance(stream, _Chained):
        stream = stream.tap
    return stream if isinstance(stream, StreamTap) else None


def _other_request(flow: http.HTTPFlow) -> OtherRequest:
    req = flow.request
    return OtherRequest(
        flow=flow.id,
        ts=req.timestamp_start,
        method=req.method,
        server=f"{req.host}:{req.port}",
        peer=_peer(flow),
        headers=_pick(req.headers, _REQUEST_NAMES),
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


def _response_started(flow: http.HTTPFlow, picked: dict[str, str]) -> ResponseStarted:
    resp = flow.response
    assert resp is not None
    framed = (
        not resp.http_version.startswith("HTTP/1")
        or "content-length" in picked
        or "chunked" in picked.get("transfer-encoding", "").lower()
    )
    return ResponseStarted(
        flow=flow.id,
        ts=resp.timestamp_start or time.time(),
        status=resp.status_code,
        headers=picked,
        framed=framed,
    )


#: Raw (lower-case bytes) header names the adapter reads -> the names the core knows.
#: Secrets (Authorization, cookies, proxy headers) are never picked, so they never
#: reach the core, let alone a record.
_REQUEST_NAMES = {n.encode(): n for n in (*WANTED_REQUEST_HEADERS, "content-encoding")}
_RESPONSE_NAMES = {
    n.encode(): n for n in (*WANTED_RESPONSE_HEADERS, "content-length", "transfer-encoding")
}


def _pick(headers: http.Headers, names: dict[bytes, str]) -> dict[str, str]:
    """The wanted headers in one pass over the raw fields (each `Headers.get` is a
    case-insensitive scan of them all: a third of the addon's time before this)."""
    picked: dict[str, str] = {}
    for key, value in headers.fields:
        name = names.get(key.lower())
        if name is not None and name not in picked:
            picked[name] = value.decode("utf-8", "replace")
    return picked


def _content(message: http.Message, picked: dict[str, str], cap: int) -> bytes | None:
    """The body as the core reads it (decoded there, never past `cap` bytes)."""
    return decoded_body(message.raw_content, picked.get("content-encoding"), cap)


def _is_event_stream(picked: dict[str, str]) -> bool:
    ctype = picked.get("content-type", "")
    return ctype.split(";", 1)[0].strip().lower() == "text/event-stream"


def _writable_dir(value: str) -> Path:
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


recorder = Recorder(refuse_at_startup=True)
# The fault injector first: its stream cutter is then in place before the recorder's tap
# chains after it (the tap sees what the client gets), and a flow it kills is seen killed.
addons = [FaultInjector(recorder.request_facts, refuse_at_startup=True), recorder]
