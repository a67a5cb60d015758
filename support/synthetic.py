"""Seeded synthetic recordings in the documented record format (`docs/record-format.md`).

Used by the tests (small recordings with every outcome, layer and retry kind in them) and by
`benchmarks/analysis_bench.py` (millions of records). The same seed and arguments always
give the same bytes.

The model: a few clients, each with its own retry habits, run sessions against two servers;
several runs are in flight at once and records are written in the order their exchanges
end, as the addon writes them. A session initialises, lists tools, makes calls (some fail at
each layer, some are retried as its client's policy says), may be forgotten by the server
(404, then re-initialised or abandoned) and ends with a DELETE, by abandonment, or at proxy
shutdown. Clients speaking 2026-07-28 get input-required results and continue them.

Run `python -m mcp_layers_support.synthetic OUT.jsonl -n 1000 --seed 1` to write one.
"""

from __future__ import annotations

import argparse
import hashlib
import heapq
import itertools
import random
import time
from collections import abc
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
from mcp_layers_core.record import FIELDS, LAYER_OF, EndReason, Outcome, RetryOrigin, new_record

LEGACY = "2025-11-25"
MODERN = "2026-07-28"
SSE = "text/event-stream"
JSON = "application/json"

#: Fields added with the retry/session tracker, in the order records carry them (after
#: `retryOrigin`, before `scenario`); `legacy=True` leaves them out, as records written
#: before they existed do.
TRACKER_FIELDS = tuple(f.name for f in FIELDS if not f.always)

# (tool, safety, median ms)
TOOLS = (
    ("search", "read_only", 40.0),
    ("get_weather", "read_only", 120.0),
    ("read_file", "read_only", 8.0),
    ("set_flag", "idempotent", 15.0),
    ("send_email", "unsafe", 250.0),
    ("create_ticket", "unsafe", 90.0),
    ("echo", "unknown", 3.0),
)
TOOL_WEIGHTS = (30, 15, 20, 8, 6, 8, 13)
INPUT_TOOL = ("book_flight", "unsafe", 180.0)

# Failure outcomes of one attempt: (outcome, weight). The rest of the mass is success.
TOOL_FAILURES = (
    (Outcome.TOOL_ERROR, 50),
    (Outcome.JSONRPC_ERROR, 30),
    (Outcome.HTTP_ERROR, 40),
    (Outcome.NO_RESPONSE, 10),
    (Outcome.STREAM_INCOMPLETE, 15),
    (Outcome.MALFORMED_JSON, 3),
    (Outcome.INVALID_ENVELOPE, 3),
    (Outcome.INVALID_TOOL_RESULT, 4),
    (Outcome.UNINSPECTED, 2),
)
OTHER_FAILURES = (
    (Outcome.JSONRPC_ERROR, 20),
    (Outcome.HTTP_ERROR, 30),
    (Outcome.NO_RESPONSE, 5),
    (Outcome.STREAM_INCOMPLETE, 5),
    (Outcome.INVALID_RESULT, 4),
    (Outcome.MALFORMED_JSON, 2),
)
LAYER = {o.value: layer.value for o, layer in LAYER_OF.items()}
ERRORS = (
    (-32602, "Invalid params: 'query' is required", 6),
    (-32603, "Internal error", 3),
    (-32601, "Method not found", 1),
)
HTTP_FAILURES = ((503, 35), (429, 15), (500, 30), (502, 20))
# As `retries.UNCERTAIN` (TRANSPORT_VIOLATION included, though the model never makes one).
UNCERTAIN = frozenset({Outcome.NO_RESPONSE, Outcome.STREAM_INCOMPLETE, Outcome.TRANSPORT_VIOLATION})


