"""The fault injector: the mitmproxy addon that breaks MCP exchanges on purpose.

It is off unless `--set mcp_faults=PRESET|FILE` or `--set mcp_fault=RULE` is given
(docs/faults.md). `mcp_layers.py` loads it in front of the recorder:
`addons = [FaultInjector(recorder.request_facts), recorder]`. Per request it asks the
recorder what the records will say of it (`request_facts`: the recorder reads the
request then, before any fault can change it), asks the plan (`mcp_layers_core.faults`)
for a decision and acts on it: a reply instead of the upstream's, a dropped connection,
headers held back, a rewritten request, an event stream cut at an event boundary, or the
client's connection closed once an event stream has been silent too long.

The recorder learns of it only through `flow.metadata[INJECTED_KEY]`: the record's
`injected` member (`{"rule": ..., "action": ...}`), set once the fault is in place and
removed when it ended up not touching the exchange (a cut that never came, an idle
timer that never fired).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime
from pathlib import Path
from typing import Any, Final

from mcp_layers_core import faults, limits, options
from mcp_layers_startup import add_options, check_updated, configure_or_refuse
from mitmproxy import exceptions, http
from mitmproxy.addonmanager import Loader

logger = logging.getLogger(__name__)

#: flow.metadata key of the record's `injected` member: the only thing the recorder reads.
INJECTED_KEY: Final = "mcp_layers.injected"

#: (body, session, client, protocol version) of an MCP request as its records show them,
#: or None for a request the recorder does not record (only those can be faulted).
RequestFacts = tuple[bytes | None, str, str | None, str | None]


@dataclass(slots=True)
class FlowFault:
    """The decision taken for one flow, and the stream filter it put in place."""

    decision: faults.Decision
    rpc_id: object
    filter: CutFilter | None = None
    idle: IdleWatch | None = None

    @property
    def untouched(self) -> bool:
        """Did a fault that acts on the answer's stream end up not acting (no cut came,
        no idle timer fired, or the answer was no event stream)?"""
        d = self.decision
        if d.idle_cut_ms:
            return self.idle is None or not self.idle.fired
        if d.truncate_before_final or d.truncate_after_events is not None:
            return self.filter is None or not self.filter.cut
        return False


class CutFilter:
    """The `flow.response.stream` callable of a stream cut: forwards the upstream's exact
    bytes up to an event boundary, then nothing more. A stream callable set before it
    gets what it forwards; the recorder's tap, set after it, sees what the client sees."""

    __slots__ = ("_cutter", "_then")

    def __init__(
        self, cutter: faults.SseCutter, then: Callable[[bytes], Any] | None = None
    ) -> None:
        self._cutter, self._then = cutter, then

    @property
    def cut(self) -> bool:
        return self._cutter.cut

    def __call__(self, data: bytes) -> bytes | Iterable[bytes]:
        try:
            out = (self._cutter.feed(data) if data else self._cutter.end()).data
        except Exception:  # a broken filter must not break the stream: pass it whole
            logger.warning("mcp-layers: stream cutter failed; passing the stream on", exc_info=True)
            out = data
        if self._then is not None:
            return self._then(out) if out or not data else []
        # A list, never b"": mitmproxy sends an empty chunk as HTTP/1's end-of-body
        # marker, which would end the answer (and corrupt a kept-alive connection).
        return [out] if out else []


