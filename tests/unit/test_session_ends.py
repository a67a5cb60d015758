"""Every session the recording knows ends with exactly one `session_end` that names a
reason, written when it happens: DELETE, 404, idle, evicted past the cap, shutdown."""

from __future__ import annotations

import json
import random
from collections import Counter, defaultdict

from mcp_layers_core.events import (
    OtherRequest,
    ProxyStopping,
    ResponseBody,
    ResponseStarted,
    Tick,
)
from mcp_layers_core.sessions import SessionBook
from mcp_layers_core.tracker import records_of
from wire import JSON, PEER, SERVER, Run, call, result, rpc

INIT = rpc(0, "initialize", protocolVersion="2025-11-25", clientInfo={"name": "a", "version": "1"})


def headers(sid: str) -> dict[str, str]:
    return {"user-agent": "a/1", "mcp-session-id": sid, "mcp-protocol-version": "2025-11-25"}


def answer(r: Run, flow: str, status: int, body: bytes, more: dict[str, str] | None = None) -> list:
    """Headers then body; every record either event returns (an eviction may come first)."""
    out = records_of(r.t.handle(ResponseStarted(flow, r.tick(), status, {**JSON, **(more or {})})))
    return out + records_of(r.t.handle(ResponseBody(flow, r.tick(), body, len(body))))


def open_session(r: Run, sid: str) -> list[dict]:
    """initialize (answered with `sid`); returns every record this produced."""
    flow = r.post(INIT, {"user-agent": "a/1"})
    body = json.dumps(result(0, protocolVersion="2025-11-25")).encode()
    return r.released + answer(r, flow, 200, body, {"mcp-session-id": sid})


def tool_call(r: Run, sid: str, n: int, status: int = 200) -> list[dict]:
    flow = r.post(call(n), headers(sid))
    body = json.dumps(result(n, content=[])).encode() if status == 200 else b""
    return r.released + answer(r, flow, status, body)


def delete(r: Run, sid: str, status: int = 200) -> list[dict]:
    r.n += 1
    f = f"f{r.n}"
    out = records_of(r.t.handle(OtherRequest(f, r.tick(), "DELETE", SERVER, PEER, headers(sid))))
    out += records_of(r.t.handle(ResponseStarted(f, r.tick(), status, {})))
    return out + records_of(r.t.handle(ResponseBody(f, r.tick(), b"", 0)))


def ends(records: list[dict]) -> list[tuple[str, str | None]]:
    return [(x["session"], x["endReason"]) for x in records if x["kind"] == "session_end"]


def test_past_the_cap_a_live_session_ends_evicted_as_it_is_forgotten() -> None:
    r = Run(max_sessions=3, session_idle_s=0)
    out: list[dict] = []
    for n in range(5):
        out += open_session(r, f"S{n}")
    # Each initialize also makes a connection stand-in (no lifeline, never written).
    assert [reason for _, reason in ends(out)] == ["evicted", "evicted", "evicted"]
    assert len(r.t.sessions) <= 3
    end = next(x for x in out if x["kind"] == "session_end")
    assert end["durationMs"] is not None and end["postCount"] == 1


def test_an_idle_session_ends_on_a_tick_without_traffic() -> None:
    r = Run(session_idle_s=60)
    open_session(r, "A")
    open_session(r, "B")
    r.now += 30
    r.exchange(call(1), result(1, content=[]), headers("B"))  # B is busy, A is not
    assert records_of(r.t.handle(Tick(r.now + 29))) == []
    (idle,) = records_of(r.t.handle(Tick(r.now + 31)))
    assert (idle["endReason"], idle["kind"]) == ("idle", "session_end")
    assert idle["durationMs"] >= 60_000  # from its last traffic to its end
    stop = records_of(r.t.handle(ProxyStopping(r.now + 32)))
    assert [x["endReason"] for x in stop] == ["shutdown"]  # B only: A ended once