@dataclass(frozen=True, slots=True)
class Profile:
    """One client's wire habits and retry policy."""

    client: str
    user_agent: str
    protocol: str
    weight: int
    sse: float  # share of responses sent as SSE
    max_attempts: int = 1
    resend_uncertain: bool = False  # resend the same id after NO_RESPONSE / STREAM_INCOMPLETE
    reissue_http: bool = False  # new id after 5xx / 429
    reissue_invalid_params: bool = False  # retries -32602 with the same params: futile
    honours_retry_after: float = 0.0  # probability
    reinit_on_404: bool = False
    deletes: float = 0.8  # probability a finished session is DELETEd
    calls: tuple[int, int] = (3, 30)


PROFILES = (
    Profile(
        "peer-py-client@0.1",
        "python-httpx2/2.16.2",
        LEGACY,
        30,
        0.7,
        max_attempts=3,
        reissue_http=True,
        resend_uncertain=True,
        honours_retry_after=0.95,
        reinit_on_404=True,
    ),
    Profile(
        "peer-ts-client@0.1",
        "node",
        LEGACY,
        25,
        0.9,
        max_attempts=4,
        resend_uncertain=True,
        reissue_http=True,
        honours_retry_after=0.2,
        deletes=0.5,
    ),
    Profile("inspector-cli@2.12.0", "node", LEGACY, 10, 0.5, calls=(1, 4), deletes=0.95),
    Profile(
        "conformance-test-client@1.0.0",
        "python-httpx2/2.16.2",
        MODERN,
        15,
        0.6,
        max_attempts=2,
        reissue_http=True,
        reissue_invalid_params=True,
        honours_retry_after=1.0,
        reinit_on_404=True,
    ),
    Profile(
        "mcp-remote@0.15.1",
        "node",
        LEGACY,
        20,
        0.8,
        max_attempts=5,
        reissue_http=True,
        resend_uncertain=True,
        reissue_invalid_params=True,
        honours_retry_after=0.6,
    ),
)
SERVERS = ("127.0.0.1:9104", "127.0.0.1:9105")


@dataclass(slots=True)
class _Pending:
    """A record waiting for its end time; `rec["id"]` is filled when it is written."""

    end: float
    rec: dict[str, Any]


@dataclass(slots=True)
class _Session:
    sid: str
    posts: int = 0
    rpc_id: int = 0
    open: bool = True


@dataclass(slots=True)
class _Run:
    """One client process: one or more sessions in a row."""

    profile: Profile
    server: str
    clock: float  # ms since the recording's start; the next POST starts here or later
    host: int = 0  # which client machine: stand-in sessions hash it
    protocol: str = LEGACY  # negotiated: a 2026-07-28 client may fall back
    session: _Session | None = None
    sessions: list[_Session] = field(default_factory=list)


