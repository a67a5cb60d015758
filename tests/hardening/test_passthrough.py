"""Fuzzed pass-through, part 2: generated exchanges through a real mitmdump (issue 6).

A scripted upstream answers each POST with a generated reply: any status, headers that
matter (and a few that usually don't: duplicated `Set-Cookie`, odd casing, secrets),
JSON bodies valid or not (deep, large, invalid UTF-8, gzip), SSE streams cut into
arbitrary pieces (chunked, length-framed, or read-until-close), batches, notifications
and bodies that are not JSON-RPC at all. A raw-socket client sends them through
`mitmdump -s addon/mcp_layers.py` from several threads at once, then checks:

- the upstream received exactly what the client sent (method, path, body, end-to-end
  headers but `Host`, which reverse mode rewrites);
- the client received exactly what the upstream sent: status, every end-to-end header
  in order, the de-framed body byte for byte, complete;
- SSE timing order: pieces arrive in order, and on slow streams each piece reaches the
  client before the upstream sends the next one (nothing is held back);
- the recording: exactly one record per JSON-RPC request (by its unique id), one per
  notification POST, none for the rest, every line whole.

The cases come from a seeded generator, so a failure names a case that can be replayed.
"""

from __future__ import annotations

import concurrent.futures
import gzip
import itertools
import json
import random
import threading
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from hardening_kit import figures
from mcp_layers_support.harness import Proxy
from mcp_layers_support.messages import jbytes, sse_block, tool_result
from mcp_layers_support.rawhttp import HOP_BY_HOP, Got, post_once
from mcp_layers_support.recordings import check_dir
from mcp_layers_support.scripted_upstream import Received, Reply, ScriptedUpstream

pytestmark = pytest.mark.e2e

SEED = 20260601
CASES = 300
WORKERS = 6
SLOW_GAP_S = 0.3
CASE_HEADER = "X-Case"


@dataclass
class Case:
    n: int
    kind: str  # request | batch | notification | foreign
    body: bytes
    headers: list[tuple[str, str]]
    reply: Reply
    rids: list[str] = field(default_factory=list)
    notification: str | None = None
    slow: bool = False
    sse: bool = False


def _messy_text(rng: random.Random, size: int) -> str:
    alphabet = 'abc xyz 0123 é 漢 🎉 \\ " \n\t\u2028'
    return "".join(rng.choice(alphabet) for _ in range(size))


def _answer(rng: random.Random, rid: str) -> bytes:
    """A JSON-RPC answer to `rid`: mostly well-formed, sometimes not at all."""
    pick = rng.randrange(12)
    if pick <= 4:
        return jbytes(tool_result(rid, _messy_text(rng, rng.randrange(0, 200)), rng.random() < 0.2))
    if pick == 5:
        return jbytes({"jsonrpc": "2.0", "id": rid, "error": {"code": -32602, "message": "bad",
                                                               "data": {"x": [1, 2]}}})  # fmt: skip
    if pick == 6:
        depth = rng.choice([10, 300, 1000])
        return b'{"jsonrpc":"2.0","id":"' + rid.encode() + b'","result":{"d":' + b"[" * depth + b"]" * depth + b"}}"  # fmt: skip
    if pick == 7:
        return b'{"jsonrpc":"2.0","id":"' + rid.encode() + b'","result":{"s":"\xff\xfe\xc3("}}'
    if pick == 8:
        big = rng.randrange(200_000, 2_000_000)
        return jbytes(tool_result(rid, "x" * big))
    if pick == 9:
        return jbytes({"jsonrpc": "2.0", "id": rid + "-wrong", "result": {}})
    if pick == 10:
        return rng.randbytes(rng.randrange(0, 300))
    return b"{unclosed"


def _sse_stream(rng: random.Random, rid: str, answer: bytes) -> bytes:
    out = bytearray()
    if rng.random() < 0.3:
        out += b"id: 1\ndata: \n\n"  # priming (resumable)
    for k in range(rng.randrange(0, 4)):
        progress = {"jsonrpc": "2.0", "method": "notifications/progress",
                    "params": {"progressToken": rid, "progress": k}}  # fmt: skip
        out += sse_block(progress)
    if rng.random() < 0.2:
        out += b": keep-alive\r\n\r\n"
    if rng.random() < 0.9:
        eol = rng.choice([b"\n", b"\r\n"])
        out += b"event: message" + eol + b"data: " + answer.replace(b"\n", b" ") + eol + eol
    return bytes(out)


