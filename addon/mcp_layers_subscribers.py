"""Who gets the finished records: the recording file and the flow comments here, and the
OTLP export (`mcp_layers_otel.LiveExporter`), each through the one `Subscriber`
interface. The recorder hands each its records as the core finishes them, then says when
the batch is over; it wires none of them itself.
"""

from __future__ import annotations

import weakref
from collections import OrderedDict
from typing import Final, Protocol

from mcp_layers_core import limits
from mcp_layers_core.flow_comment import comment_of, mark_of
from mcp_layers_core.jsonl import RecordWriter
from mcp_layers_core.tracker import Emitted
from mitmproxy import ctx, hooks, http
from mitmproxy.addonmanager import traverse


class Subscriber(Protocol):
    def take(self, emitted: list[Emitted], hooked: str | None) -> None:
        """Records the core has just finished, in order, each with the id of its flow.
        `hooked`: the flow whose own hook runs now (mitmproxy redraws it after the
        hook); None while a batch runs after the hooks."""

    def flush(self) -> None:
        """The batch is over (or the one step run inside a hook): hand on what was taken,
        once."""


class RecordFile:
    """The JSONL recording: the records of a batch go out in one write."""

    def __init__(self, writer: RecordWriter) -> None:
        self.writer = writer
        self._records: list[dict[str, object]] = []

    def take(self, emitted: list[Emitted], hooked: str | None) -> None:
        self._records += [e.record for e in emitted]

    def flush(self) -> None:
        records = self._records
        if records:
            self._records = []
            self.writer.write(records)


#: flow.metadata key: the ids of the records commented on this flow (a saved flow keeps
#: it, so a flow can be matched with its records).
RECORDS_KEY: Final = "mcp_layers.records"

#: The comment of a POST whose record comes after its own end (replaced when it does).
PENDING_COMMENT: Final = (
    "verdict pending: answered on a GET stream, or a probe held until the client's next POST"
)

#: Flows kept so a record written after its flow's own hooks can still comment it.
MAX_LIVE_FLOWS: Final = limits.MAX_PENDING_EXCHANGES + limits.MAX_PARKED


class FlowComments:
    """Each record's verdict on its flow, as `flow.comment` and `flow.marked`
    (`mcp_flow_comments`; docs/mitmproxy.md): mitmproxy's own metadata, shown by mitmweb
    and kept in saved flows; the traffic is not touched.

    A record may be of another flow than the one being handled (a parked answer, an
    eviction, a held probe), or come after its flow's hooks (a batch): mitmproxy is then
    told that flow changed (its `update` event, once per batch), so mitmweb redraws it.
    """

    def __init__(self) -> None:
        #: MCP flows by id, from their request to their end; then, if their record is
        #: still to come, in `_awaiting` until it is (both bounded). `_live` holds flows
        #: weakly: a flow mitmproxy has let go of is one nobody can see, so it needs no
        #: comment, and holding it until its batch would carry every flow into the
        #: collector's oldest generation (measured: a full collection every few
        #: exchanges, 19 µs per exchange).
        self._live: OrderedDict[str, weakref.ref[http.HTTPFlow]] = OrderedDict()
        self._awaiting: OrderedDict[str, http.HTTPFlow] = OrderedDict()
        self._changed: list[http.HTTPFlow] = []
        #: The proxy is stopping: flows are still commented (before `save` writes them),
        #: but mitmproxy is told nothing more.
        self.stopping = False
        #: Does any loaded addon handle `update` (mitmweb's and the console's flow view,
        #: a user's script)? None: not looked yet (`listeners_changed` asks again).
        self._listened: bool | None = None

    def seen(self, flow_id: str, ref: weakref.ref[http.HTTPFlow]) -> None:
        """An MCP flow's request: its records will be commented on it."""
        live = self._live
        live[flow_id] = ref
        if len(live) > MAX_LIVE_FLOWS:
            live.popitem(last=False)

    def ended(self, flow_id: str) -> None:
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

    def take(self, emitted: list[Emitted], hooked: str | None) -> None:
        changed = self._changed
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
            if flow_id != hooked and not self.stopping:
                changed.append(flow)

    def flush(self) -> None:
        changed = self._changed
        if changed:
            self._changed = []
            if self._anyone_listens():
                ctx.master.addons.trigger(hooks.UpdateHook(changed))

    def listeners_changed(self) -> None:
        """Addons were loaded or dropped (`scripts` changed): look for listeners again."""
        self._listened = None

    def _anyone_listens(self) -> bool:
        """Whether an `update` event would reach anyone. mitmdump has no flow view: there
        the event costs a walk of its ~36 addons per batch (about 46 Python calls per
        exchange, `benchmarks/call_count.py`) for nobody. Decided by mitmproxy's own test
        (a callable `update` on an addon or a child), once until `scripts` changes."""
        if self._listened is None:
            self._listened = any(
                callable(getattr(a, "update", None))
                for a in traverse(ctx.master.addons.chain)  # type: ignore[no-untyped-call]
            )
        return self._listened

    def clear(self) -> None:
        self._live.clear()
        self._awaiting.clear()