class Generator:
    """Builds records; see the module docstring for the model."""

    def __init__(
        self,
        *,
        seed: int,
        scenario: str | None,
        inject_rate: float,
        legacy: bool,
        start_epoch_ms: int,
    ) -> None:
        self.rng = random.Random(seed)
        self.scenario = scenario
        self.inject_rate = inject_rate
        self.legacy = legacy
        self.start_epoch_ms = start_epoch_ms
        self._ts_cache: dict[int, str] = {}
        self._stand_ins: dict[str, _Session] = {}
        self._ended: set[str] = set()  # sessions given a shutdown end

    # ----------------------------------------------------------------- helpers

    def ts(self, ms: float) -> str:
        total = self.start_epoch_ms + int(ms)
        sec, milli = divmod(total, 1000)
        head = self._ts_cache.get(sec)
        if head is None:
            if len(self._ts_cache) > 4096:
                self._ts_cache.clear()
            head = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(sec))
            self._ts_cache[sec] = head
        return f"{head}.{milli:03d}Z"

    def session_id(self, prefix: str = "s-") -> str:
        return prefix + f"{self.rng.getrandbits(40):010x}"

    def duration(self, median: float, spread: float = 0.6) -> float:
        return round(self.rng.lognormvariate(0.0, spread) * median, 1)

    def base(self, run: _Run, kind: str, start: float, duration: float | None) -> dict[str, Any]:
        s = run.session
        rec = new_record(
            kind=kind,
            ts=self.ts(start),
            durationMs=duration,
            server=run.server,
            session=s.sid if s else None,
            client=run.profile.client,
            userAgent=run.profile.user_agent,
            protocolVersion=run.protocol,
            postCount=0,
            scenario=self.scenario,
        )
        if self.legacy:
            for name in TRACKER_FIELDS:
                del rec[name]
        if kind != "session_end" and s is not None:
            s.posts += 1
        rec["postCount"] = s.posts if s else 1
        rec["_start"] = start  # for the scheduler; taken off before the record is written
        return rec

    def answered(
        self,
        rec: dict[str, Any],
        *,
        status: int,
        sse: bool,
        final: bool = True,
        end: str = "complete",
    ) -> None:
        rec["httpStatuses"].append(status)
        rec["contentType"] = SSE if sse else JSON
        if sse:
            rec["sse"] = {
                "events": self.rng.randint(1, 3) if final else self.rng.randint(0, 2),
                "final": final,
                "end": end,
                "resumed": False,
            }

    def set_tracker(self, rec: dict[str, Any], **values: Any) -> None:
        if not self.legacy:
            rec.update(values)

    # ------------------------------------------------------------ one exchange

    def request(
        self,
        run: _Run,
        start: float,
        method: str,
        tool: tuple[str, str, float] | None,
        *,
        outcome: str,
        rpc_id: int,
        statuses: list[int],
    ) -> dict[str, Any]:
        """A request record for one attempt with the given outcome."""
        p = run.profile
        rng = self.rng
        median = tool[2] if tool else (6.0 if method == "initialize" else 12.0)
        rec = self.base(run, "request", start, self.duration(median))
        rec["method"] = method
        rec["httpStatuses"] = list(statuses)
        rec["jsonrpc"] = {"id": rpc_id, "errorCode": None, "errorMessage": None}
        sse = rng.random() < p.sse
        if tool:
            rec["tool"] = tool[0]
            self.set_tracker(rec, toolSafety=tool[1])
        if outcome == Outcome.NO_RESPONSE:
            rec["durationMs"] = 30000.0 if rng.random() < 0.3 else round(rng.uniform(0.3, 4), 1)
        elif outcome == Outcome.HTTP_ERROR:
            status = _weighted(rng, HTTP_FAILURES)
            rec["httpStatuses"].append(status)
            rec["contentType"] = JSON if rng.random() < 0.7 else "text/plain"
            rec["durationMs"] = round(rng.uniform(0.5, 20), 1)
            if status == 500 and rng.random() < 0.3:
                rec["jsonrpc"].update(errorCode=-32603, errorMessage="Internal error")
            if status in (429, 503) and rng.random() < 0.8:
                self.set_tracker(rec, retryAfterMs=rng.choice((1000, 2000, 5000)))
        elif outcome == Outcome.STREAM_INCOMPLETE:
            self.answered(rec, status=200, sse=True, final=False, end=rng.choice(("eof", "error")))
            rec["durationMs"] = self.duration(median * 4)
        elif outcome == Outcome.UNINSPECTED:
            self.answered(rec, status=200, sse=sse)
            rec["notes"] = [rng.choice(("body_over_cap:17825792", "encoded_stream:br"))]
        elif outcome in (Outcome.MALFORMED_JSON, Outcome.INVALID_ENVELOPE):
            self.answered(rec, status=200, sse=sse)
            if outcome == Outcome.INVALID_ENVELOPE and sse and rng.random() < 0.5:
                rec["notes"] = [f"unexpected_response_id:{rpc_id + 1}"]
        elif outcome == Outcome.JSONRPC_ERROR:
            self.answered(rec, status=200, sse=sse)
            code, message = _error(rng, method)
            rec["jsonrpc"].update(errorCode=code, errorMessage=message)
        else:  # a result arrived
            self.answered(rec, status=200, sse=sse)
            if outcome == Outcome.INPUT_REQUIRED:
                rec["resultType"] = "input_required"
            elif outcome != Outcome.INVALID_RESULT:
                rec["resultType"] = "complete"
            if method == "tools/call" and outcome in (Outcome.TOOL_SUCCESS, Outcome.TOOL_ERROR):
                rec["isError"] = outcome == Outcome.TOOL_ERROR
        rec["outcome"] = outcome
        rec["layer"] = LAYER[outcome]
        self.set_tracker(rec, attempt=1)
        return rec

    def sample_outcome(self, method: str, attempt: int, injected: bool) -> Outcome:
        rng = self.rng
        if injected:
            return rng.choice((Outcome.HTTP_ERROR, Outcome.STREAM_INCOMPLETE, Outcome.NO_RESPONSE))
        fail = 0.12 if method == "tools/call" else 0.03
        if attempt > 1:
            fail *= 0.5  # transient faults mostly clear
        if rng.random() >= fail:
            return Outcome.TOOL_SUCCESS if method == "tools/call" else Outcome.SUCCESS
        return _weighted(rng, TOOL_FAILURES if method == "tools/call" else OTHER_FAILURES)

    # ---------------------------------------------------------------- a run

    def run(self, run: _Run) -> Iterator[dict[str, Any]]:
        """Yield a client run's records in the order their exchanges end."""
        p = run.profile
        rng = self.rng
        previous: str | None = None
        retry_of: dict[str, Any] | None = None  # a 404'd call to repeat after re-initialising
        for _ in range(3):  # at most three sessions (re-initialisations) per run
            outcome = yield from self.open_session(run, previous)
            if outcome != Outcome.SUCCESS:
                return
            calls = rng.randint(*p.calls)
            stand_in = run.session is not None and run.session.sid.startswith("c-")
            expired_at = rng.randint(1, calls) if rng.random() < 0.08 and not stand_in else None
            if retry_of is not None:
                yield from self.call(run, retry=retry_of)
                retry_of = None
            for n in range(1, calls + 1):
                run.clock += self.duration(30.0, 1.0)
                if n == expired_at:
                    rec = yield from self.expired(run)
                    if not p.reinit_on_404:
                        # Abandoned, never re-initialised; some clients still DELETE the
                        # session on the way out, and the server refuses it (404).
                        if rng.random() < p.deletes:
                            yield self.refused_delete(run)
                        return
                    assert run.session is not None  # `expired` ended the open one
                    previous, retry_of = run.session.sid, rec
                    break
                yield from self.call(run)
            else:
                yield from self.close(run)
                return

    def open_session(
        self, run: _Run, previous: str | None
    ) -> abc.Generator[dict[str, Any], None, Outcome]:
        """Start talking: initialize (2025-11-25), or for a 2026-07-28 client, nothing
        (no sessions; the client stands in for one) unless the server is older and
        rejects its first request, when it falls back to initialize."""
        p = run.profile
        rng = self.rng
        run.session = None
        run.protocol = p.protocol
        if p.protocol == MODERN and previous is None:
            # Clients on one host with one user agent share a stand-in, and its POST count.
            sid = self.stand_in(run)
            run.session = self._stand_ins.setdefault(sid, _Session(sid))
            run.session.open = True
            run.sessions.append(run.session)
            older_server = rng.random() < 0.15
            if older_server or rng.random() < 0.3:
                rec = self.request(
                    run,
                    run.clock,
                    "server/discover",
                    None,
                    outcome=Outcome.HTTP_ERROR if older_server else Outcome.SUCCESS,
                    rpc_id=self.next_id(run),
                    statuses=[],
                )
                if older_server:
                    rec["httpStatuses"] = [400]
                    rec["jsonrpc"].update(
                        errorCode=-32020, errorMessage="Unsupported protocol version"
                    )
                    self.set_tracker(rec, negotiation=True, retryAfterMs=None)
                run.clock += rec["durationMs"] + 1
                yield rec
            if not older_server:
                return Outcome.SUCCESS  # 2026-07-28 all the way: no initialize, no session
            run.protocol = LEGACY  # the fallback
        run.session = _Session(self.session_id())
        run.sessions.append(run.session)
        rec = self.request(
            run,
            run.clock,
            "initialize",
            None,
            outcome=Outcome.SUCCESS,
            rpc_id=self.next_id(run),
            statuses=[],
        )
        self.set_tracker(rec, previousSession=previous)
        run.clock += rec["durationMs"] + 1
        yield rec
        note = self.base(run, "notification", run.clock, round(rng.uniform(0.5, 6), 1))
        note.update(method="notifications/initialized", httpStatuses=[202], contentType=JSON)
        if rng.random() < 0.05:
            note["httpStatuses"] = [200]
            self.set_tracker(note, ackNote="200 with body")
        run.clock += note["durationMs"] + 1
        yield note
        if rng.random() < 0.9:
            yield from self.call(run, method="tools/list")
        return Outcome.SUCCESS

    def stand_in(self, run: _Run) -> str:
        # A hash of the client's host and user agent: clients on one host share it.
        key = f"{run.host}|{run.profile.user_agent}".encode()
        return "c-" + hashlib.sha256(key).hexdigest()[:10]

    def next_id(self, run: _Run) -> int:
        assert run.session is not None
        run.session.rpc_id += 1
        return run.session.rpc_id

    def call(
        self, run: _Run, method: str | None = None, retry: dict[str, Any] | None = None
    ) -> Iterator[dict[str, Any]]:
        """One logical call and its retries; input-required turns are continued."""
        rng = self.rng
        tool: tuple[str, str, float] | None = None
        if retry is not None:  # repeated in a new session after a 404
            method = retry["method"]
            tool = _tool_named(retry["tool"]) if retry["tool"] else None
        elif method is None:
            r = rng.random()
            if r < 0.8:
                method = "tools/call"
                tool = (
                    INPUT_TOOL
                    if run.protocol == MODERN and rng.random() < 0.15
                    else TOOLS[_weighted_index(rng, TOOL_WEIGHTS)]
                )
            else:
                method = rng.choice(("resources/list", "prompts/list", "ping"))
        assert method is not None
        prev: dict[str, Any] | None = retry
        delay: float | None = None  # from the end of `prev` to the next attempt
        origin = RetryOrigin.REINIT if retry is not None else RetryOrigin.NONE
        attempt = 2 if retry is not None else 1
        statuses: list[int] = list(retry["httpStatuses"]) if retry is not None else []
        rpc_id = self.next_id(run)
        continues: dict[str, Any] | None = None
        while True:
            injected = (
                self.inject_rate > 0 and method == "tools/call" and rng.random() < self.inject_rate
            )
            outcome = self.sample_outcome(method, attempt, injected)
            if continues is None and tool is INPUT_TOOL and outcome == Outcome.TOOL_SUCCESS:
                outcome = Outcome.INPUT_REQUIRED
            elif continues is not None and outcome == Outcome.TOOL_SUCCESS and rng.random() < 0.2:
                outcome = Outcome.INPUT_REQUIRED  # a second round
            if (
                prev is not None
                and prev["outcome"] == Outcome.JSONRPC_ERROR
                and prev["jsonrpc"]["errorCode"] == -32602
                and origin != RetryOrigin.NONE
            ):
                outcome = Outcome.JSONRPC_ERROR  # same params, same answer
            start = run.clock
            response: dict[str, Any] | None = None
            if (
                run.protocol == LEGACY
                and tool is not None
                and tool[1] == "unsafe"
                and rng.random() < 0.1
                and outcome == Outcome.TOOL_SUCCESS
            ):
                # The server asks the user on the stream; the client answers in a POST.
                response = self.server_request_answer(run, start)
            rec = self.request(
                run, start, method, tool, outcome=outcome, rpc_id=rpc_id, statuses=statuses
            )
            if prev is not None and origin != RetryOrigin.NONE:
                if outcome == Outcome.JSONRPC_ERROR and prev["outcome"] == Outcome.JSONRPC_ERROR:
                    rec["jsonrpc"].update(
                        errorCode=prev["jsonrpc"]["errorCode"],
                        errorMessage=prev["jsonrpc"]["errorMessage"],
                    )
                self.mark_retry(rec, prev, origin, attempt, delay)
            if continues is not None:
                self.set_tracker(rec, continues=continues["id"])
            if injected:
                self.set_tracker(
                    rec,
                    injected={"rule": self.scenario or "fault", "action": _injected_action(rec)},
                )
            if response is not None:
                yield response
            run.clock = start + rec["durationMs"]
            yield rec
            if rec["outcome"] == Outcome.INPUT_REQUIRED:
                if rng.random() < 0.15:
                    return  # the user walked away
                run.clock += self.duration(800.0)  # the user answers
                continues, prev, origin, attempt = rec, None, RetryOrigin.NONE, 1
                statuses, rpc_id = [], self.next_id(run)
                continue
            choice = self.retry_choice(rec, attempt)
            if choice is None:
                return
            origin, delay = choice
            run.clock += delay
            prev, attempt = rec, attempt + 1
            statuses = list(rec["httpStatuses"])
            if origin == RetryOrigin.REISSUE:
                rpc_id = self.next_id(run)

    def retry_choice(self, rec: dict[str, Any], attempt: int) -> tuple[RetryOrigin, float] | None:
        """Whether and how this client retries a failed attempt: (origin, delay ms)."""
        p = self.profile_of(rec)
        outcome = rec["outcome"]
        if attempt >= p.max_attempts or outcome in (
            Outcome.SUCCESS,
            Outcome.TOOL_SUCCESS,
            Outcome.TOOL_ERROR,
        ):
            return None
        rng = self.rng
        backoff = round(rng.uniform(50, 400) * attempt, 1)
        if outcome in UNCERTAIN and p.resend_uncertain:
            return (RetryOrigin.RESEND, backoff)
        status = rec["httpStatuses"][-1] if rec["httpStatuses"] else None
        if outcome == Outcome.HTTP_ERROR and p.reissue_http and status and status >= 429:
            after = rec.get("retryAfterMs")
            if after and rng.random() < p.honours_retry_after:
                return (RetryOrigin.REISSUE, round(after + rng.uniform(5, 300), 1))
            return (RetryOrigin.REISSUE, backoff)
        if outcome == Outcome.JSONRPC_ERROR and p.reissue_invalid_params:
            return (RetryOrigin.REISSUE, backoff)
        return None

    def profile_of(self, rec: dict[str, Any]) -> Profile:
        return _PROFILE_BY_CLIENT[rec["client"]]

    def mark_retry(
        self,
        rec: dict[str, Any],
        prev: dict[str, Any],
        origin: str,
        attempt: int,
        delay: float | None,
    ) -> None:
        rec["retryOrigin"] = origin
        if origin == RetryOrigin.RESEND:
            rec["jsonrpc"]["id"] = prev["jsonrpc"]["id"]
        if self.legacy:
            return
        after = prev.get("retryAfterMs")
        uncertain = prev["outcome"] in UNCERTAIN or (
            prev["outcome"] == Outcome.HTTP_ERROR and prev["httpStatuses"][-1] >= 500
        )
        rec.update(
            attempt=attempt,
            retryOf=prev["id"],
            retryDelayMs=delay if delay is not None else round(self.rng.uniform(5, 60), 1),
            retryAfterHonored=None if after is None else (delay or 0) >= after,
            unsafeRetry=rec.get("toolSafety") == "unsafe" and uncertain,
        )

    def server_request_answer(self, run: _Run, start: float) -> dict[str, Any]:
        rng = self.rng
        at = start + self.duration(20.0)
        rec = self.base(run, "response", at, round(rng.uniform(0.5, 5), 1))
        method = rng.choice(("elicitation/create", "sampling/createMessage", "roots/list"))
        rec.update(
            method=method,
            httpStatuses=[202],
            contentType=JSON,
            jsonrpc={"id": rng.randint(0, 9), "errorCode": None, "errorMessage": None},
        )
        self.set_tracker(rec, serverMethod=method, answerMs=self.duration(400.0))
        return rec

    def expired(self, run: _Run) -> abc.Generator[dict[str, Any], None, dict[str, Any]]:
        """The server forgot the session: the call gets 404, the proxy ends the session."""
        rng = self.rng
        tool = TOOLS[_weighted_index(rng, TOOL_WEIGHTS)]
        rec = self.request(
            run,
            run.clock,
            "tools/call",
            tool,
            outcome=Outcome.HTTP_ERROR,
            rpc_id=self.next_id(run),
            statuses=[],
        )
        rec["httpStatuses"] = [404]
        rec["jsonrpc"].update(errorCode=None, errorMessage=None)
        self.set_tracker(rec, retryAfterMs=None)
        run.clock += rec["durationMs"]
        yield rec
        end = self.base(run, "session_end", run.clock, None)
        self.set_tracker(end, endReason=EndReason.NOT_FOUND, sessionStats=self.stats(run))
        assert run.session is not None
        run.session.open = False
        run.clock += self.duration(40.0)
        yield end
        return rec

    def refused_delete(self, run: _Run) -> dict[str, Any]:
        end = self.base(run, "session_end", run.clock, round(self.rng.uniform(0.5, 3), 1))
        end["httpStatuses"] = [404]
        end["notes"] = ["not_ended:404"]
        self.set_tracker(end, endReason=EndReason.DELETE, sessionStats=self.stats(run))
        return end

    def close(self, run: _Run) -> Iterator[dict[str, Any]]:
        if run.session is not None and run.session.sid.startswith("c-"):
            return  # nothing to DELETE: the server keeps no session
        if self.rng.random() < run.profile.deletes and run.session is not None:
            end = self.base(run, "session_end", run.clock, round(self.rng.uniform(0.5, 4), 1))
            end["httpStatuses"] = [200]
            self.set_tracker(end, endReason=EndReason.DELETE, sessionStats=self.stats(run))
            run.session.open = False
            yield end
        # Otherwise abandoned: the proxy ends it at shutdown, if it is still running.

    def stats(self, run: _Run) -> dict[str, int]:
        assert run.session is not None
        return {
            "posts": run.session.posts,
            "getStreams": self.rng.randint(0, 2),
            "serverRequests": self.rng.randint(0, 2),
            "serverNotifications": 0,
        }

    def shutdown(self, run: _Run, at: float) -> dict[str, Any] | None:
        s = run.sessions[-1] if run.sessions else None
        if s is None or not s.open or s.sid.startswith("c-") or s.sid in self._ended:
            return None  # stand-ins have no session for the proxy to end
        self._ended.add(s.sid)
        run.session = s
        end = self.base(run, "session_end", at, None)
        self.set_tracker(end, endReason=EndReason.SHUTDOWN, sessionStats=self.stats(run))
        s.open = False
        return end


