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
This file is the thin adapter: hooks note what the core needs and queue it, and the
queue runs after the answers have gone out, in batches (README, "When records are
written"): each step becomes one of the core's events (`mcp_layers_core`, which never
imports mitmproxy), and the records it returns go to the writer, one write per batch.
Each record's verdict is also put on its flow as `flow.comment` and `flow.marked`
(`mcp_flow_comments`, on by default; docs/mitmproxy.md): mitmproxy's own metadata,
shown by mitmweb and kept in saved flows; the traffic is not touched.

Size: over 400 lines because one class holds every hook and the ordered queue they share
(a split would pass the queue's state between modules on every hook).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import time
import urllib.parse
import weakref
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
from mcp_layers_core.tracker import Emitted, Settings, Tracker
from mcp_layers_faults import INJECTED_KEY, FaultInjector, RequestFacts
from mcp_layers_otel import LiveExporter
from mcp_layers_startup import (
    add_options,
    check_updated,
    configure_or_refuse,
    refuse_bad_startup_options,
)
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

#: The core's work is queued by the hooks and run after the answers have gone out: at
#: the latest this long after the first queued step (so a record is written within it)...
BATCH_DELAY_S = 0.02
#: ...or soon once this many steps wait (about 20 JSON exchanges): after a millisecond,
#: not on the loop's next turn, because mitmproxy sends an answer only after its hook
#: task resumes (its tasks start eagerly and then wait for the connection's lock), and a
#: callback queued from inside the hook would run before that send...
BATCH_OPS = 64
BATCH_SOON_S = 0.001
#: ...or by the hook itself past this many (the loop is not getting round to it), or
#: past this many bytes of stream chunks waiting to be read: memory stays bounded.
MAX_QUEUED_OPS = 2048
MAX_QUEUED_BYTES = 256 * 1024
#: A stream past this many bytes is read as it passes, as before batching: MCP's event
#: streams are small messages, and a bulk one must not wait in memory, nor let the proxy
#: outrun the core's buffer budget (the long-run proof measured 10 MiB more peak RSS).
BULK_STREAM_BYTES = 1024 * 1024

#: Requests the core reads; any other method is not MCP.
_OBSERVED_METHODS = ("POST", "GET", "DELETE")

#: mitmproxy's raw header fields: (lower- or mixed-case name, value) byte pairs.
_Fields = tuple[tuple[bytes, bytes], ...]
#: What a request hook notes for the core: (method, start, header fields, raw body,
#: upstream "host:port", peer "ip:port", path).
_Seen = tuple[str, float, _Fields, bytes | None, str, str, str]


class StreamTap:
    """The `flow.response.stream` callable: feeds the core, returns every chunk as it came.

    It runs on the proxy's only event loop for every chunk, outside mitmproxy's own
    exception guard: a raise here drops the chunk, and a raise on the final `b""` hangs
    the client. So it never raises, and it returns the very object it was given.
    """

    __slots__ = ("_addon", "_guard", "feeding", "flow", "passed", "seen")

    def __init__(self, addon: Recorder, flow_id: str) -> None:
        self._addon = addon
        self.flow = flow_id
        self._guard = addon.guard("stream tap")
        self.feeding = True  # False once the core has nothing more to learn here
        self.seen = False  # did any chunk pass? (an addon-made reply never streams)
        self.passed = 0  # bytes passed so far

    def __call__(self, data: bytes) -> bytes:
        if data and self.feeding:  # b"" ends the message; the `response` hook records it
            self.seen = True
            with self._guard:
                addon = self._addon
                self.passed += len(data)
                if self.passed > BULK_STREAM_BYTES:
                    addon.flush()  # a bulk stream: read now, in order
                    addon._chunk(self, time.time(), data)
                    return data
                # Read with the rest of the batch, after the chunk has gone on.
                addon._later((addon._chunk, self, time.time(), data))
                addon.queued_bytes += len(data)
                if addon.queued_bytes > MAX_QUEUED_BYTES:
                    addon.flush()
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
        #: still to come, in `_awaiting` until it is (both bounded). `_live` and the queue
        #: hold flows weakly: a flow mitmproxy has let go of is one nobody can see, so it
        #: needs no comment, and holding it until its batch would carry every flow into
        #: the collector's oldest generation (measured: a full collection every few
        #: exchanges, 19 µs per exchange).
        self._live: OrderedDict[str, weakref.ref[http.HTTPFlow]] = OrderedDict()
        self._awaiting: OrderedDict[str, http.HTTPFlow] = OrderedDict()
        self._stopping = False
        self.comments = True
        #: Steps of the core waiting to run (see `_later`), and the loop that runs them
        #: (None: run each step at once: before `running`, after `done`, or saving flows).
        self._ops: list[tuple[Any, ...]] = []
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._soon = False
        self._running = False
        #: Bytes of stream chunks in the queue (see MAX_QUEUED_BYTES).
        self.queued_bytes = 0
        #: While a batch runs: its records (written once at its end) and the flows it
        #: commented (mitmproxy is told of them once).
        self._batch: list[dict[str, Any]] | None = None
        self._changed: list[http.HTTPFlow] | None = None
        # One guard per hook, made once: they run a few times per exchange.
        self._on_request = _Guard(self, "request")
        self._on_headers = _Guard(self, "responseheaders")
        self._on_response = _Guard(self, "response")
        self._on_error = _Guard(self, "error")
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
        from mitmproxy import ctx  # the option store exists only once the addon is loaded

        opts = ctx.options
        self.flush()  # steps already queued run with the settings they came under
        if "save_stream_file" in updated and self._running:
            self._choose_timing()
        check_updated(opts, updated, options.RECORDER_OPTIONS)
        if "mcp_flow_comments" in updated:
            self.comments = opts.mcp_flow_comments
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

    # -- hooks: each notes what the core needs; the core runs after the answer is sent --

    def request(self, flow: http.HTTPFlow) -> None:
        with self._on_request:
            metadata = flow.metadata
            if not metadata.pop(OBSERVED_KEY, False):
                seen = _request_seen(flow)
                if seen is not None:
                    self._later((self._observe, weakref.ref(flow), flow.id, seen))
            injected = metadata.get(INJECTED_KEY)
            if injected is not None:
                self._later((self.tracker.mark_injected, flow.id, injected))

    def request_facts(self, flow: http.HTTPFlow) -> RequestFacts | None:
        """What the records will say of this request: (body, session, client, protocol
        version), or None if it is not recorded. The fault injector asks before it acts,
        so the request is read here first, as the client sent it."""
        with self.guard("request"):
            self.flush()  # the answer needs the core as of now
            if not flow.metadata.get(OBSERVED_KEY):
                flow.metadata[OBSERVED_KEY] = True
                seen = _request_seen(flow)
                if seen is not None:
                    self._observe(weakref.ref(flow), flow.id, seen)
            described = self.tracker.describe(flow.id)
            if described is None:
                return None
            req = flow.request
            body = _content(
                req.raw_content, _pick(req.headers.fields, _REQUEST_NAMES), self._max_body
            )
            return (body, *described)
        return None

    def responseheaders(self, flow: http.HTTPFlow) -> None:
        with self._on_headers:
            resp = flow.response
            assert resp is not None
            if flow.error is not None:
                return  # killed by an addon before us: the answer never arrives
            fields = resp.headers.fields
            self._later(
                (
                    self._started,
                    flow.id,
                    resp.status_code,
                    fields,
                    resp.http_version,
                    resp.timestamp_start or time.time(),
                )
            )
            if not _is_event_stream(fields):
                return  # a buffered answer: nothing to decide now
            if self._loop is None:
                # Run at once: the core already knows whether this stream is one to read.
                if self.tracker.wants_stream(flow.id):
                    self._set_stream(flow, StreamTap(self, flow.id))
                elif not resp.stream:
                    resp.stream = True  # not ours to record, but never hold a stream back
            elif flow.request.method in _OBSERVED_METHODS:
                # The core has not seen this request yet: tap it; chunks of a stream the
                # core turns out not to want are dropped when the batch runs.
                self._set_stream(flow, StreamTap(self, flow.id))
            elif not resp.stream:
                resp.stream = True

    def response(self, flow: http.HTTPFlow) -> None:
        with self._on_response:
            resp = flow.response
            assert resp is not None
            self._later(
                (
                    self._ended,
                    flow.id,
                    flow.metadata.get(INJECTED_KEY),
                    resp.timestamp_end or time.time(),
                    resp.stream,
                    resp.raw_content,
                    resp.headers.fields,
                )
            )

    def error(self, flow: http.HTTPFlow) -> None:
        with self._on_error:
            reason = flow.error.msg if flow.error else "error"
            injected = flow.metadata.get(INJECTED_KEY)
            self._later((self._failed, flow.id, injected, time.time(), reason))

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
            self._running = True
            self._choose_timing()

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
                self.flush()  # the steps queued before this tick come first
                self.feed(Tick(time.time()))
                self.writer.maintain()

    def done(self) -> None:
        # `done` comes before the `error` hooks of flows still open; the tracker writes
        # those now, and ignores their errors when they arrive.
        with self.guard("done"):
            if self._ticker is not None:
                self._ticker.cancel()
                self._ticker = None
            self._running = False
            self.flush()  # every queued record is written before the proxy stops
            self._loop = None  # from here on (the error hooks of open flows) at once
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

    # -- the queue: the core's work, in hook order, after the answers have gone out ----

    def _choose_timing(self) -> None:
        """Batch the core's work on the proxy's loop, unless flows are saved (`-w`): the
        save addon writes a flow right after its `response` hook, so its comment must be
        there by then, and the work runs inside the hooks."""
        from mitmproxy import ctx

        self.flush()
        saving = bool(getattr(ctx.options, "save_stream_file", None))
        self._loop = None
        if self._running and not saving:
            with contextlib.suppress(RuntimeError):  # no loop: a test drives the hooks
                self._loop = asyncio.get_running_loop()

    def _later(self, op: tuple[Any, ...]) -> None:
        """Queue one step of the core (a bound method and the values it needs), or run
        it now when there is no loop to run it on. Steps run in the order they came."""
        loop = self._loop
        if loop is None:
            op[0](*op[1:])
            return
        ops = self._ops
        ops.append(op)
        if len(ops) == 1:
            self._timer = loop.call_later(BATCH_DELAY_S, self.flush)
        elif len(ops) >= BATCH_OPS:
            if not self._soon:
                self._soon = True
                loop.call_later(BATCH_SOON_S, self.flush)
            elif len(ops) >= MAX_QUEUED_OPS:
                self.flush()  # the loop is not getting round to it: memory stays bounded

    def flush(self) -> None:
        """Run every queued step of the core now, in order; write what they return once."""
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._soon = False
        self.queued_bytes = 0
        ops = self._ops
        if not ops:
            return
        self._ops = []
        batch: list[dict[str, Any]] = []
        changed: list[http.HTTPFlow] = []
        self._batch, self._changed = batch, changed
        try:
            for op in ops:
                try:
                    op[0](*op[1:])
                except Exception as e:  # one step failed: the others still run
                    self.report("batch", e)
        finally:
            self._batch = self._changed = None
            with self.guard("write"):
                if batch:
                    self.writer.write(batch)
                    if self.exporter is not None:
                        self.exporter.submit(batch)
            if changed:
                with self.guard("flow comment"):
                    from mitmproxy import ctx

                    ctx.master.addons.trigger(hooks.UpdateHook(changed))

    def _observe(self, ref: weakref.ref[http.HTTPFlow], flow_id: str, seen: _Seen) -> None:
        """Feed the request to the core (once per flow: see OBSERVED_KEY)."""
        method, ts, fields, raw, server, peer, path = seen
        headers = _pick(fields, _REQUEST_NAMES)
        query_session = _query_session(path)
        if method == "POST":
            body = None
            if raw is not None and len(raw) <= self._max_body:
                body = _content(raw, headers, self._max_body)
            size = len(raw) if raw is not None else 0
            self.feed(PostReceived(flow_id, ts, server, peer, headers, body, size, query_session))
        else:
            self.feed(OtherRequest(flow_id, ts, method, server, peer, headers, query_session))
        if self.comments and self.tracker.is_tracked(flow_id):
            live = self._live
            live[flow_id] = ref
            if len(live) > MAX_LIVE_FLOWS:
                live.popitem(last=False)

    def _started(self, flow_id: str, status: int, fields: _Fields, version: str, ts: float) -> None:
        if not self.tracker.is_tracked(flow_id):
            return
        picked = _pick(fields, _RESPONSE_NAMES)
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
        fields: _Fields,
    ) -> None:
        if self.tracker.is_tracked(flow_id):
            # The fault injector takes its mark back if it did not touch the answer.
            self.tracker.mark_injected(flow_id, injected)
            self.feed(self._response_end(flow_id, ts, stream, raw, fields))
        self._flow_ended(flow_id)

    def _failed(
        self, flow_id: str, injected: dict[str, str] | None, ts: float, reason: str
    ) -> None:
        if self.tracker.is_tracked(flow_id):
            # As in `_ended`: a fault that never acted (an idle cut that never fired) is
            # taken back by the fault injector before this hook.
            self.tracker.mark_injected(flow_id, injected)
            self.feed(FlowFailed(flow_id, ts, reason))
        self._flow_ended(flow_id)

    # -- plumbing -----------------------------------------------------------------------

    def feed(self, event: Event) -> None:
        emitted = self.tracker.handle(event)
        if emitted:
            records = [e.record for e in emitted]
            batch = self._batch
            if batch is not None:
                batch += records
            else:
                self.writer.write(records)
                if self.exporter is not None:
                    self.exporter.submit(records)
            if self.comments:
                with self.guard("flow comment"):
                    self._comment(emitted, getattr(event, "flow", None))

    def _comment(self, emitted: list[Emitted], current: str | None) -> None:
        """Put each record's verdict on its flow. A record may be of another flow than
        the event's (a parked answer, an eviction, a held probe), or come after its
        flow's hooks (a batch): mitmproxy is then told that flow changed, so mitmweb
        shows it."""
        changed: list[http.HTTPFlow] = []
        batched = self._changed
        for record, flow_id in emitted:
            if flow_id is None:
                continue  # the proxy's own end of a session: no flow
            ref = self._live.get(flow_id)
            flow = ref() if ref is not None else self._awaiting.pop(flow_id, None)
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
            if batched is not None:
                batched.append(flow)
            elif flow_id != current and not self._stopping:
                changed.append(flow)
        if changed:
            from mitmproxy import ctx

            ctx.master.addons.trigger(hooks.UpdateHook(changed))

    def _flow_ended(self, flow_id: str) -> None:
        """Its own hooks are over: forget the flow, unless its record is still to come
        (a POST answered elsewhere later, or a probe held until the client's next POST)."""
        if not self._live:
            return
        ref = self._live.pop(flow_id, None)
        flow = ref() if ref is not None else None
        if flow is not None and flow.request.method == "POST" and RECORDS_KEY not in flow.metadata:
            # A saved flow (`-w`) is written right after this hook: say why it has no verdict.
            flow.comment = PENDING_COMMENT
            self._awaiting[flow_id] = flow
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

    def _response_end(
        self, flow_id: str, ts: float, stream: object, raw: bytes | None, fields: _Fields
    ) -> Event:
        tap = _tap_of(stream)
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
            body = _content(raw, _pick(fields, _RESPONSE_NAMES), self._max_body)
        return ResponseBody(flow_id, ts, body, len(raw))

    @staticmethod
    def _set_stream(flow: http.HTTPFlow, tap: StreamTap) -> None:
        assert flow.response is not None
        previous = flow.response.stream
        flow.response.stream = _Chained(previous, tap) if callable(previous) else tap


