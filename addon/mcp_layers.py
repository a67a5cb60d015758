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

This file is the thin adapter. Its hooks note what the core needs of a flow
(`mcp_layers_flows`, which also holds the stream tap) and queue it as steps
(`mcp_layers_batch`), which run after the answers have gone out, in batches (README,
"When records are written"). Each step becomes one of the core's events
(`mcp_layers_core`, which never imports mitmproxy), and the records the core finishes
go to the recorder's subscribers through one interface (`mcp_layers_subscribers`): the
recording file (one write per batch), the flow comments (`mcp_flow_comments`, on by
default; docs/mitmproxy.md) and the OTLP export (`mcp_otlp_endpoint`;
`mcp_layers_otel`). The options are declared in one table (`mcp_layers_core.options`).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
import weakref
from typing import Any

# mitmproxy puts this file's folder on sys.path only while importing it, so the core and
# the sibling modules must be imported here, at the top, not lazily inside a hook.
from mcp_layers_batch import BATCH_DELAY_S as BATCH_DELAY_S  # the tests' and benchmarks'
from mcp_layers_batch import StepQueue
from mcp_layers_core import faults, limits, options
from mcp_layers_core.events import (
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
    WsEnded,
    WsMessage,
)
from mcp_layers_core.jsonl import RecordWriter, run_file_name
from mcp_layers_core.model_api import api_of_path
from mcp_layers_core.otel_config import parse_headers
from mcp_layers_core.otel_map import run_of
from mcp_layers_core.tracker import Settings, Tracker
from mcp_layers_faults import INJECTED_KEY, FaultInjector, RequestFacts
from mcp_layers_flows import (
    OBSERVED_METHODS,
    REQUEST_NAMES,
    RESPONSE_NAMES,
    Fields,
    Seen,
    StreamTap,
    content,
    is_event_stream,
    pick,
    query_session,
    request_seen,
    set_tap,
    tap_of,
)
from mcp_layers_otel import LiveExporter
from mcp_layers_startup import (
    add_options,
    check_updated,
    configure_or_refuse,
    refuse_bad_startup_options,
    shown_endpoint,
    startup_line,
    writable_dir,
)
from mcp_layers_subscribers import FlowComments, RecordFile, Subscriber
from mitmproxy import ctx, exceptions, http
from mitmproxy.addonmanager import Loader
from mitmproxy.proxy import server_hooks

logger = logging.getLogger(__name__)

#: flow.metadata key set while a request the fault injector asked about (and so the
#: recorder already read) waits for the recorder's own `request` hook.
OBSERVED_KEY = "mcp_layers.observed"

#: Seconds between the recorder's clock ticks (idle sessions, expiries, retention).
TICK_S = 5.0

#: The options that make a new recording file.
_WRITER_OPTIONS = {"mcp_record_dir", "mcp_record_max_mb", "mcp_retain_mb", "mcp_retain_days"}