_PROFILE_BY_CLIENT = {p.client: p for p in PROFILES}


def _weighted[T](rng: random.Random, table: tuple[tuple[T, int], ...]) -> T:
    total = sum(w for _, w in table)
    r = rng.random() * total
    for value, w in table:
        r -= w
        if r < 0:
            return value
    return table[-1][0]


def _weighted_index(rng: random.Random, weights: tuple[int, ...]) -> int:
    r = rng.random() * sum(weights)
    for i, w in enumerate(weights):
        r -= w
        if r < 0:
            return i
    return len(weights) - 1


def _error(rng: random.Random, method: str) -> tuple[int, str]:
    table = ERRORS if method == "tools/call" else ERRORS[1:]
    total = sum(w for *_, w in table)
    r = rng.random() * total
    for code, message, w in table:
        r -= w
        if r < 0:
            return code, message
    return table[-1][0], table[-1][1]


def _tool_named(name: str) -> tuple[str, str, float]:
    for t in (*TOOLS, INPUT_TOOL):
        if t[0] == name:
            return t
    raise ValueError(name)


def _injected_action(rec: dict[str, Any]) -> str:
    if rec["outcome"] == Outcome.HTTP_ERROR:
        return f"status:{rec['httpStatuses'][-1]}"
    return {Outcome.STREAM_INCOMPLETE: "cut_stream", Outcome.NO_RESPONSE: "drop"}.get(
        rec["outcome"], "delay"
    )