def _pieces(rng: random.Random, data: bytes, slow: bool) -> list[tuple[float, bytes]]:
    """`data` cut at arbitrary points (not event boundaries), each piece one write."""
    if not data:
        return []
    cuts = sorted({rng.randrange(1, len(data) + 1) for _ in range(rng.randrange(1, 8))})
    edges = [0, *[c for c in cuts if c < len(data)], len(data)]
    if slow:
        edges = [0, *sorted(rng.sample(range(1, len(data)), 2)), len(data)]
    pieces = [data[a:b] for a, b in itertools.pairwise(edges)]
    gap = SLOW_GAP_S if slow else 0.002
    return [(gap if i else 0.0, p) for i, p in enumerate(pieces)]


def _reply_headers(rng: random.Random, ctype: str | None) -> list[tuple[str, str]]:
    headers: list[tuple[str, str]] = []
    if ctype is not None:
        headers.append((rng.choice(["Content-Type", "content-type", "CONTENT-TYPE"]), ctype))
    extras = [
        ("Set-Cookie", "sid=abc; HttpOnly"),
        ("Set-Cookie", "theme=dark"),
        ("Cache-Control", "no-cache, no-transform"),
        ("X-Request-Id", f"req-{rng.randrange(10**9)}"),
        ("WWW-Authenticate", 'Bearer resource_metadata="https://a.example/.well-known/x"'),
        ("Mcp-Session-Id", f"sess-{rng.randrange(5)}"),
        ("Retry-After", str(rng.randrange(5))),
        ("x-MiXeD-cAsE", "Value With  Spaces"),
        ("Vary", "Accept-Encoding"),
    ]
    for name, value in extras:
        if rng.random() < 0.3:
            headers.append((name, value))
    return headers


def build_cases(seed: int = SEED, count: int = CASES) -> list[Case]:
    rng = random.Random(seed)
    cases: list[Case] = []
    for n in range(count):
        rid = f"pt-{n}"
        session = rng.choice([None, None, "sess-1", "sess-2"])
        headers = [
            ("Content-Type", "application/json"),
            ("Accept", "application/json, text/event-stream"),
            ("User-Agent", rng.choice(["passthrough/1.0", "claude-code/2.1 (cli)"])),
            (CASE_HEADER, str(n)),
        ]
        if session:
            headers.append(("Mcp-Session-Id", session))
        if rng.random() < 0.3:
            headers.append(("Authorization", f"Bearer tok-{rng.randrange(10**12)}"))
        roll = rng.random()
        if roll < 0.70:
            kind, rids = "request", [rid]
            method = rng.choice(
                ["tools/call", "tools/call", "tools/list", "ping", "resources/read"]
            )
            params: dict[str, Any] = {"name": "echo", "arguments": {"text": _messy_text(rng, 30)}}
            body = jbytes({"jsonrpc": "2.0", "id": rid, "method": method, "params": params})
        elif roll < 0.78:
            kind, rids = "batch", [f"{rid}-a", f"{rid}-b"]
            body = jbytes([{"jsonrpc": "2.0", "id": r, "method": "ping"} for r in rids])
        elif roll < 0.88:
            kind, rids = "notification", []
            body = jbytes({"jsonrpc": "2.0", "method": f"notifications/pt-{n}"})
        else:
            kind, rids = "foreign", []
            body = rng.choice([rng.randbytes(rng.randrange(0, 200)), b'{"not":"jsonrpc"}', b""])
        case = Case(n, kind, body, headers, Reply(), rids)
        if kind == "notification":
            case.notification = f"notifications/pt-{n}"
        case.reply = _reply_for(rng, case)
        cases.append(case)
    return cases


