"""The lab's small parts, without processes: faults, client entries, trace parsing, cells."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp_layers_core.faults import parse_inline, preset
from mcp_layers_lab import clients, matrix, presets
from mcp_layers_lab.run import Plan, RunResult, outbound, scenario_name


def test_every_fault_is_valid_addon_configuration() -> None:
    for f in presets.FAULTS:
        assert f.sets(), f.name
        if f.preset is not None:
            preset(f.preset)  # raises for an unknown preset
        if f.rule is not None:
            rule = parse_inline(f.rule, source=f.name)
            assert rule.match.method == (f.method,)


def test_the_issue_faults_are_all_there() -> None:
    names = {f.name for f in presets.FAULTS}
    assert {
        "none",
        "initialize_503",
        "tools_list_503",
        "tools_call_503",
        "tools_call_429",
        "connection_dropped",
        "jsonrpc_error",
        "tool_error",
        "session_404",
        "stream_cut",
    } <= names


def test_plan_runs_the_second_script_only_where_the_model_sees_an_error() -> None:
    plan = Plan(
        ("py-sdk",), ("none", "initialize_503", "tool_error"), ("once", "again_after_error")
    )
    assert list(plan.runs()) == [
        ("py-sdk", "none", "once"),
        ("py-sdk", "initialize_503", "once"),
        ("py-sdk", "tool_error", "once"),
        ("py-sdk", "tool_error", "again_after_error"),
    ]
    assert scenario_name("tool_error", "again_after_error") == "tool_error+again"


@pytest.mark.parametrize("entry", clients.CLIENTS, ids=lambda c: c.name)
def test_client_entries_point_only_at_loopback(entry: clients.Client, tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    setup = clients.Setup(
        home=home,
        work=tmp_path,
        mcp_url="http://127.0.0.1:1111/mcp",
        model_url="http://127.0.0.1:2222",
        prefix=tmp_path / "prefix",
        logs=tmp_path,
    )
    launch = entry.launch(setup)
    env = clients.base_env(home) | launch.env
    assert "PROMPT" not in env and setup.prompt in launch.argv
    written = " ".join(p.read_text() for p in home.rglob("*") if p.is_file())
    everything = " ".join([*launch.argv, *env.values(), written])
    for url in ("http://", "https://"):
        for part in everything.split(url)[1:]:
            host = part.split("/")[0].split(":")[0].strip('"')
            # The opencode schema URL is a JSON-schema name, never fetched.
            assert host in ("127.0.0.1", "localhost") or part.startswith("opencode.ai/config"), part
    # Qwen Code, Continue and the frameworks' MCP clients announce a fixed clientInfo
    # version, not their own.
    fixed = {
        "qwen-code": "0.0.1",
        "continue": "1.0.0",
        "vercel-ai": "1.0.0",
        "ax-ts": "1.0.0",
        "ax-py": "1.0.0",
        "ax-ts-modern": "1.0.0",
        "ax-py-modern": "1.0.0",
        "openai-agents-js": "1.0.0",
        # The Python SDK 1.x's default clientInfo (`mcp` 0.1.0), whatever its version.
        "langchain-mcp": "0.1.0",
        # Cline's MCP client is its SDK core's, `@cline/core`, whose version is unset.
        "cline": "0.0.0",
    }
    assert entry.client_info.endswith("@" + fixed.get(entry.name, entry.version))
    # No key of the caller's leaks in: the environment is built, not inherited.
    assert "ANTHROPIC_API_KEY" not in clients.base_env(home)


def test_client_pins_are_exact_versions() -> None:
    for c in clients.CLIENTS:
        assert c.version.count(".") == 2 and all(p.isdigit() for p in c.version.split("."))


def test_outbound_reads_strace_connects(tmp_path: Path) -> None:
    trace = tmp_path / "connect.trace"
    trace.write_text(
        "101 connect(3, {sa_family=AF_INET, sin_port=htons(8080), "
        'sin_addr=inet_addr("127.0.0.1")}, 16) = 0\n'
        '101 connect(4, {sa_family=AF_UNIX, sun_path="/var/run/nscd/socket"}, 110) = -1 ENOENT\n'
        "102 connect(5, {sa_family=AF_INET6, sin6_port=htons(443), sin6_flowinfo=htonl(0), "
        'inet_pton(AF_INET6, "::1", &sin6_addr), sin6_scope_id=0}, 28) = 0\n'
        "102 connect(6, {sa_family=AF_INET, sin_port=htons(443), "
        'sin_addr=inet_addr("140.82.112.3")}, 16) = -1 ENETUNREACH (Network is unreachable)\n'
        "103 connect(7, {sa_family=AF_INET6, sin6_port=htons(53), sin6_flowinfo=htonl(0), "
        'inet_pton(AF_INET6, "2001:4860:4860::8888", &sin6_addr), sin6_scope_id=0}, 28 '
        "<unfinished ...>\n"
        "104 connect(8, {sa_family=AF_INET6, sin6_port=htons(80), sin6_flowinfo=htonl(0), "
        'inet_pton(AF_INET6, "::ffff:127.0.0.1", &sin6_addr), sin6_scope_id=0}, 28) = 0\n'
        "102 connect(9, {sa_family=AF_INET, sin_port=htons(443), "
        'sin_addr=inet_addr("140.82.112.3")}, 16) = -1 ENETUNREACH\n'
    )
    assert outbound(trace) == ["140.82.112.3:443", "[2001:4860:4860::8888]:53"]
    assert outbound(tmp_path / "absent") == []


@pytest.mark.parametrize(
    ("ms", "name"),
    [
        (3.0, "<0.15 s"),
        (92.0, "<0.15 s"),  # the slowest re-send of a quiet pass
        (195.0, "0.15–0.4 s"),  # the SDK back-offs and fast-agent's reconnect: 195–290 ms
        (290.0, "0.15–0.4 s"),
        (502.0, "0.4–1 s"),  # resumptions of a cut stream: 502–722 ms, 894 under load
        (894.0, "0.4–1 s"),
        (1000.0, "1–10 s"),
        (2001.0, "1–10 s"),  # a 2 s Retry-After
        (61000.0, "≥10 s"),
        (None, "?"),
    ],
)
def test_buckets(ms: float | None, name: str) -> None:
    assert matrix.bucket(ms) == name


@pytest.mark.parametrize(
    ("ms", "name"), [(47.0, "<10 s"), (1829.0, "<10 s"), (4000.0, "<10 s"), (61000.0, "≥10 s")]
)
def test_a_model_re_call_lands_in_a_coarse_bucket(ms: float, name: str) -> None:
    # opencode's re-calls took 47 ms to 1.6 s, Kilo Code's 288 ms to 1.8 s: one cell.
    assert matrix.bucket(ms, matrix.MODEL_BUCKETS) == name


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("MCP error -32603: Internal error", "-32603"),
        ("Injected tool failure", "isError"),
        ("Streamable HTTP error: Error POSTing to endpoint (HTTP 503)", "503"),
        ("MCPError: Session terminated", "session"),
        ("", ""),
    ],
)
def test_hints(text: str, key: str) -> None:
    assert matrix.hint(text) == key


def test_printed_verdicts(tmp_path: Path) -> None:
    out = tmp_path / "client.out"
    out.write_text('{"type":"result","result":"LAB-DONE results=error,ok"}\n')
    assert matrix.printed_verdicts(out) == ["error", "ok"]
    out.write_text("LAB-DONE results=none\n")
    assert matrix.printed_verdicts(out) == []
    out.write_text("nothing\n")
    assert matrix.printed_verdicts(out) is None


def _record(id_: int, method: str, outcome: str, ts: str, **kw: object) -> dict[str, object]:
    return {
        "v": 1,
        "id": id_,
        "kind": "request",
        "ts": ts,
        "durationMs": 5.0,
        "client": "lab-py-sdk@2.3.0",
        "method": method,
        "outcome": outcome,
        "retryOrigin": "none",
        "attempt": 1,
        "retryOf": None,
        "retryDelayMs": None,
        "retryAfterHonored": None,
        "injected": None,
        **kw,
    }


def test_cell_from_a_recording(tmp_path: Path) -> None:
    """A model-driven re-issue after an injected 503: every column from the files."""
    records = [
        _record(1, "initialize", "SUCCESS", "2026-11-30T10:00:00.000Z"),
        _record(
            2,
            "tools/call",
            "HTTP_ERROR",
            "2026-11-30T10:00:01.000Z",
            injected={"rule": "x", "action": "http_status"},
        ),
        _record(
            3,
            "tools/call",
            "TOOL_SUCCESS",
            "2026-11-30T10:00:01.200Z",
            retryOrigin="reissue",
            attempt=2,
            retryOf=2,
            retryDelayMs=250.0,
        ),
    ]
    (tmp_path / "mcp-1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    t0 = 1796032800.0  # 2026-11-30T10:00:00Z
    log = [
        {"ts": t0 + 0.5, "tool": "echo", "results": [], "reply": "tool"},
        {
            "ts": t0 + 1.1,
            "tool": "echo",
            "reply": "tool",
            "results": [{"verdict": "error", "text": "HTTP 503"}],
        },
        {
            "ts": t0 + 1.3,
            "tool": "echo",
            "reply": "text",
            "results": [
                {"verdict": "error", "text": "HTTP 503"},
                {"verdict": "ok", "text": "echo: hello"},
            ],
        },
    ]
    (tmp_path / "model.log").write_text("".join(json.dumps(e) + "\n" for e in log))
    (tmp_path / "client.out").write_text("LAB-DONE results=error,ok\n")
    run = RunResult(
        "py-sdk",
        "2.3.0",
        "tools_call_503",
        "again_after_error",
        "tools_call_503+again",
        str(tmp_path),
        exit_code=0,
    )
    cell = matrix.build_cell(run)
    assert (cell.retried, cell.how, cell.after, cell.attempts_text) == (
        "tools/call",
        "reissue (model)",
        "<10 s",  # a model's re-call: coarse buckets
        "2",
    )
    assert not cell.reinit and cell.fired == 1
    assert cell.model_text == "error (503) → ok"
    assert cell.printed_text == "error,ok" and cell.agrees and not cell.notes
    text = matrix.render([cell], {"Node": "v20"}, "2026-11-30")
    assert (
        "| `tools_call_503` | py-sdk | tools/call | reissue (model) | <10 s | 2 | no "
        "| error (503) → ok | error,ok |"
    ) in text
    assert "2026-11-30" in text and "2.3.0" in text


def _stateless_run(tmp_path: Path, fault: str, violations: list[str]) -> RunResult:
    """A Copilot-CLI-like run: the stateless protocol, JSON answers, no fault hit."""
    client = {"client": "copilot-cli@1.0.102"}
    records = [
        _record(1, "server/discover", "SUCCESS", "2026-12-01T10:00:00.000Z", **client),
        _record(2, "tools/list", "SUCCESS", "2026-12-01T10:00:00.100Z", **client),
        _record(
            3,
            "tools/call",
            "TOOL_SUCCESS",
            "2026-12-01T10:00:00.200Z",
            contentType="application/json",
            **client,
        ),
    ]
    (tmp_path / "mcp-1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    (tmp_path / "client.out").write_text("LAB-DONE results=ok\n")
    entry = {"tool": "echo-echo", "reply": "text", "results": [{"verdict": "ok", "text": "x"}]}
    (tmp_path / "model.log").write_text(json.dumps(entry) + "\n")
    return RunResult(
        "copilot",
        "1.0.102",
        fault,
        "once",
        fault,
        str(tmp_path),
        exit_code=0,
        violations=violations,
    )


@pytest.mark.parametrize(
    ("fault", "why"),
    [
        ("initialize_503", "n/a: never sends `initialize`"),
        ("stream_cut", "n/a: `tools/call` answered with JSON, no SSE to cut"),
    ],
)
def test_a_fault_with_nothing_to_act_on_is_na_not_broken(
    tmp_path: Path, fault: str, why: str
) -> None:
    cell = matrix.build_cell(_stateless_run(tmp_path, fault, []))
    assert cell.fired == 0 and cell.retried == why
    assert not cell.broken, cell.notes


def test_a_fault_that_had_its_target_and_never_fired_is_broken(tmp_path: Path) -> None:
    cell = matrix.build_cell(_stateless_run(tmp_path, "tools_call_503", []))
    assert cell.broken and "the fault never fired" in cell.notes


def test_a_known_lookup_is_listed_and_other_connects_still_break(tmp_path: Path) -> None:
    assert clients.client("continue").known_lookup is not None
    run = _stateless_run(tmp_path, "none", ["10.255.255.53:53"])
    cell = matrix.build_cell(run)
    # copilot has no known lookup: any outbound connect breaks its run.
    assert cell.broken and not cell.known_lookup
    known = matrix.build_cell(
        RunResult(**{**run.__dict__, "client": "continue", "version": "1.5.47"})
    )
    assert known.known_lookup
    assert not any("OUTBOUND" in n for n in known.notes)
    text = matrix.render([known], {}, "2026-12-01")
    assert "Known name lookups" in text and "api.continue.dev" in text
    leaking = RunResult(**{**run.__dict__, "client": "continue", "violations": ["1.2.3.4:443"]})
    assert any("OUTBOUND" in n for n in matrix.build_cell(leaking).notes)


def test_a_get_stream_fault_on_a_client_without_one_is_not_applicable() -> None:
    # Stateless clients (2026-07-28) open no standby GET stream: nothing to cut or refuse.
    requests = [_record(1, "tools/call", "TOOL_SUCCESS", "2026-12-01T10:00:00.000Z")]
    for name in ("get_405", "idle_cut", "graceful_close"):
        fault = presets.fault(name)
        assert matrix.inapplicable(fault, requests) == "opens no standby GET stream"
        stream = {"v": 1, "id": 2, "kind": "stream", "ts": "2026-12-01T10:00:00.100Z"}
        assert matrix.inapplicable(fault, [*requests, stream]) is None


def test_an_idle_fault_on_streams_closed_before_the_silence_is_not_applicable() -> None:
    # LangChain's adapters open a session per operation: each GET stream ends with its
    # session, well before the middlebox's 3 s of silence.
    requests = [_record(1, "tools/call", "TOOL_SUCCESS", "2026-12-01T10:00:00.000Z")]
    short = {"v": 1, "id": 2, "kind": "stream", "ts": "2026-12-01T10:00:00.100Z"}
    for name in ("idle_cut", "graceful_close"):
        fault = presets.fault(name)
        assert fault.idle_ms == 3000  # the preset's own rule
        got = matrix.inapplicable(fault, [*requests, {**short, "durationMs": 354.7}])
        assert got == "closes its GET streams before 3 s of silence"
        assert matrix.inapplicable(fault, [*requests, {**short, "durationMs": 9000}]) is None
    assert presets.fault("get_405").idle_ms is None


def test_resume_refused_on_a_client_answered_in_json_is_not_applicable() -> None:
    # Stateless clients get JSON answers: no stream to cut, so nothing to resume.
    call = _record(1, "tools/call", "TOOL_SUCCESS", "2026-12-01T10:00:00.000Z")
    call["contentType"] = "application/json"
    assert matrix.inapplicable(presets.fault("resume_refused"), [call]) == (
        "`tools/call` answered with JSON, no SSE to cut"
    )


def test_a_reopened_listen_stream_lands_in_a_coarse_bucket(tmp_path: Path) -> None:
    # fast-agent reissues `subscriptions/listen` with the model's re-call: 105 to 296 ms.
    run = RunResult("fast-agent", "0.10.48", "connection_dropped", "again_after_error", "x", "")
    for ms in (105.0, 296.0):
        retries = [
            matrix.Retry("tools/call", "model", 2, 109.0, True, None),
            matrix.Retry("subscriptions/listen", "reissue", 2, ms, False, None, subscription=True),
        ]
        assert matrix.Cell(run, retries=retries).after == "<10 s"
    own = [matrix.Retry("tools/call", "reissue", 2, 105.0, False, None)]
    assert matrix.Cell(run, retries=own).after == "<0.15 s"  # a call's own: fine-grained


@pytest.mark.parametrize(
    ("origin", "model", "ms", "after"),
    [
        ("reinit", False, 80.0, "<10 s"),  # Qwen Code's re-inits: 80 ms, then 226 ms
        ("reinit", False, 226.0, "<10 s"),
        ("reissue", True, 1829.0, "<10 s"),  # a model's re-call
        ("resend", False, 250.0, "0.15–0.4 s"),  # a client's own back-off stays fine-grained
        ("reissue", False, 92.0, "<0.15 s"),
    ],
)
def test_the_after_column_buckets_by_what_the_delay_waits_on(
    tmp_path: Path, origin: str, model: bool, ms: float, after: str
) -> None:
    run = RunResult("py-sdk", "2.3.0", "session_404", "once", "session_404", str(tmp_path))
    cell = matrix.Cell(run, retries=[matrix.Retry("tools/call", origin, 2, ms, model, None)])
    assert cell.after == after


def _cut_call(**kw: object) -> dict[str, object]:
    """A `tools/call` whose SSE answer (with event ids, `retry: 500`) the proxy cut 7 ms in;
    what follows depends on whether the client resumes."""
    return _record(
        4,
        "tools/call",
        kw.pop("outcome", "TOOL_SUCCESS"),
        "2026-12-02T10:00:00.000Z",
        session="s-1",
        eventIds=True,
        retryMs=500,
        streamClosedMs=7.0,
        durationMs=520.0,
        injected={"rule": "errors.stream_cut", "action": "sse_truncate"},
        **kw,
    )


def _get(rid: int, ts: str, status: int, last_event_id: bool = True) -> dict[str, object]:
    headers = ["accept", "mcp-protocol-version", "mcp-session-id"]
    return {
        "v": 1,
        "id": rid,
        "kind": "stream",
        "ts": ts,
        "durationMs": 4.0,
        "session": "s-1",
        "client": "lab-py-sdk@2.3.0",
        "httpStatuses": [status],
        "requestHeaders": sorted([*headers, "last-event-id"] if last_event_id else headers),
        "eventIds": status == 200,
        "sse": {"events": 2, "final": True, "end": "complete", "resumed": True}
        if status == 200
        else None,
        "notes": [],
    }


def test_a_resumed_stream_is_a_retry_of_its_method() -> None:
    call = _cut_call(sse={"events": 1, "final": True, "end": "complete", "resumed": True})
    got = matrix.resumptions([call, _get(5, "2026-12-02T10:00:00.510Z", 200)])
    assert got == [matrix.Retry("tools/call", "resume", 2, 503.0, False, None)]


def test_a_refused_resumption_says_so_and_the_next_waits_from_the_refusal() -> None:
    call = _cut_call(
        outcome="STREAM_INCOMPLETE", sse={"events": 1, "final": False, "end": "complete"}
    )
    got = matrix.resumptions(
        [call, _get(5, "2026-12-02T10:00:00.510Z", 404), _get(6, "2026-12-02T10:00:01.014Z", 404)]
    )
    assert [(r.method, r.origin, r.delay_ms) for r in got] == [
        ("tools/call", "resume refused (404)", 503.0),
        ("tools/call", "resume refused (404)", 500.0),  # from the end of the first GET
    ]


def test_a_get_without_last_event_id_is_no_resumption() -> None:
    call = _cut_call(sse={"events": 1, "final": False, "end": "complete"})
    assert matrix.resumptions([call, _get(5, "2026-12-02T10:00:00.510Z", 200, False)]) == []


def test_the_stream_cut_cell_of_a_client_that_resumes(tmp_path: Path) -> None:
    """The lab's server is resumable: a client that resumes gets its answer, and the row
    says it retried the call by resuming, not that it did nothing."""
    call = _cut_call(
        sse={"events": 1, "final": True, "end": "complete", "resumed": True},
        client="lab-py-sdk@2.3.0",
    )
    records = [call, _get(5, "2026-12-02T10:00:00.510Z", 200)]
    (tmp_path / "mcp-1.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    entry = {"tool": "echo", "reply": "text", "results": [{"verdict": "ok", "text": "echo: hello"}]}
    (tmp_path / "model.log").write_text(json.dumps(entry) + "\n")
    (tmp_path / "client.out").write_text("LAB-DONE results=ok\n")
    run = RunResult("py-sdk", "2.3.0", "stream_cut", "once", "stream_cut", str(tmp_path))
    cell = matrix.build_cell(run)
    assert (cell.retried, cell.how, cell.after, cell.model_text) == (
        "tools/call",
        "resume",
        "0.4–1 s",
        "ok",
    )
    assert cell.fired == 1 and not cell.notes and cell.inapplicable is None