def generate(
    n_records: int,
    *,
    seed: int = 0,
    scenario: str | None = None,
    inject_rate: float = 0.0,
    concurrency: int = 12,
    legacy: bool = False,
    start_epoch_ms: int = 1_796_050_800_000,
) -> Iterator[dict[str, Any]]:
    """Yield `n_records` records, and a few more for the sessions open at the end.

    Ids are unique but, as in the addon's files, not in order: given at arrival,
    written at the end of each exchange.

    `inject_rate` is the share of tools/call attempts a fault rule alters (`injected`);
    `legacy` leaves out the retry/session/fault fields.
    """
    gen = Generator(
        seed=seed,
        scenario=scenario,
        inject_rate=inject_rate,
        legacy=legacy,
        start_epoch_ms=start_epoch_ms,
    )
    rng = gen.rng
    weights = tuple(p.weight for p in PROFILES)
    heap: list[tuple[float, int, _Run, Iterator[dict[str, Any]], dict[str, Any]]] = []
    seq = itertools.count()
    runs: list[_Run] = []
    last_start = 0.0

    def spawn(at: float) -> None:
        profile = PROFILES[_weighted_index(rng, weights)]
        run = _Run(profile, rng.choice(SERVERS), at, host=rng.randrange(3))
        it = gen.run(run)
        runs.append(run)
        _push(run, it)

    ids = itertools.count(1)

    def _push(run: _Run, it: Iterator[dict[str, Any]]) -> None:
        try:
            rec = next(it)
        except StopIteration:
            return
        # As the addon does: an id when the POST arrives, the line when its exchange ends,
        # so ids are not in order in the file.
        rec["id"] = next(ids)
        start = rec.pop("_start")
        end = start + (rec["durationMs"] or 0.0)
        heapq.heappush(heap, (end, next(seq), run, it, rec))

    for _ in range(concurrency):
        last_start += rng.expovariate(1 / 200.0)
        spawn(last_start)
    written = 0
    clock = 0.0
    while heap and written < n_records:
        clock, _, run, it, rec = heapq.heappop(heap)
        written += 1
        yield rec
        before = len(heap)
        _push(run, it)
        if len(heap) == before:  # the run ended: start another in its place
            runs.remove(run)
            spawn(clock + rng.expovariate(1 / 200.0))
    for run in runs:  # the proxy stops: it ends the sessions still open
        end = gen.shutdown(run, clock)
        if end is not None:
            end.pop("_start")
            end["id"] = next(ids)
            yield end


