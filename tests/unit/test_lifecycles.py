"""The two lifecycle tables govern: every state is reached by real events (one test per
waiting phase; DONE is checked on the entries that left), and a move a table does not
allow raises (`LocalUsageError`), on the live objects, not on constants."""

from __future__ import annotations

import pytest
from mcp_layers_core.events import ProxyStopping, ResponseBody, ResponseStarted
from mcp_layers_core.exchanges import Exchange, Parked, PendingRequest
from mcp_layers_core.lifecycle import (
    SESSION_TRANSITIONS,
    Cause,
    LocalUsageError,
    Phase,
    SessionPhase,
    step_session,
)
from mcp_layers_core.record import EndReason, Kind
from mcp_layers_core.sessions import Session, SessionBook
from mcp_layers_core.settings import Settings
from mcp_layers_core.streams import ON_ITS_OWN
from mcp_layers_core.tracker import Tracker
from mcp_layers_core.waiting import Unclaimed, WaitingRoom
from wire import JSON, SSE, Run, call, event, result, rpc

UA = {"user-agent": "agent/1.0"}
INIT = rpc(0, "initialize", protocolVersion="2025-11-25", capabilities={}, clientInfo={"name": "c"})


def in_session(sid: str) -> dict[str, str]:
    return {**UA, "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}


def open_session(r: Run, sid: str) -> None:
    r.json(
        r.post(INIT, UA),
        200,
        result(0, protocolVersion="2025-11-25", capabilities={}, serverInfo={}),
        {"mcp-session-id": sid},
    )


def parked_for(key: tuple[str, tuple[str, object]]) -> Parked:
    """A parked request as the tracker makes one (its exchange is never read here)."""
    x = Exchange("f", 0.0, "srv", "peer", Session(key[0], True), Kind.REQUEST, None)
    return Parked(x, PendingRequest(1, "tools/call", None, 1), 0.0, resumable=True)


def phases(t: Tracker) -> set[Phase]:
    return {phase for phase, n in t.phases().items() if n}


def test_a_flow_moves_through_its_own_phases() -> None:
    r = Run()
    seen: set[Phase] = set()
    f = r.post(call(1), UA)
    seen |= phases(r.t)
    r.handle(ResponseStarted(f, r.tick(), 200, SSE))
    seen |= phases(r.t)
    assert r.chunk(f, event({"jsonrpc": "2.0", "method": "notifications/progress"})) == []
    seen |= phases(r.t)
    assert seen == {Phase.AWAITING_HEADERS, Phase.AWAITING_BODY, Phase.STREAMING}
    g = r.post(call(2), UA)
    r.handle(ResponseStarted(g, r.tick(), 200, JSON))
    assert phases(r.t) == {Phase.STREAMING, Phase.AWAITING_BODY}


def test_a_resumable_stream_parks_its_request_and_the_answer_moves_it_to_done() -> None:
    r = Run()
    open_session(r, "A")
    f = r.post(call(3), in_session("A"))
    assert r.sse(f, [b"id: ev-1\ndata: \n\n"]) == []
    assert phases(r.t) == {Phase.PARKED}
    (parked,) = r.t._waiting.parked.values()
    get = r.other("GET", {**in_session("A"), "last-event-id": "ev-1"})
    r.handle(ResponseStarted(get, r.tick(), 200, SSE))
    (rec,) = r.chunk(get, b"id: ev-2\n" + event(result(3, content=[])))
    assert rec["outcome"] == "TOOL_SUCCESS" and parked.phase is Phase.DONE


def test_an_answer_before_its_202_waits_unclaimed_then_is_claimed() -> None:
    r = Run()
    get = r.other("GET", {"accept": "text/event-stream", **UA})
    r.handle(ResponseStarted(get, r.tick(), 200, SSE))
    assert r.chunk(get, b"event: endpoint\ndata: /messages?session_id=s1\n\n") == []
    f = r.post(call(1), UA, query_session="s1")
    assert r.chunk(get, event(result(1, content=[]))) == []
    assert phases(r.t) == {Phase.AWAITING_HEADERS, Phase.STREAMING, Phase.UNCLAIMED}
    (early,) = r.t._waiting.unclaimed.values()
    r.handle(ResponseStarted(f, r.tick(), 202, {}))
    (rec,) = r.handle(ResponseBody(f, r.tick(), b"", 0))
    assert rec["outcome"] == "TOOL_SUCCESS"
    assert early.phase is Phase.DONE
    assert Phase.UNCLAIMED not in phases(r.t)


def test_a_rejected_probe_is_held_until_the_client_returns() -> None:
    r = Run()
    err = {"jsonrpc": "2.0", "id": None, "error": {"code": -32022, "message": "Unsupported"}}
    assert r.json(r.post(rpc(1, "server/discover"), UA), 400, err) == []
    assert phases(r.t) == {Phase.HELD}
    (held,) = r.t._waiting.held.values()
    r.post(INIT, UA)
    (rec,) = r.released
    assert rec["negotiation"] is True and held.phase is Phase.DONE


def test_a_stray_move_of_a_waiting_entry_raises() -> None:
    """The room moves each entry by the table: an answer claimed twice, or a held record
    released for a cause its phase does not have, is misuse, named."""
    room = WaitingRoom(Settings())
    key = ("s-1", ("int", 1))
    answer = Unclaimed({"jsonrpc": "2.0", "id": 1, "result": {}}, ON_ITS_OWN, 0.0)
    room.keep_unclaimed(key, answer)
    parked = parked_for(key)
    early, _ = room.park(key, parked)
    assert early is answer and answer.phase is Phase.DONE
    room.keep_unclaimed(key, answer)  # the same answer, kept again after it left
    with pytest.raises(LocalUsageError, match="CLAIMED for flow - in phase DONE"):
        room.park(key, parked)
    room.hold(("10.0.0.1", None), [])
    with pytest.raises(LocalUsageError, match="ANSWERED for flow - in phase HELD"):
        room.release(("10.0.0.1", None), Cause.ANSWERED)  # only a return, a cap, a stop


# -- sessions -------------------------------------------------------------------------


def test_every_session_phase_is_reached() -> None:
    r = Run()
    r.exchange(call(1), result(1, content=[]), UA)  # no session id: a stand-in
    assert r.t.sessions.phases() == [SessionPhase.STAND_IN]
    open_session(r, "A")
    assert SessionPhase.OPEN in r.t.sessions.phases()
    d = r.other("DELETE", in_session("A"))
    r.handle(ResponseStarted(d, r.tick(), 200, {}))
    (end,) = r.handle(ResponseBody(d, r.tick(), b"", 0))
    assert end["endReason"] == "delete"
    assert set(r.t.sessions.phases()) == {SessionPhase.STAND_IN, SessionPhase.ENDED}
    assert set(SESSION_TRANSITIONS) == set(SessionPhase)
    # The proxy stopping ends nothing twice: the ended session is not in its list.
    assert r.handle(ProxyStopping(r.tick())) == []


def test_a_session_ends_once_and_a_stand_in_never() -> None:
    book = SessionBook()
    s = book.real("abc", 1.0)
    book.end(s, EndReason.NOT_FOUND)
    assert (s.phase, s.ended) == (SessionPhase.ENDED, EndReason.NOT_FOUND)
    with pytest.raises(LocalUsageError, match=r"can't end session .* \(delete\) in phase ENDED"):
        book.end(s, EndReason.DELETE)
    stand_in = book.stand_in("10.0.0.1", "agent")
    with pytest.raises(LocalUsageError, match="phase STAND_IN"):
        book.end(stand_in, EndReason.SHUTDOWN)
    for reason in EndReason:
        assert step_session(SessionPhase.OPEN, reason) is SessionPhase.ENDED


def test_a_forgotten_ended_session_comes_back_ended() -> None:
    book = SessionBook(max_sessions=1)
    s = book.real("abc", 1.0)
    book.end(s, EndReason.DELETE)
    book.real("other", 2.0)  # pushes "abc" out of the book; its end is remembered
    again = book.real("abc", 3.0)
    assert again is not s and (again.phase, again.ended) == (SessionPhase.ENDED, "delete")
