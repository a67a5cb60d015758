"""The mitmproxy adapter, through mitmproxy's own test helpers (no sockets)."""

from __future__ import annotations

import asyncio
import io
import json
import re
from pathlib import Path
from typing import Any

import mcp_layers
import mcp_layers_faults
import mcp_layers_flows
import pytest
from mitmproxy import exceptions, http
from mitmproxy.test import taddons, tflow, tutils

CALL = b'{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"echo","arguments":{}}}'
OK = b'{"jsonrpc":"2.0","id":7,"result":{"content":[],"isError":false}}'


def post_flow(body: bytes = CALL, headers: dict[str, str] | None = None) -> http.HTTPFlow:
    req = tutils.treq(method=b"POST", path=b"/mcp", content=body)
    for k, v in (headers or {}).items():
        req.headers[k] = v
    f = tflow.tflow(req=req)
    f.response = None
    return f


def respond(
    f: http.HTTPFlow, status: int, ctype: str, content: bytes | None, **headers: str
) -> None:
    f.response = tutils.tresp(status_code=status, content=content)
    f.response.headers["content-type"] = ctype
    for k, v in headers.items():
        f.response.headers[k.replace("_", "-")] = v


def records(out: io.BytesIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines()]


@pytest.fixture
def addon() -> Any:
    out = io.BytesIO()
    a = mcp_layers.Recorder(outfile=out)
    with taddons.context(a) as tctx:
        tctx.configure(a, mcp_scenario="adapter")
        a.out = out
        yield a


def test_json_exchange_is_recorded_and_left_alone(addon: Any) -> None:
    f = post_flow(headers={"Authorization": "Bearer canary-secret-123456", "Cookie": "sid=canary"})
    addon.request(f)
    respond(f, 200, "application/json", OK)
    addon.responseheaders(f)
    assert not f.response.stream  # JSON stays buffered, exactly as without the addon
    addon.response(f)
    (rec,) = records(addon.out)
    assert (rec["method"], rec["tool"], rec["outcome"], rec["scenario"]) == (
        "tools/call",
        "echo",
        "TOOL_SUCCESS",
        "adapter",
    )
    assert f.request.content == CALL and f.response.content == OK
    assert "canary" not in addon.out.getvalue().decode()


def test_sse_answer_gets_a_tap_that_returns_the_same_chunk(addon: Any) -> None:
    f = post_flow()
    addon.request(f)
    respond(f, 200, "text/event-stream", None)
    addon.responseheaders(f)
    tap = f.response.stream
    assert isinstance(tap, mcp_layers.StreamTap)
    answer = b"event: message\ndata: " + OK + b"\n\n"
    chunks = [b"id: 1\ndata: \n\n", answer[:9], answer[9:], b""]
    for c in chunks:
        assert tap(c) is c
    addon.response(f)
    (rec,) = records(addon.out)
    assert rec["outcome"] == "TOOL_SUCCESS" and rec["sse"] == {
        "events": 2,
        "final": True,
        "end": "complete",
        "resumed": False,
    }