def write(path: Path, records: Iterator[dict[str, Any]]) -> int:
    """Write records as JSONL (gzip when the name ends in .gz); return how many."""
    import gzip

    n = 0
    if path.name.endswith(".gz"):  # mtime 0: the same records give the same bytes
        f: Any = gzip.GzipFile(path, "wb", mtime=0)
    else:
        f = open(path, "wb")  # noqa: SIM115 - closed below, with the gzip one
    with f:
        buf: list[bytes] = []
        for rec in records:
            buf.append(orjson.dumps(rec))
            n += 1
            if len(buf) >= 4096:
                f.write(b"\n".join(buf) + b"\n")
                buf.clear()
        if buf:
            f.write(b"\n".join(buf) + b"\n")
    return n


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path)
    parser.add_argument("-n", "--records", type=int, default=1000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--scenario", default=None)
    parser.add_argument("--inject-rate", type=float, default=0.0)
    parser.add_argument("--legacy", action="store_true", help="leave out the tracker fields")
    args = parser.parse_args(argv)
    n = write(
        args.out,
        generate(
            args.records,
            seed=args.seed,
            scenario=args.scenario,
            inject_rate=args.inject_rate,
            legacy=args.legacy,
        ),
    )
    print(f"{args.out}: {n} records")


if __name__ == "__main__":
    main()