def _reply_for(rng: random.Random, case: Case) -> Reply:
    status = rng.choice([200] * 12 + [202, 400, 404, 429, 500, 503])
    if case.kind == "notification":
        status = rng.choice([202, 202, 200, 204, 400])
    if status == 204:
        return Reply(204, _reply_headers(rng, None), b"", label=f"case-{case.n}")
    rid = case.rids[0] if case.rids else "none"
    answer = _answer(rng, rid)
    if case.kind == "batch":
        answer = jbytes([tool_result(r) for r in reversed(case.rids)])
    transport = rng.choice(["json", "json", "sse", "sse", "sse"])
    if transport == "sse":
        case.sse = True
        case.slow = rng.random() < 0.06
        stream = _sse_stream(rng, rid, answer)
        framing = rng.choice(["chunked", "chunked", "length", "close"])
        headers = _reply_headers(rng, "text/event-stream")
        if rng.random() < 0.1:
            stream = gzip.compress(stream)
            headers.append(("Content-Encoding", "gzip"))
        return Reply(status, headers, chunks=_pieces(rng, stream, case.slow), framing=framing,
                     label=f"case-{case.n}")  # fmt: skip
    ctype = rng.choice(["application/json", "application/json; charset=utf-8", None, "text/plain"])
    headers = _reply_headers(rng, ctype)
    if rng.random() < 0.1:
        answer = gzip.compress(answer)
        headers.append(("Content-Encoding", "gzip"))
    framing = rng.choice(["length", "length", "chunked", "close"])
    if framing == "chunked":
        return Reply(status, headers, chunks=_pieces(rng, answer, False), framing="chunked",
                     label=f"case-{case.n}")  # fmt: skip
    return Reply(status, headers, answer, framing=framing, label=f"case-{case.n}")


# -- the run ---------------------------------------------------------------------------------


@dataclass
class Outcome:
    case: Case
    got: Got
    received: Received | None = None
    sent_index: int | None = None


def _end_to_end(
    headers: list[tuple[str, str]], drop: frozenset[str] = frozenset()
) -> list[tuple[str, str]]:
    return [
        (k.lower(), v.strip())
        for k, v in headers
        if k.lower() not in HOP_BY_HOP and k.lower() not in drop
    ]


@pytest.fixture(scope="module")
def run(
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[list[Outcome], ScriptedUpstream, Proxy]]:
    cases = build_cases()
    by_case = {str(c.n): c.reply for c in cases}

    def respond(request: Received) -> Reply:
        return by_case[request.header(CASE_HEADER) or ""]

    work = tmp_path_factory.mktemp("passthrough")
    with ScriptedUpstream(responder=respond) as upstream:
        proxy = Proxy(upstream.port, work, scenario="passthrough")
        with proxy:
            lock = threading.Lock()
            outcomes: list[Outcome] = []

            def one(case: Case) -> None:
                got = post_once(proxy.port, case.body, case.headers)
                with lock:
                    outcomes.append(Outcome(case, got))

            with concurrent.futures.ThreadPoolExecutor(WORKERS) as pool:
                list(pool.map(one, cases))
            upstream.wait_sent(len(cases), timeout=30)
        # The proxy has stopped (SIGTERM): everything it will ever write is on disk.
        by_number = {o.case.n: o for o in outcomes}
        for index, sent in enumerate(upstream.sent):
            received = upstream.received[sent.request]
            outcome = by_number[int(received.header(CASE_HEADER) or -1)]
            outcome.received, outcome.sent_index = received, index
        yield sorted(outcomes, key=lambda o: o.case.n), upstream, proxy