class Recorder:
    """Pairs each MCP request with its answer and hands one record per exchange to its
    subscribers. It only observes: it never alters, reorders or delays a byte, and
    nothing it does may reach mitmproxy or the client: every hook logs a failure once,
    counts it and goes on (`report`)."""

    def __init__(self, outfile: Any = None, refuse_at_startup: bool = False) -> None:
        self.tracker = Tracker()
        self.started = time.time()
        self._outfile = outfile
        self._max_body = limits.MAX_BODY_BYTES
        self._reported: set[str] = set()
        self.errors = 0
        #: The core's steps, queued by the hooks and run in batches on the proxy's loop
        #: (none yet: each step runs at once before `running`, after `done`, or while
        #: flows are saved; see `_choose_timing`).
        self.queue = StepQueue(self.report, self._publish)
        self._later = self.queue.later
        #: The subscribers of finished records, and whether any took one since the last
        #: batch ended.
        self.recording = RecordFile(
            RecordWriter(None, started=self.started, outfile=outfile, on_error=logger.warning)
        )
        self.comments: FlowComments | None = FlowComments()
        self.exporter: LiveExporter | None = None  # `mcp_otlp_endpoint` (docs/otel.md)
        self._subscribers: list[tuple[str, Subscriber]] = []
        self._subscribe()
        self._taken = False
        self._running = False
        # The script's instance stops the proxy on a bad option at start-up (see
        # mcp_layers_startup); an instance a test builds raises OptionsError.
        self._refuse_at_startup = refuse_at_startup
        self._ticker: asyncio.Task[None] | None = None

    # -- options --------------------------------------------------------------------

    def load(self, loader: Loader) -> None:
        add_options(loader, "recorder")
        # The recorder loads last: every addon's options exist now, and mitmproxy still
        # holds the `--set` values it has not applied.
        if self._refuse_at_startup:
            refuse_bad_startup_options(loader.master.options)

    def configure(self, updated: set[str]) -> None:
        configure_or_refuse(lambda: self._configure(updated), self._refuse_at_startup)

    def _configure(self, updated: set[str]) -> None:
        opts = ctx.options  # the option store exists only once the addon is loaded
        self.flush()  # steps already queued run with the settings they came under
        if "save_stream_file" in updated and self._running:
            self._choose_timing()
        check_updated(opts, updated, options.RECORDER_OPTIONS)
        if "scripts" in updated and self.comments is not None:
            self.comments.listeners_changed()
        if "mcp_flow_comments" in updated:
            if not opts.mcp_flow_comments:
                self.comments = None
            elif self.comments is None:
                self.comments = FlowComments()
            self._subscribe()
        if "mcp_max_body_kb" in updated:
            self._max_body = opts.mcp_max_body_kb * 1024
        if updated & _WRITER_OPTIONS and self._outfile is None:
            directory = writable_dir(opts.mcp_record_dir)
            self.recording.writer.close()
            self.recording.writer = RecordWriter(
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
            self._subscribe()
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
        self._subscribe()
        logger.info(f"mcp-layers: exporting OTLP to {shown_endpoint(exporter.endpoint)}")

    # -- hooks: each notes what the core needs; the core runs after the answer is sent --

    def request(self, flow: http.HTTPFlow) -> None:
        try:
            metadata = flow.metadata
            if not metadata.pop(OBSERVED_KEY, False):
                seen = request_seen(flow)
                if seen is not None:
                    self._later(self._observe, weakref.ref(flow), flow.id, seen)
            injected = metadata.get(INJECTED_KEY)
            if injected is not None:
                self._later(self.tracker.mark_injected, flow.id, injected)
        except Exception as e:
            self.report("request", e)

    def request_facts(self, flow: http.HTTPFlow) -> RequestFacts | None:
        """What the records will say of this request: (body, session, client, protocol
        version), or None if it is not recorded. The fault injector asks before it acts,
        so the request is read here first, as the client sent it."""
        try:
            self.flush()  # the answer needs the core as of now
            if not flow.metadata.get(OBSERVED_KEY):
                flow.metadata[OBSERVED_KEY] = True
                seen = request_seen(flow)
                if seen is not None:
                    self._observe(weakref.ref(flow), flow.id, seen)
            described = self.tracker.describe(flow.id)
            if described is None:
                return None
            req = flow.request
            body = content(req.raw_content, pick(req.headers.fields, REQUEST_NAMES), self._max_body)
            return (body, *described)
        except Exception as e:
            self.report("request", e)
            return None

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        try:
            resp = flow.response
            assert resp is not None
            if flow.error is not None:
                return  # killed by an addon before us: the answer never arrives
            fields = resp.headers.fields
            self._later(
                self._started,
                flow.id,
                resp.status_code,
                fields,
                resp.http_version,
                resp.timestamp_start or time.time(),
            )
            if not is_event_stream(fields):
                return  # a buffered answer: nothing to decide now
            if self.queue.loop is None:
                # Run at once: the core already knows whether this stream is one to read.
                if self.tracker.wants_stream(flow.id):
                    set_tap(flow, StreamTap(self.queue, self._chunk, self.report, flow.id))
                elif not resp.stream:
                    resp.stream = True  # not ours to record, but never hold a stream back
            elif flow.request.method in OBSERVED_METHODS:
                # The core has not seen this request yet: tap it; chunks of a stream the
                # core turns out not to want are dropped when the batch runs.
                set_tap(flow, StreamTap(self.queue, self._chunk, self.report, flow.id))
            elif not resp.stream:
                resp.stream = True
        except Exception as e:
            self.report("responseheaders", e)

    def response(self, flow: http.HTTPFlow) -> None:
        try:
            resp = flow.response
            assert resp is not None
            self._later(
                self._ended,
                flow.id,
                flow.metadata.get(INJECTED_KEY),
                resp.timestamp_end or time.time(),
                resp.stream,
                resp.raw_content,
                resp.headers.fields,
            )
        except Exception as e:
            self.report("response", e)

    def error(self, flow: http.HTTPFlow) -> None:
        try:
            reason = flow.error.msg if flow.error else "error"
            injected = flow.metadata.get(INJECTED_KEY)
            self._later(self._failed, flow.id, injected, time.time(), reason)
        except Exception as e:
            self.report("error", e)

    def websocket_message(self, flow: http.HTTPFlow) -> None:
        """Responses over WebSocket (Codex): each message of a connection whose handshake
        went to a model API path is queued for the core (a message over the body cap only
        by its size). mitmproxy forwards the message after the hooks; nothing waits."""
        try:
            ws = flow.websocket
            if ws is None or not ws.messages or api_of_path(flow.request.path) is None:
                return
            msg = ws.messages[-1]
            data = msg.content if len(msg.content) <= self._max_body else None
            req = flow.request
            self._later(
                self.feed,
                WsMessage(
                    flow.id,
                    msg.timestamp or time.time(),
                    msg.from_client,
                    data,
                    req.path,
                    f"{req.host}:{req.port}",
                    req.headers.get("user-agent"),
                ),
            )
        except Exception as e:
            self.report("websocket_message", e)

    def websocket_end(self, flow: http.HTTPFlow) -> None:
        try:
            if flow.websocket is None or api_of_path(flow.request.path) is None:
                return
            reason = None if flow.error is None else flow.error.msg
            self._later(self.feed, WsEnded(flow.id, time.time(), reason))
        except Exception as e:
            self.report("websocket_end", e)

    def running(self) -> None:
        try:
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
            self._running = True
            self._choose_timing()
            logger.info(startup_line(self.recording.writer.target(), ctx.options))
        except Exception as e:
            self.report("running", e)

    def server_connect_error(self, data: server_hooks.ServerConnectionHookData) -> None:
        # In eager mode this is all an addon ever sees of an unreachable upstream.
        try:
            lazy = getattr(ctx.options, "connection_strategy", "eager") == "lazy"
            if not lazy and "eager" not in self._reported:
                self._reported.add("eager")
                address = data.server.address
                logger.warning(
                    f"mcp-layers: cannot reach the upstream {address}; requests on connections "
                    "that fail this way before any request is read are not recorded "
                    "(use --set connection_strategy=lazy)"
                )
        except Exception as e:
            self.report("server_connect_error", e)

    async def _tick(self) -> None:
        """Time passes without traffic: idle sessions end, parked requests expire and old
        recordings go when they should, not only when the next request comes. Runs
        between hooks on the proxy's loop, so it never interleaves with one; its work
        per tick is bounded (`limits.MAX_IDLE_ENDS_PER_EVENT`)."""
        while True:
            idle_s = self.tracker.settings.session_idle_s
            # A short idle time (a test's) is checked at a quarter of itself.
            await asyncio.sleep(min(TICK_S, max(0.25, idle_s / 4)) if idle_s else TICK_S)
            try:
                self.flush()  # the steps queued before this tick come first
                self.feed(Tick(time.time()))
                self.recording.writer.maintain()
            except Exception as e:
                self.report("tick", e)

    def done(self) -> None:
        # `done` comes before the `error` hooks of flows still open; the tracker writes
        # those now, and ignores their errors when they arrive.
        try:
            if self._ticker is not None:
                self._ticker.cancel()
                self._ticker = None
            self._running = False
            self.flush()  # every queued record is written before the proxy stops
            self.queue.loop = None  # from here on (the error hooks of open flows) at once
            # Flows still open are commented now, before the save addon writes them.
            comments = self.comments
            if comments is not None:
                comments.stopping = True
            self.feed(ProxyStopping(time.time()))
            if comments is not None:
                comments.clear()
            writer = self.recording.writer
            if writer.lost:
                logger.warning(f"mcp-layers: {writer.lost} records could not be written")
            writer.close()
            if self.exporter is not None:
                self.exporter.close()
        except Exception as e:
            self.report("done", e)

    # -- the queue's timing, and its steps --------------------------------------------

    def flush(self) -> None:
        """Run every queued step of the core now, in order, as one batch."""
        self.queue.flush()

    def _choose_timing(self) -> None:
        """Batch the core's work on the proxy's loop, unless flows are saved (`-w`): the
        save addon writes a flow right after its `response` hook, so its comment must be
        there by then, and the work runs inside the hooks."""
        self.flush()
        saving = bool(getattr(ctx.options, "save_stream_file", None))
        self.queue.loop = None
        if self._running and not saving:
            with contextlib.suppress(RuntimeError):  # no loop: a test drives the hooks
                self.queue.loop = asyncio.get_running_loop()

    def _observe(self, ref: weakref.ref[http.HTTPFlow], flow_id: str, seen: Seen) -> None:
        """Feed the request to the core (once per flow: see OBSERVED_KEY)."""
        method, ts, fields, raw, server, peer, path = seen
        headers = pick(fields, REQUEST_NAMES)
        session = query_session(path)
        if method == "POST":
            body = None
            if raw is not None and len(raw) <= self._max_body:
                body = content(raw, headers, self._max_body)
            size = len(raw) if raw is not None else 0
            self.feed(PostReceived(flow_id, ts, server, peer, headers, body, size, session, path))
        else:
            self.feed(OtherRequest(flow_id, ts, method, server, peer, headers, session))
        comments = self.comments
        if comments is not None and self.tracker.is_tracked(flow_id):
            comments.seen(flow_id, ref)

    def _started(self, flow_id: str, status: int, fields: Fields, version: str, ts: float) -> None:
        if not self.tracker.is_tracked(flow_id):
            return
        picked = pick(fields, RESPONSE_NAMES)
        framed = (
            not version.startswith("HTTP/1")
            or "content-length" in picked
            or "chunked" in picked.get("transfer-encoding", "").lower()
        )
        self.feed(ResponseStarted(flow_id, ts, status, picked, framed))

    def _chunk(self, tap: StreamTap, ts: float, data: bytes) -> None:
        if tap.feeding:  # chunks queued after the core lost interest are not read
            self.feed(StreamChunk(tap.flow, ts, data))
            # A stream found not to be MCP (or unreadable) costs nothing from here on.
            tap.feeding = self.tracker.wants_chunks(tap.flow)

    def _ended(
        self,
        flow_id: str,
        injected: dict[str, str] | None,
        ts: float,
        stream: object,
        raw: bytes | None,
        fields: Fields,
    ) -> None:
        if self.tracker.is_tracked(flow_id):
            # The fault injector takes its mark back if it did not touch the answer.
            self.tracker.mark_injected(flow_id, injected)
            self.feed(self._response_end(flow_id, ts, stream, raw, fields))
        if self.comments is not None:
            self.comments.ended(flow_id)

    def _failed(
        self, flow_id: str, injected: dict[str, str] | None, ts: float, reason: str
    ) -> None:
        if self.tracker.is_tracked(flow_id):
            # As in `_ended`: a fault that never acted (an idle cut that never fired) is
            # taken back by the fault injector before this hook.
            self.tracker.mark_injected(flow_id, injected)
            self.feed(FlowFailed(flow_id, ts, reason))
        if self.comments is not None:
            self.comments.ended(flow_id)

    def _response_end(
        self, flow_id: str, ts: float, stream: object, raw: bytes | None, fields: Fields
    ) -> Event:
        tap = tap_of(stream)
        if tap is not None and not tap.seen and raw:
            # A reply made by an addon (a fault rule, say) is sent whole, never through
            # the tap: hand its body to the stream parser in one piece.
            self.feed(StreamChunk(flow_id, ts, raw))
        if tap is not None:
            return StreamEnded(flow_id, ts)
        if stream or raw is None:
            # Streamed by mitmproxy itself (`stream_large_bodies`) or by another addon, not
            # through our tap: the body passed unseen, so the verdict is unknown.
            return ResponseBody(flow_id, ts, None, 0)
        body = None
        if len(raw) <= self._max_body:
            body = content(raw, pick(fields, RESPONSE_NAMES), self._max_body)
        return ResponseBody(flow_id, ts, body, len(raw))

    # -- finished records, to the subscribers ---------------------------------------------

    def feed(self, event: Event) -> None:
        """One event to the core; what it finishes to every subscriber, as it comes. In a
        batch they hand it on when the batch ends; otherwise at once."""
        emitted = self.tracker.handle(event)
        if emitted:
            in_batch = self.queue.running
            hooked = None if in_batch else getattr(event, "flow", None)
            for where, subscriber in self._subscribers:
                try:
                    subscriber.take(emitted, hooked)
                except Exception as e:  # one subscriber failed: the others still get it
                    self.report(where, e)
            self._taken = True
            if not in_batch:
                self._publish()

    def _publish(self) -> None:
        """A batch ended (or a step ran at once): each subscriber hands on what it took,
        once (the records in one write; mitmproxy told once of the flows commented)."""
        if not self._taken:
            return
        self._taken = False
        for where, subscriber in self._subscribers:
            try:
                subscriber.flush()
            except Exception as e:
                self.report(where, e)

    def _subscribe(self) -> None:
        """The subscribers, in the order they get the records: the file first."""
        subscribers: list[tuple[str, Subscriber]] = [("write", self.recording)]
        if self.exporter is not None:
            subscribers.append(("OTLP export", self.exporter))
        if self.comments is not None:
            subscribers.append(("flow comment", self.comments))
        self._subscribers = subscribers

    def report(self, where: str, e: Exception) -> None:
        """Nothing the addon does may reach mitmproxy or the client: log once, count, go on."""
        self.errors += 1
        key = f"{where}:{type(e).__name__}"
        if key not in self._reported:
            self._reported.add(key)
            logger.warning(f"mcp-layers: {where} failed ({e!r}); traffic is unaffected", exc_info=e)


recorder = Recorder(refuse_at_startup=True)
# The fault injector first: its stream cutter is then in place before the recorder's tap
# chains after it (the tap sees what the client gets), and a flow it kills is seen killed.
addons = [FaultInjector(recorder.request_facts, refuse_at_startup=True), recorder]