def _tap_of(stream: object) -> StreamTap | None:
    if isinstance(stream, _Chained):
        stream = stream.tap
    return stream if isinstance(stream, StreamTap) else None


def _peer(flow: http.HTTPFlow) -> str:
    peer = flow.client_conn.peername
    return f"{peer[0]}:{peer[1]}" if peer else "unknown"


def _request_seen(flow: http.HTTPFlow) -> _Seen | None:
    """What the core will need of this request, read now (None: not a method it reads)."""
    req = flow.request
    method = req.method
    if method not in _OBSERVED_METHODS:
        return None
    server = f"{req.host}:{req.port}"
    return (
        method,
        req.timestamp_start,
        req.headers.fields,
        req.raw_content,
        server,
        _peer(flow),
        req.path,
    )


def _query_session(path: str) -> str | None:
    """2024-11-05 servers name the session in the POST URL the `endpoint` event gave."""
    if "?" not in path:
        return None
    # As mitmproxy's `Request.query` reads it: the first value of a name wins.
    query = urllib.parse.urlparse(path).query
    found = dict(
        reversed(urllib.parse.parse_qsl(query, keep_blank_values=True, errors="surrogateescape"))
    )
    return found.get("session_id") or found.get("sessionId")


#: Raw (lower-case bytes) header names the adapter reads -> the names the core knows.
#: Secrets (Authorization, cookies, proxy headers) are never picked, so they never
#: reach the core, let alone a record.
_REQUEST_NAMES = {n.encode(): n for n in (*WANTED_REQUEST_HEADERS, "content-encoding")}
_RESPONSE_NAMES = {
    n.encode(): n for n in (*WANTED_RESPONSE_HEADERS, "content-length", "transfer-encoding")
}


def _pick(fields: _Fields, names: dict[bytes, str]) -> dict[str, str]:
    """The wanted headers in one pass over the raw fields (each `Headers.get` is a
    case-insensitive scan of them all: a third of the addon's time before this)."""
    picked: dict[str, str] = {}
    for key, value in fields:
        name = names.get(key.lower())
        if name is not None and name not in picked:
            picked[name] = value.decode("utf-8", "replace")
    return picked


def _content(raw: bytes | None, picked: dict[str, str], cap: int) -> bytes | None:
    """The body as the core reads it (decoded there, never past `cap` bytes)."""
    return decoded_body(raw, picked.get("content-encoding"), cap)


def _is_event_stream(fields: _Fields) -> bool:
    """Is the (first) Content-Type an event stream? Read as the core reads it."""
    for key, value in fields:
        if key.lower() == b"content-type":
            ctype = value.decode("utf-8", "replace")
            return ctype.split(";", 1)[0].strip().lower() == "text/event-stream"
    return False


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