class IdleWatch:
    """The `flow.response.stream` callable of an idle cut: every chunk goes on unchanged
    (through a stream callable set before it) and restarts the idle timer; when the timer
    fires, `on_idle` closes the client's connection and nothing more is forwarded. The
    recorder's tap, set after it, sees exactly what the client gets."""

    __slots__ = ("_after_s", "_handle", "_last", "_loop", "_on_idle", "_then", "fired")

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        after_ms: int,
        on_idle: Callable[[], None],
        then: Callable[[bytes], Any] | None = None,
    ) -> None:
        self._loop, self._after_s, self._on_idle, self._then = loop, after_ms / 1000, on_idle, then
        self._handle: asyncio.TimerHandle | None = None
        self._last = 0.0  # the loop's time of the last chunk (or of the start)
        self.fired = False

    def start(self) -> None:
        """(Re)start the wait: `after_ms` from now, on the proxy's own loop. A chunk only
        notes its time; the one timer, when it comes, waits out what is left."""
        self._last = self._loop.time()
        if self._handle is None:
            self._handle = self._loop.call_later(self._after_s, self._check)

    def cancel(self) -> None:
        if self._handle is not None:
            self._handle.cancel()
            self._handle = None

    def _check(self) -> None:
        self._handle = None
        left = self._last + self._after_s - self._loop.time()
        if left > 0:  # chunks came meanwhile: silent only since the last one
            self._handle = self._loop.call_later(left, self._check)
            return
        self.fired = True
        try:
            self._on_idle()
        except Exception:  # a timer callback's exception would only reach asyncio's log
            logger.warning("mcp-layers: idle cut failed; the stream goes on", exc_info=True)

    def __call__(self, data: bytes) -> bytes | Iterable[bytes]:
        if data:
            if self.fired:
                return []  # the client's connection is closed: nothing more goes to it
            self.start()
        else:
            self.cancel()  # the upstream ended the stream first
        if self._then is None:
            return data
        out: bytes | Iterable[bytes] = self._then(data)
        return out


def close_client_connection(flow: http.HTTPFlow, last: bytes = b"") -> bool:
    """Close the client's TCP connection of `flow` now, in the middle of its answer, after
    writing `last` (raw bytes, e.g. a chunked body's terminator) to it.

    mitmproxy has no API for this. `flow.kill()` is only looked at when a hook returns
    (mitmproxy issue #4711), and a streamed body passes no hook, so a silent stream would
    never be killed. The proxyserver addon keeps each live connection's
    `ProxyConnectionHandler` (mitmproxy/proxy/server.py) by client id; the writer of its
    client transport is an `asyncio.StreamWriter` (or a mitmproxy_rs stream with the same
    `write`/`close`). Closing it makes mitmproxy read the end of the client's connection:
    the flow ends through its `error` hook and the upstream connection is closed too.

    Returns whether it closed the connection (False when it was gone already). Never
    raises: if those internals are not there (another mitmproxy), it logs once and does
    nothing.
    """
    try:
        from mitmproxy import ctx

        server = ctx.master.addons.get("proxyserver")
        handler = server.connections.get(flow.client_conn.id)
        if handler is None:
            return False  # the client left already
        writer = handler.transports[handler.client].writer
        if writer is None or writer.is_closing():
            return False
        if last:
            writer.write(last)
        writer.close()
        return True
    except Exception as e:
        if not _CLOSE_FAILED:
            _CLOSE_FAILED.append(repr(e))
            logger.warning(
                f"mcp-layers: cannot close a client connection from a fault ({e!r}): this "
                "mitmproxy keeps its connections elsewhere; idle_cut does nothing"
            )
        return False


#: The first failure of `close_client_connection`, so it is logged once per proxy.
_CLOSE_FAILED: list[str] = []

#: The terminating chunk of an HTTP/1.1 chunked body (RFC 9112 §7.1).
LAST_CHUNK: Final = b"0\r\n\r\n"


def graceful_end(flow: http.HTTPFlow) -> bytes:
    """What ends the answer cleanly on the client's wire before the close: the last chunk
    when mitmproxy sends it to the client as HTTP/1.1 chunked over plain TCP, else nothing
    (the close alone, abrupt: an HTTP/2 stream or a TLS connection cannot be ended with
    raw bytes written under mitmproxy's own framing)."""
    resp = flow.response
    if resp is None or flow.client_conn.tls_established:
        return b""
    if flow.request.http_version != "HTTP/1.1" or resp.is_http2 or resp.is_http3:
        return b""
    chunked = "chunked" in resp.headers.get("transfer-encoding", "").lower()
    return LAST_CHUNK if chunked else b""