def test_every_byte_passes_unchanged(run: tuple[list[Outcome], ScriptedUpstream, Proxy]) -> None:
    outcomes, upstream, _proxy = run
    problems: list[str] = []
    body_bytes = header_bytes = request_bytes = sse_cases = slow_checked = pieces = 0
    for o in outcomes:
        case, got = o.case, o.got
        if o.received is None or o.sent_index is None:
            problems.append(f"case {case.n}: never reached the upstream ({got})")
            continue
        sent = upstream.sent[o.sent_index]
        # Client -> upstream: what the client sent, but the Host reverse mode rewrites.
        if (
            o.received.body != case.body
            or o.received.method != "POST"
            or o.received.target != "/mcp"
        ):
            problems.append(f"case {case.n}: the request changed on its way")
        if _end_to_end(o.received.headers, frozenset({"host"})) != _end_to_end(case.headers):
            problems.append(f"case {case.n}: request headers changed: {o.received.headers}")
        request_bytes += len(case.body)
        # Upstream -> client.
        if got.error or not got.complete:
            problems.append(f"case {case.n}: incomplete at the client: {got.error}")
            continue
        if got.status != sent.status:
            problems.append(f"case {case.n}: status {got.status} != {sent.status}")
        if got.end_to_end_headers() != _end_to_end(sent.headers):
            problems.append(f"case {case.n}: headers {got.headers} != {sent.headers}")
        if got.body != bytes(sent.payload):
            problems.append(f"case {case.n}: body differs ({len(got.body)} vs {len(sent.payload)})")
        body_bytes += len(got.body)
        header_bytes += sum(len(k) + len(v) for k, v in got.headers)
        if case.sse:
            sse_cases += 1
            pieces += len(sent.pieces)
            ends = [sum(len(p) for p in sent.pieces[: i + 1]) for i in range(len(sent.pieces))]
            arrivals = [got.arrived(e) for e in ends]
            if None in arrivals or arrivals != sorted(arrivals):  # type: ignore[type-var]
                problems.append(f"case {case.n}: pieces out of order {arrivals}")
            elif case.slow and sent.status and 200 <= sent.status < 300:
                slow_checked += 1
                for i in range(len(ends) - 1):
                    if not arrivals[i] < sent.times[i + 1]:  # type: ignore[operator]
                        problems.append(f"case {case.n}: piece {i} held back until the next")
    line = figures(
        "passthrough-bytes",
        cases=len(outcomes),
        request_bytes_compared=request_bytes,
        response_body_bytes_compared=body_bytes,
        response_header_bytes_compared=header_bytes,
        sse_streams=sse_cases,
        sse_pieces=pieces,
        slow_streams_timed=slow_checked,
        problems=len(problems),
    )
    assert not problems, line + "\n" + "\n".join(problems[:20])
    assert slow_checked >= 3, line


def test_exactly_one_record_per_request(run: tuple[list[Outcome], ScriptedUpstream, Proxy]) -> None:
    outcomes, _upstream, proxy = run
    files = check_dir(proxy.record_dir)
    records = [r for f in files for r in f.records]
    torn = [(f.path.name, f.bad_lines) for f in files if f.bad_lines or not f.ends_whole]
    by_id = Counter(r["jsonrpc"]["id"] for r in records if r["kind"] == "request" and r["jsonrpc"])
    by_method = Counter(r["method"] for r in records if r["kind"] == "notification")
    expected_ids = [rid for o in outcomes for rid in o.case.rids]
    expected_notes = [o.case.notification for o in outcomes if o.case.notification]
    missing = [rid for rid in expected_ids if by_id[rid] == 0]
    doubled = [rid for rid, n in by_id.items() if n > 1]
    strays = [rid for rid in by_id if rid not in set(expected_ids)]
    kinds = Counter(r["kind"] for r in records)
    outcomes_seen = Counter(r["outcome"] for r in records if r["kind"] == "request")
    line = figures(
        "passthrough-records",
        requests_expected=len(expected_ids),
        request_records=kinds["request"],
        notifications_expected=len(expected_notes),
        notification_records=kinds["notification"],
        foreign_posts=sum(o.case.kind == "foreign" for o in outcomes),
        session_end_records=kinds["session_end"],
        missing=len(missing),
        doubled=len(doubled),
        strays=len(strays),
        torn_lines=len(torn),
    )
    figures("passthrough-outcomes", **dict(sorted(outcomes_seen.items())))
    assert not torn, line
    assert not missing and not doubled and not strays, (
        f"{line}\n{missing[:10]} {doubled[:10]} {strays[:10]}"
    )
    assert kinds["request"] == len(expected_ids), line
    assert sorted(by_method.elements()) == sorted(expected_notes), line
    assert set(kinds) <= {"request", "notification", "session_end"}, line
    # Session ends are the proxy's own (shutdown) for the sessions the clients named.
    assert {r["endReason"] for r in records if r["kind"] == "session_end"} <= {
        "shutdown",
        "not_found",
    }
    json.dumps(records)  # every record is plain JSON
    assert len(outcomes) == CASES


def test_cases_are_reproducible_and_varied() -> None:
    cases = build_cases()
    again = build_cases()
    assert [(c.body, c.reply.status) for c in cases] == [(c.body, c.reply.status) for c in again]
    kinds = Counter(c.kind for c in cases)
    framings = Counter(c.reply.resolved_framing() for c in cases)
    assert all(kinds[k] > 5 for k in ("request", "batch", "notification", "foreign")), kinds
    assert all(framings[f] > 10 for f in ("length", "chunked", "close")), framings