def test_tap_never_raises_even_when_the_core_does(
    addon: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    f = post_flow()
    addon.request(f)
    respond(f, 200, "text/event-stream", None)
    addon.responseheaders(f)

    def boom(_event: object) -> None:
        raise RuntimeError("core bug")

    monkeypatch.setattr(addon.tracker, "handle", boom)
    chunk = b"data: x\n\n"
    assert f.response.stream(chunk) is chunk
    assert f.response.stream(b"") == b""
    addon.response(f)
    addon.error(f)
    assert addon.errors >= 3


def test_untracked_event_streams_are_streamed_not_buffered(addon: Any) -> None:
    f = tflow.tflow(req=tutils.treq(method=b"GET", path=b"/mcp", content=b""))
    respond(f, 200, "text/event-stream; charset=utf-8", None)
    addon.request(f)
    addon.responseheaders(f)
    assert f.response.stream is True
    assert records(addon.out) == []


def test_non_mcp_post_is_not_recorded(addon: Any) -> None:
    f = post_flow(body=b"a=1&b=2")
    addon.request(f)
    respond(f, 200, "application/json", b"{}")
    addon.responseheaders(f)
    addon.response(f)
    assert records(addon.out) == [] and not f.response.stream


def test_error_without_response_is_no_response(addon: Any) -> None:
    f = post_flow()
    addon.request(f)
    f.error = tflow.terr()
    addon.error(f)
    (rec,) = records(addon.out)
    assert (rec["outcome"], rec["httpStatuses"]) == ("NO_RESPONSE", [])


def test_done_writes_what_is_still_open(addon: Any) -> None:
    f = post_flow()
    addon.request(f)
    addon.done()
    (rec,) = records(addon.out)
    assert rec["notes"] == ["proxy_shutdown"]
    f.error = tflow.terr()
    addon.error(f)  # arrives after done: no second record
    assert len(records(addon.out)) == 1


def test_existing_stream_callable_is_chained_not_replaced(addon: Any) -> None:
    f = post_flow()
    addon.request(f)
    respond(f, 200, "text/event-stream", None)
    seen: list[bytes] = []

    def other(data: bytes) -> bytes:
        seen.append(data)
        return data

    f.response.stream = other
    addon.responseheaders(f)
    chunk = b"data: " + OK + b"\n\n"
    assert f.response.stream(chunk) is chunk and seen == [chunk]
    addon.response(f)
    assert records(addon.out)[0]["outcome"] == "TOOL_SUCCESS"


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        (
            "mcp_max_body_kb",
            0,
            "mcp_max_body_kb must be a positive number of KiB, not 0; e.g. --set mcp_max_body_kb=16384",
        ),
        ("mcp_max_event_kb", -5, "mcp_max_event_kb must be a positive number of KiB"),
        ("mcp_scenario", "x" * 500, "mcp_scenario must be printable text"),
        ("mcp_scenario", "bad\nlabel", "mcp_scenario must be printable text"),
        ("mcp_record_dir", " ", "mcp_record_dir is empty; name a directory"),
        ("mcp_record_max_mb", -1, "mcp_record_max_mb must be 0 (no rotation) or a number of MiB"),
    ],
)
def test_bad_options_are_refused_with_what_to_write(
    option: str, value: object, message: str
) -> None:
    a = mcp_layers.Recorder()
    with (
        taddons.context(a) as tctx,
        pytest.raises(exceptions.OptionsError, match=re.escape(message)),
    ):
        tctx.configure(a, **{option: value})