def test_a_stream_keeps_its_session_from_going_idle() -> None:
    r = Run(session_idle_s=10)
    open_session(r, "A")
    get = r.other("GET", {**headers("A"), "accept": "text/event-stream"})
    r.t.handle(ResponseStarted(get, r.tick(), 200, {"content-type": "text/event-stream"}))
    for _ in range(5):
        r.now += 5
        assert r.chunk(get, b": keep-alive\n\n") == []
        assert records_of(r.t.handle(Tick(r.now))) == []


def test_a_delete_after_the_end_ends_nothing_and_says_why() -> None:
    r = Run(session_idle_s=60)
    open_session(r, "A")
    (lost, end) = r.json(r.post(call(1), headers("A")), 404, b"")
    assert end["endReason"] == "not_found" and "session_lost" in lost["notes"]
    (late,) = delete(r, "A", 404)
    assert late["endReason"] is None
    assert late["notes"] == ["not_ended:404", "already_ended:not_found"]


def test_a_delete_of_an_idle_forgotten_session_ends_nothing() -> None:
    r = Run(session_idle_s=60)
    open_session(r, "B")
    r.now += 61
    assert [reason for _, reason in ends(records_of(r.t.handle(Tick(r.now))))] == ["idle"]
    assert r.t.sessions.find(r.t.sessions.key_of("B")) is None  # forgotten
    (late,) = delete(r, "B")
    assert late["endReason"] is None and late["notes"] == ["already_ended:idle"]
    assert ends(records_of(r.t.handle(ProxyStopping(r.tick())))) == []


def test_idle_ends_are_spread_over_events_at_most_a_batch_at_a_time() -> None:
    book = SessionBook(max_sessions=5000, idle_s=10)
    book.now = 0.0
    for n in range(1200):
        book.real(f"s{n}")
    assert len(book.idle(20.0, limit=500)) == 500
    assert len(book.idle(20.0, limit=500)) == 500
    assert len(book.idle(20.0, limit=500)) == 200
    assert book.idle(20.0, limit=500) == [] and len(book) == 0 and book.ended_memo == 1200


def test_churn_past_the_cap_every_session_ends_exactly_once() -> None:
    """Sessions that DELETE, vanish, get a 404 or come back after their end, with a book
    of 20: each gets one `session_end` with a reason, and any other DELETE none."""
    rnd = random.Random(7)
    r = Run(max_sessions=20, session_idle_s=5)
    out: list[dict] = []
    opened: list[str] = []
    for n in range(400):
        sid = f"S{n}"
        out += open_session(r, sid)
        opened.append(sid)
        for k in range(rnd.randint(1, 3)):
            out += tool_call(r, sid, k + 1)
        fate = rnd.random()
        if fate < 0.4:
            out += delete(r, sid)
        elif fate < 0.5:
            out += tool_call(r, sid, 9, 404)
            out += delete(r, sid, 404)
        if rnd.random() < 0.05:
            r.now += 6  # a quiet spell: the idle ones end
            out += records_of(r.t.handle(Tick(r.now)))
        if rnd.random() < 0.05 and opened:
            out += delete(r, rnd.choice(opened[-10:]))  # a late DELETE of a recent one
    out += records_of(r.t.handle(ProxyStopping(r.tick())))
    key = r.t.sessions.key_of
    by_session: dict[str, list[str | None]] = defaultdict(list)
    for session, reason in ends(out):
        by_session[session].append(reason)
    named = Counter(s for s, reasons in by_session.items() for x in reasons if x is not None)
    assert {key(s) for s in opened} == set(by_session)
    assert set(named.values()) == {1}, [s for s, n in named.items() if n != 1][:5]
    assert set(named) == set(by_session)
    reasons = Counter(x for rs in by_session.values() for x in rs)
    assert {"delete", "not_found", "evicted", "idle", None} <= set(reasons), reasons