class FaultInjector:
    """Decides per flow and acts (see the module docstring). Never raises into mitmproxy."""

    def __init__(
        self,
        request_facts: Callable[[http.HTTPFlow], RequestFacts | None],
        refuse_at_startup: bool = False,
    ) -> None:
        self._facts = request_facts
        self._refuse_at_startup = refuse_at_startup
        self.plan: faults.FaultPlan | None = None
        self._max_event = limits.MAX_EVENT_BYTES
        self._reported: set[str] = set()
        self.errors = 0
        #: Each faulted flow's state, by flow id, until the flow ends. Not in
        #: `flow.metadata`: mitmproxy saves that with the flow (`-w`, `save` command), and
        #: these objects cannot be serialised.
        self._faults: dict[str, FlowFault] = {}
        #: The flow hooks, as mitmproxy finds them: None (skipped, not even called)
        #: until a fault plan is first switched on. Most runs inject nothing, and an
        #: idle injector then costs no dispatch per flow. Once armed they stay, so the
        #: state of flows faulted before a plan is switched off is still cleared.
        self.request: Callable[[http.HTTPFlow], None] | None = None
        self.responseheaders: Callable[[http.HTTPFlow], None] | None = None
        self.response: Callable[[http.HTTPFlow], None] | None = None
        self.error: Callable[[http.HTTPFlow], None] | None = None

    def load(self, loader: Loader) -> None:
        add_options(loader, "faults")

    def configure(self, updated: set[str]) -> None:
        configure_or_refuse(lambda: self._configure(updated), self._refuse_at_startup)

    def _configure(self, updated: set[str]) -> None:
        from mitmproxy import ctx  # the option store exists only once the addon is loaded

        opts = ctx.options
        check_updated(opts, updated, options.FAULT_OPTIONS)
        if updated & options.FAULT_OPTIONS:
            self.plan = fault_plan(opts.mcp_faults, opts.mcp_fault, opts.mcp_fault_seed)
            if self.plan is not None and self.request is None:
                self.request, self.responseheaders = self._on_request, self._on_responseheaders
                self.response, self.error = self._on_response, self._on_error
        # The cutter holds at most one event, as the recorder's parser does (its option).
        kib = getattr(opts, "mcp_max_event_kb", limits.MAX_EVENT_BYTES // 1024)
        self._max_event = max(kib, 1) * 1024

    # -- hooks ------------------------------------------------------------------------

    def _on_request(self, flow: http.HTTPFlow) -> None:
        if self.plan is None:
            return
        try:
            self._decide(flow, self.plan)
        except Exception as e:
            self._report("request", e)

    def _on_responseheaders(self, flow: http.HTTPFlow) -> None:
        state = self._faults.get(flow.id)
        if not isinstance(state, FlowFault):
            return
        try:
            self._answer_started(flow, state)
        except Exception as e:
            self._report("responseheaders", e)

    def _on_response(self, flow: http.HTTPFlow) -> None:
        self._flow_ended(flow)

    def _on_error(self, flow: http.HTTPFlow) -> None:
        self._flow_ended(flow)

    def _flow_ended(self, flow: http.HTTPFlow) -> None:
        state = self._faults.pop(flow.id, None)
        if not isinstance(state, FlowFault):
            return
        if state.idle is not None:
            state.idle.cancel()
        if state.untouched:
            # The cut never came (the stream ended first, or the answer was plain JSON):
            # the exchange was not altered, so its record must not say it was.
            flow.metadata.pop(INJECTED_KEY, None)

    def done(self) -> None:
        for state in self._faults.values():
            if state.idle is not None:
                state.idle.cancel()
        self._faults.clear()

    # -- acting -------------------------------------------------------------------------

    def _decide(self, flow: http.HTTPFlow, plan: faults.FaultPlan) -> None:
        """Apply the first rule that acts on this request, as docs/faults.md describes."""
        facts = self._facts(flow)
        if facts is None:
            return
        body, session, client, version = facts
        req = flow.request
        view = faults.request_view(
            body if req.method == "POST" else None,
            session=session,
            client=client,
            protocol_version=version,
            http_method=req.method,
            resumption="last-event-id" in req.headers,
        )
        decision = plan.decide(view)
        if decision is None:
            return
        self._faults[flow.id] = FlowFault(decision, view.rpc_id)
        if decision.effect is faults.Effect.REPLY:
            assert decision.reply is not None
            reply = decision.reply
            headers = [(k.encode(), header_value(k, v).encode()) for k, v in reply.headers]
            flow.response = http.Response.make(reply.status, reply.body, headers)
        elif decision.effect is faults.Effect.DROP and not decision.drop_after_upstream:
            flow.kill()
        else:
            if decision.strip_continuation:
                req.content = faults.strip_continuation(req.get_content(strict=False) or b"")
            if decision.cutter(view.rpc_id) is not None:
                req.headers["accept-encoding"] = "identity"  # the cutter reads plain bytes
            if decision.delay_headers_ms:
                # Hold this flow only (mitmproxy waits for `resume`), not the event loop.
                flow.intercept()
                asyncio.get_running_loop().call_later(decision.delay_headers_ms / 1000, flow.resume)
        # Marked only once the fault is in place: a failure above leaves an organic record.
        flow.metadata[INJECTED_KEY] = decision.injected

    def _answer_started(self, flow: http.HTTPFlow, state: FlowFault) -> None:
        assert flow.response is not None
        if state.decision.effect is faults.Effect.DROP:
            flow.kill()  # after the upstream did its work: the answer never arrives
            return
        # The first Content-Type, as the recorder reads it: a stream it will parse.
        if not _is_event_stream(next(iter(flow.response.headers.get_all("content-type")), "")):
            return
        previous = flow.response.stream
        before = previous if callable(previous) else None
        cutter = state.decision.cutter(state.rpc_id, self._max_event)
        if cutter is not None:
            state.filter = CutFilter(cutter, before)
            flow.response.stream = state.filter
        elif state.decision.idle_cut_ms:
            loop = asyncio.get_running_loop()
            state.idle = IdleWatch(
                loop, state.decision.idle_cut_ms, lambda: self._idle(flow, state), before
            )
            flow.response.stream = state.idle
            state.idle.start()

    def _idle(self, flow: http.HTTPFlow, state: FlowFault) -> None:
        """The event stream was silent too long: close the client's connection."""
        last = graceful_end(flow) if state.decision.idle_cut_graceful else b""
        if not close_client_connection(flow, last) and state.idle is not None:
            state.idle.fired = False  # nothing was cut: the record must not say it was

    def _report(self, where: str, e: Exception) -> None:
        self.errors += 1
        key = f"{where}:{type(e).__name__}"
        if key not in self._reported:
            self._reported.add(key)
            logger.warning(
                f"mcp-layers: fault injection failed in {where} ({e!r}); the flow goes on",
                exc_info=e,
            )


def header_value(name: str, value: str) -> str:
    """A reply header as sent: `retry-after: date+N` becomes the HTTP date N s from now."""
    if name == "retry-after" and value.startswith(faults.RETRY_AFTER_DATE):
        seconds = int(value[len(faults.RETRY_AFTER_DATE) :])
        return format_datetime(datetime.now(UTC) + timedelta(seconds=seconds), usegmt=True)
    return value


def _is_event_stream(ctype: str) -> bool:
    return ctype.split(";", 1)[0].strip().lower() == "text/event-stream"


def fault_plan(source: str, inline: str, seed: int) -> faults.FaultPlan | None:
    """The rules of `--set mcp_faults` (a preset or a file) and `--set mcp_fault`."""
    rules: list[faults.FaultRule] = []
    try:
        if source in faults.PRESETS:
            rules += faults.preset(source)
        elif source:
            path = Path(source).expanduser()
            if not path.is_file():
                raise exceptions.OptionsError(
                    f"mcp_faults: {source!r} is neither a preset nor a file; presets are "
                    f"{', '.join(faults.PRESETS)}; or write a rules file (docs/faults.md)"
                )
            rules += faults.parse_rules(path.read_text(encoding="utf-8"), str(path))
        if inline:
            rules.append(faults.parse_inline(inline))
    except faults.FaultRuleError as e:
        raise exceptions.OptionsError(str(e)) from e
    except (OSError, UnicodeDecodeError) as e:
        raise exceptions.OptionsError(f"mcp_faults: cannot read {source!r}: {e}") from e
    for rule in rules:
        if isinstance(rule.action, faults.Delay) and rule.action.where == "events":
            raise exceptions.OptionsError(
                f"fault rule {rule.name!r}: a delay between events is not possible here: "
                "mitmproxy calls stream filters synchronously, so waiting would stall every "
                "flow; write where=headers (the default) instead"
            )
    return faults.FaultPlan(rules, seed) if rules else None