def test_unwritable_record_dir_is_refused(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("x")
    a = mcp_layers.Recorder()
    with (
        taddons.context(a) as tctx,
        pytest.raises(exceptions.OptionsError, match=r"cannot create .*writable directory"),
    ):
        tctx.configure(a, mcp_record_dir=str(blocker / "rec"))


def test_record_dir_option_writes_a_private_file(tmp_path: Path) -> None:
    a = mcp_layers.Recorder()
    with taddons.context(a) as tctx:
        tctx.configure(a, mcp_record_dir=str(tmp_path / "rec"))
        f = post_flow()
        a.request(f)
        respond(f, 200, "application/json", OK)
        a.responseheaders(f)
        a.response(f)
        a.done()
    (path,) = (tmp_path / "rec").glob("mcp-*.jsonl")
    assert json.loads(path.read_text())["outcome"] == "TOOL_SUCCESS"
    assert oct(path.stat().st_mode & 0o777) == "0o600"


def test_script_module_exposes_the_fault_injector_then_the_recorder() -> None:
    injector, recorder = mcp_layers.addons
    assert isinstance(injector, mcp_layers.FaultInjector)
    assert isinstance(recorder, mcp_layers.Recorder)


def test_gzip_body_is_inflated_only_up_to_the_cap() -> None:
    import gzip

    bomb = gzip.compress(b"0" * (4 * 1024 * 1024))  # 4 MiB of zeros in ~4 KiB
    req = tutils.treq(method=b"POST", path=b"/mcp", content=bomb)
    req.headers["content-encoding"] = "gzip"
    picked = mcp_layers_flows.pick(req.headers.fields, mcp_layers_flows.REQUEST_NAMES)
    assert mcp_layers_flows.content(req.raw_content, picked, 1024 * 1024) is None
    assert mcp_layers_flows.content(req.raw_content, picked, 8 * 1024 * 1024) == b"0" * (
        4 * 1024 * 1024
    )
    req.headers["content-encoding"] = "br"
    assert (
        mcp_layers_flows.content(
            req.raw_content,
            mcp_layers_flows.pick(req.headers.fields, mcp_layers_flows.REQUEST_NAMES),
            10**9,
        )
        is None
    )


def test_json_answer_streamed_by_mitmproxy_is_uninspected(addon: Any) -> None:
    f = post_flow()
    addon.request(f)
    respond(f, 200, "application/json", None)
    f.response.stream = True  # what stream_large_bodies does
    addon.responseheaders(f)
    addon.response(f)
    (rec,) = records(addon.out)
    assert (rec["outcome"], rec["notes"]) == ("UNINSPECTED", ["body_unseen"])


def test_tap_stops_feeding_a_stream_that_is_not_mcp(addon: Any) -> None:
    req = tutils.treq(method=b"GET", path=b"/events", content=b"")
    req.headers["accept"] = "text/event-stream"
    f = tflow.tflow(req=req)
    f.response = None
    addon.request(f)
    respond(f, 200, "text/event-stream", None)
    addon.responseheaders(f)
    tap = f.response.stream
    assert isinstance(tap, mcp_layers.StreamTap)
    for i in range(12):
        chunk = f"data: tick {i}\n\n".encode()
        assert tap(chunk) is chunk
    assert not addon.tracker.wants_chunks(f.id) and tap.feeding is False


def test_every_declared_option_is_known_to_the_start_up_check() -> None:
    with taddons.context(*mcp_layers.addons) as tctx:
        declared = {name for name in tctx.options._options if name.startswith("mcp_")}
    assert declared == set(mcp_layers.options.SPECS)


def test_a_bad_value_held_for_the_script_stops_the_proxy_in_one_line(
    capsys: pytest.CaptureFixture[str],
) -> None:
    # What mitmdump does with `--set mcp_record_bodies=maybe` before loading the script.
    a = mcp_layers.Recorder(outfile=io.BytesIO(), refuse_at_startup=True)
    with taddons.context() as tctx:
        tctx.options.set("mcp_record_bodies=maybe", defer=True)
        with pytest.raises(SystemExit) as stopped:
            tctx.master.addons.register(a)
    assert stopped.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "mcp_record_bodies must be true or false" in err


def test_an_unknown_mcp_name_stops_the_proxy_with_the_nearest_name(
    capsys: pytest.CaptureFixture[str],
) -> None:
    a = mcp_layers.Recorder(outfile=io.BytesIO(), refuse_at_startup=True)
    with taddons.context() as tctx:
        tctx.options.set("mcp_fautls=errors.rate_limited", defer=True)
        with pytest.raises(SystemExit):
            tctx.master.addons.register(a)
    assert "did you mean mcp_faults?" in capsys.readouterr().err


def test_a_value_refused_by_configure_at_start_up_stops_the_proxy(
    capsys: pytest.CaptureFixture[str],
) -> None:
    recorder = mcp_layers.Recorder(outfile=io.BytesIO())
    a = mcp_layers.FaultInjector(recorder.request_facts, refuse_at_startup=True)
    with taddons.context(a, recorder) as tctx, pytest.raises(SystemExit):
        tctx.configure(a, mcp_faults="no-such-preset")
    assert "'no-such-preset' is neither a preset nor a file" in capsys.readouterr().err


def test_fault_cut_reaches_the_recorder_through_the_stream_and_flow_metadata() -> None:
    """Fault injector first, recorder second: the tap sees the cut stream, the record the mark."""
    out = io.BytesIO()
    recorder = mcp_layers.Recorder(outfile=out)
    injector = mcp_layers.FaultInjector(recorder.request_facts)
    with taddons.context(injector, recorder) as tctx:
        tctx.configure(injector, mcp_fault="sse_truncate=before_final name=cut")
        f = post_flow()
        for a in (injector, recorder):
            a.request(f)
        assert f.metadata[mcp_layers.INJECTED_KEY] == {"rule": "cut", "action": "sse_truncate"}
        assert f.request.headers["accept-encoding"] == "identity"
        respond(f, 200, "text/event-stream", None)
        for a in (injector, recorder):
            a.responseheaders(f)
        progress = b'data: {"jsonrpc":"2.0","method":"notifications/progress","params":{}}\n\n'
        final = b"data: " + OK + b"\n\n"
        sent = [f.response.stream(c) for c in (progress, final, b"")]
        assert b"".join(b"".join(s) for s in sent) == progress  # the final event never goes
        for a in (injector, recorder):
            a.response(f)
    (rec,) = records(out)
    assert rec["injected"] == {"rule": "cut", "action": "sse_truncate"}
    assert rec["sse"]["events"] == 1 and rec["sse"]["final"] is False


def test_idle_watch_passes_every_byte_through_the_filters_around_it_and_fires_once() -> None:
    """The idle cut's stream callable, on a real loop: chunks go on unchanged through a
    callable set before it; each chunk restarts the wait; silence fires it, once."""
    fired: list[float] = []
    seen: list[bytes] = []

    def before(data: bytes) -> bytes:
        seen.append(data)
        return data

    async def scenario() -> list[Any]:
        loop = asyncio.get_running_loop()
        watch = mcp_layers_faults.IdleWatch(loop, 50, lambda: fired.append(loop.time()), before)
        watch.start()
        out = []
        for chunk in (b"data: 1\n\n", b": keep-alive\n\n", b"data: 2\n\n"):
            await asyncio.sleep(0.03)  # under 50 ms each: the wait restarts every time
            out.append(watch(chunk))
        assert fired == [] and not watch.fired
        await asyncio.sleep(0.12)
        assert len(fired) == 1 and watch.fired
        out.append(watch(b"data: late\n\n"))  # the client's connection is gone: nothing goes
        out.append(watch(b""))
        return out

    out = asyncio.run(scenario())
    assert out == [b"data: 1\n\n", b": keep-alive\n\n", b"data: 2\n\n", [], b""]
    assert seen == [b"data: 1\n\n", b": keep-alive\n\n", b"data: 2\n\n", b""]


def test_an_idle_cut_without_mitmproxys_connection_table_does_nothing_and_unmarks(
    caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No proxyserver addon (mitmproxy's test master has none): the close cannot be made;
    it says so once, nothing raises, the stream goes on and its record is not marked."""
    monkeypatch.setattr(mcp_layers_faults, "_CLOSE_FAILED", [])  # logged once per process
    out = io.BytesIO()
    recorder = mcp_layers.Recorder(outfile=out)
    injector = mcp_layers.FaultInjector(recorder.request_facts)

    async def scenario(f: http.HTTPFlow) -> list[Any]:
        for a in (injector, recorder):
            a.request(f)
        assert f.metadata[mcp_layers.INJECTED_KEY] == {"rule": "idle_cut", "action": "idle_cut"}
        respond(f, 200, "text/event-stream", None, transfer_encoding="chunked")
        for a in (injector, recorder):
            a.responseheaders(f)
        await asyncio.sleep(0.1)  # silent past after_ms twice over: the timer fires
        sent = [f.response.stream(c) for c in (b"data: " + OK + b"\n\n", b"")]
        for a in (injector, recorder):
            a.response(f)
        return sent

    with taddons.context(injector, recorder) as tctx:
        tctx.configure(injector, mcp_fault="idle_cut=20")
        assert mcp_layers_faults.close_client_connection(post_flow()) is False
        f = post_flow()
        sent = asyncio.run(scenario(f))
    assert b"".join(c if isinstance(c, bytes) else b"".join(c) for c in sent) == (
        b"data: " + OK + b"\n\n"
    )
    assert caplog.text.count("cannot close a client connection") == 1
    assert injector.errors == 0
    (rec,) = records(out)
    assert rec["injected"] is None and rec["outcome"] == "TOOL_SUCCESS"


MODEL_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "model"


def model_flow(name: str) -> tuple[http.HTTPFlow, bytes]:
    """A model API POST (the lab fake model's request) and its captured SSE answer."""
    req = json.loads((MODEL_FIXTURES / f"{name}.request.json").read_text())
    body = json.dumps(req["body"]).encode()
    f = tflow.tflow(req=tutils.treq(method=b"POST", path=req["path"].encode(), content=body))
    f.request.headers["x-api-key"] = "sk-ant-canary-secret-0123456789"
    f.response = None
    return f, (MODEL_FIXTURES / f"{name}.response.sse").read_bytes()


def test_model_stream_is_tapped_unchanged_and_recorded_without_secrets(addon: Any) -> None:
    f, answer = model_flow("anthropic-tool-stream")
    addon.request(f)
    respond(f, 200, "text/event-stream", None)
    addon.responseheaders(f)
    tap = f.response.stream
    assert isinstance(tap, mcp_layers.StreamTap)  # streamed through, never held back
    for chunk in (answer[:40], answer[40:], b""):
        assert tap(chunk) is chunk
    addon.response(f)
    (rec,) = records(addon.out)
    assert rec["kind"] == "model_turn" and rec["modelTurn"]["complete"] is True
    assert rec["modelTurn"]["toolCalls"][0]["name"] == "mcp__echo__echo"
    text = addon.out.getvalue().decode()
    assert "canary" not in text and "hello" not in text and "call echo" not in text


def test_model_json_answer_is_recorded_and_left_alone(addon: Any) -> None:
    req = json.loads((MODEL_FIXTURES / "chat-tool-json.request.json").read_text())
    body = json.dumps(req["body"]).encode()
    f = tflow.tflow(req=tutils.treq(method=b"POST", path=req["path"].encode(), content=body))
    f.response = None
    addon.request(f)
    answer = (MODEL_FIXTURES / "chat-tool-json.response.json").read_bytes()
    respond(f, 200, "application/json", answer)
    addon.responseheaders(f)
    assert not f.response.stream
    addon.response(f)
    (rec,) = records(addon.out)
    assert (
        rec["modelTurn"]["provider"] == "openai" and rec["modelTurn"]["stopReason"] == "tool_calls"
    )
    assert f.response.content == answer and f.request.content == body


def test_responses_over_websocket_becomes_model_turns(addon: Any) -> None:
    from mitmproxy import websocket
    from wsproto.frame_protocol import Opcode

    f = tflow.twebsocketflow(messages=False)
    f.request.path = "/v1/responses"
    req = json.loads((MODEL_FIXTURES / "responses-tool-stream.request.json").read_text())
    frames = [(True, json.dumps({"type": "response.create", **req["body"]}).encode())]
    raw = (MODEL_FIXTURES / "responses-tool-stream.response.sse").read_text()
    frames += [(False, line[6:].encode()) for line in raw.splitlines() if line.startswith("data: ")]
    for from_client, content in frames:
        f.websocket.messages.append(websocket.WebSocketMessage(Opcode.TEXT, from_client, content))
        addon.websocket_message(f)
    addon.websocket_end(f)
    (rec,) = records(addon.out)
    assert rec["kind"] == "model_turn" and rec["modelTurn"]["api"] == "responses"
    assert rec["modelTurn"]["complete"] and len(rec["modelTurn"]["toolCalls"]) == 1
    # Any other WebSocket is none of the recorder's business.
    other = tflow.twebsocketflow()
    addon.websocket_message(other)
    addon.websocket_end(other)
    assert len(records(addon.out)) == 1 and addon.errors == 0
