"""Faults: the proxy keeps serving, records every request (or counts and logs a loss),
and leaves only whole lines, whatever breaks around it (issue 6).

- the upstream dies mid-stream: killed (SIGKILL, a process of its own), or its stream
  cut (chunked without terminator, short of its Content-Length);
- the client aborts mid-stream, and before any header;
- the upstream is unreachable, with mitmproxy's default eager connection strategy and
  with `connection_strategy=lazy`, and then comes back;
- mitmdump gets SIGTERM with calls in flight in every phase (`done` fires before the
  `error` hooks of open flows), and SIGKILL under load;
- the recording directory is unwritable (at start-up, and after it), and the disk is
  full: a small tmpfs when this process may mount one (root, as in the dev container),
  and a file-size limit (`RLIMIT_FSIZE`) on mitmdump everywhere.

A record is written when its exchange ends, so each check first waits for it or stops
the proxy (SIGTERM: the addon writes what is still open).
"""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hardening_kit import (
    addon_failures,
    can_mount,
    custom_proxy,
    figures,
    mount_tmpfs,
    remount,
    unmount,
    wait_for,
    wait_serving,
)
from mcp_layers import BATCH_DELAY_S
from mcp_layers_demo import procs
from mcp_layers_support.harness import Proxy
from mcp_layers_support.messages import jbytes, mcp_headers, sse_block, tool_call, tool_result
from mcp_layers_support.rawhttp import HOST, RawClient, post_once
from mcp_layers_support.recordings import check_dir
from mcp_layers_support.scripted_upstream import Reply, ScriptedUpstream, json_reply, sse_reply
from mcp_layers_support.upstream_proc import MAX_EVENTS, event

pytestmark = pytest.mark.e2e

RECORD_WAIT_S = 10.0
LOST = re.compile(r"(\d+) records could not be written")
REFUSED = "cannot write the recording"


def records_of(proxy: Proxy) -> list[dict[str, Any]]:
    return [r for f in check_dir(proxy.record_dir) for r in f.records]


def wait_records(proxy: Proxy, count: int) -> list[dict[str, Any]]:
    wait_for(lambda: len(records_of(proxy)) >= count, RECORD_WAIT_S)
    return records_of(proxy)


def assert_whole(proxy: Proxy) -> int:
    files = check_dir(proxy.record_dir)
    for f in files:
        assert f.ends_whole and not f.bad_lines, (f.path, f.bad_lines)
        assert f.mode == 0o600, oct(f.mode)
    return sum(len(f.records) for f in files)


def ok_call(port: int, rid: str) -> Any:
    return post_once(port, jbytes(tool_call(rid)), mcp_headers())


@pytest.fixture(scope="module")
def upstream() -> Iterator[ScriptedUpstream]:
    with ScriptedUpstream() as up:
        yield up


def _ok_responder(request: Any) -> Reply:
    return json_reply(tool_result(request.rpc_id))


# -- the upstream dies mid-stream ----------------------------------------------------------


def _endless_stream_prefix(body: bytes) -> int:
    """How many whole events of upstream_proc's endless stream `body` holds; asserts that
    `body` is exactly a prefix of that stream (a kill loses the tail, never a byte inside)."""
    stream = b""
    for k in range(MAX_EVENTS):
        if len(stream) >= len(body):
            break
        stream += event(k)
    assert stream.startswith(body), "the client got bytes the upstream never sent"
    return body.count(b"\n\n")


def test_upstream_killed_mid_stream_then_back(tmp_path: Path) -> None:
    port = procs.free_port()
    cmd = [sys.executable, "-m", "mcp_layers_support.upstream_proc", str(port), "120"]
    log = tmp_path / "upstream.log"
    up = procs.start(cmd, log)
    try:
        procs.wait_for_port(port, up, what="upstream_proc", log=log)
        with Proxy(port, tmp_path / "proxy", scenario="faults") as proxy:
            call = {"mode": "endless"}
            body = jbytes({**tool_call("killed"), "params": {"name": "s", "arguments": call}})
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                pending = pool.submit(post_once, proxy.port, body, mcp_headers())
                time.sleep(0.6)  # ~12 events at 50 ms
                up.send_signal(signal.SIGKILL)
                up.wait(10)
                got = pending.result(timeout=30)
            events = _endless_stream_prefix(got.body)
            # The upstream is gone: the next call is a 502 from mitmproxy, and recorded.
            dead = ok_call(proxy.port, "while-dead")
            # Back on the same port: traffic flows again.
            up = procs.start(cmd, log)
            procs.wait_for_port(port, up, what="upstream_proc", log=log)
            back = ok_call(proxy.port, "back")
            wait_records(proxy, 3)
        records = {r["jsonrpc"]["id"]: r for r in records_of(proxy) if r["kind"] == "request"}
        whole = assert_whole(proxy)
        line = figures(
            "fault-upstream-killed",
            events_before_kill=events,
            client_bytes=len(got.body),
            client_complete=got.complete,
            next_status=dead.status,
            after_restart_status=back.status,
            records=len(records),
            lines=whole,
        )
        assert events >= 3 and not got.complete, line
        killed = records["killed"]
        assert killed["outcome"] == "STREAM_INCOMPLETE", killed
        assert killed["sse"]["end"] == "error" and killed["sse"]["events"] == events, killed
        assert dead.status == 502 and records["while-dead"]["outcome"] == "NO_RESPONSE", line
        assert back.status == 200 and records["back"]["outcome"] == "TOOL_SUCCESS", line
        assert not addon_failures(proxy.log_text())
    finally:
        procs.stop(up)


@pytest.mark.parametrize("framing", ["chunked", "length"])
def test_upstream_cuts_its_stream(upstream: ScriptedUpstream, tmp_path: Path, framing: str) -> None:
    rid = f"cut-{framing}"
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}
    events = [sse_block(progress), sse_block(progress)]
    upstream.script([sse_reply(events, gap_s=0.02, framing=framing, abort="cut")], _ok_responder)
    with Proxy(upstream.port, tmp_path) as proxy:
        got = ok_call(proxy.port, rid)
        after = ok_call(proxy.port, f"{rid}-after")
        records = wait_records(proxy, 2)
    by_id = {r["jsonrpc"]["id"]: r for r in records}
    line = figures(
        f"fault-upstream-cut-{framing}",
        client_bytes=len(got.body),
        complete=got.complete,
        outcome=by_id[rid]["outcome"],
        sse=json.dumps(by_id[rid]["sse"]),
        next=by_id[f"{rid}-after"]["outcome"],
    )
    assert got.body == b"".join(events) and not got.complete, line
    assert by_id[rid]["outcome"] == "STREAM_INCOMPLETE" and by_id[rid]["sse"]["end"] == "error"
    assert after.status == 200 and by_id[f"{rid}-after"]["outcome"] == "TOOL_SUCCESS", line
    assert assert_whole(proxy) == 2


# -- the client aborts ------------------------------------------------------------------------


def test_client_aborts_mid_stream_and_before_headers(
    upstream: ScriptedUpstream, tmp_path: Path
) -> None:
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}
    first = sse_block(progress)
    upstream.script(
        [
            sse_reply([first] * 40, gap_s=0.05),  # 2 s of events; the client leaves early
            Reply(abort="never"),  # headers never come; the client leaves
        ],
        _ok_responder,
    )
    with Proxy(upstream.port, tmp_path) as proxy:
        got = post_once(
            proxy.port, jbytes(tool_call("abort-stream")), mcp_headers(), abort_after=len(first)
        )
        client = RawClient(proxy.port)
        head = jbytes(tool_call("abort-headers"))
        request = (
            f"POST /mcp HTTP/1.1\r\nHost: {HOST}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(head)}\r\n\r\n"
        ).encode()
        client.sock.sendall(request + head)
        upstream.wait_received(2)
        time.sleep(0.2)
        client.close()  # before any response header
        after = ok_call(proxy.port, "abort-after")
        records = wait_records(proxy, 3)
    by_id = {r["jsonrpc"]["id"]: r for r in records}
    line = figures(
        "fault-client-abort",
        stream_bytes_before_abort=len(got.body),
        mid_stream=by_id.get("abort-stream", {}).get("outcome"),
        before_headers=by_id.get("abort-headers", {}).get("outcome"),
        next=by_id.get("abort-after", {}).get("outcome"),
    )
    assert got.aborted, line
    stream = by_id["abort-stream"]
    assert stream["outcome"] == "STREAM_INCOMPLETE" and stream["sse"]["end"] == "error", stream
    assert by_id["abort-headers"]["outcome"] == "NO_RESPONSE", line
    assert after.status == 200 and by_id["abort-after"]["outcome"] == "TOOL_SUCCESS", line
    assert assert_whole(proxy) == 3


# -- the upstream is unreachable ----------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["eager", "lazy"])
def test_upstream_unreachable(tmp_path: Path, strategy: str) -> None:
    """Lazy: mitmproxy answers 502 and the addon records NO_RESPONSE. Eager (mitmproxy's
    default): mitmproxy connects upstream when the client connects, fails, and closes
    the client's connection before reading any request; no HTTP hook fires, so there
    is no request to record. Proven here and documented (README, docs/hardening.md)."""
    port = procs.free_port()  # nobody listens there (yet)
    with custom_proxy(strategy)(port, tmp_path, scenario="faults") as proxy:
        down = ok_call(proxy.port, f"{strategy}-down")
        time.sleep(0.3)
        records_down = records_of(proxy)
        with ScriptedUpstream(responder=_ok_responder, port=port):
            up = ok_call(proxy.port, f"{strategy}-up")
            wait_records(proxy, len(records_down) + 1)
        log = proxy.log_text()
    records = records_of(proxy)
    line = figures(
        f"fault-unreachable-{strategy}",
        client_got=down.status if down.status else f"no response ({down.error})",
        records_while_down=len(records_down),
        outcome_while_down=records_down[0]["outcome"] if records_down else None,
        after_upstream_back=up.status,
        records=len(records),
    )
    if strategy == "lazy":
        assert down.status == 502, line
        assert [r["outcome"] for r in records_down] == ["NO_RESPONSE"], line
    else:
        assert down.status is None and down.error, line
        assert records_down == [], line
        assert "error establishing server connection" in log
    assert up.status == 200 and records[-1]["outcome"] == "TOOL_SUCCESS", line
    assert_whole(proxy)


# -- the proxy stops -----------------------------------------------------------------------------


def test_sigterm_with_calls_in_every_phase(upstream: ScriptedUpstream, tmp_path: Path) -> None:
    """`done` fires first and the addon writes every open exchange; the `error` hooks
    that follow must not write them twice."""
    progress = {"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progress": 1}}
    slow = [sse_block(progress)] * 200  # 20 s of events, 0.1 s apart
    primed = [b"id: 1\ndata: \n\n", *slow]  # resumable: parked when it ends unanswered
    replies: dict[str, Reply] = {}
    for n in range(3):
        replies[f"done-{n}"] = json_reply(tool_result(f"done-{n}"))
        replies[f"headers-{n}"] = Reply(abort="never")
        replies[f"stream-{n}"] = sse_reply(slow, gap_s=0.1)
        replies[f"primed-{n}"] = sse_reply(primed, gap_s=0.1)
    upstream.script([], lambda r: replies[r.rpc_id])
    proxy = Proxy(upstream.port, tmp_path)
    with proxy, concurrent.futures.ThreadPoolExecutor(len(replies)) as pool:
        futures = {}
        for rid in replies:
            session = "sess-term" if rid.startswith("stream") else None
            body = jbytes(tool_call(rid))
            futures[rid] = pool.submit(post_once, proxy.port, body, mcp_headers(session))
            if rid.startswith("done"):
                futures[rid].result(10)
        upstream.wait_received(len(replies))
        time.sleep(0.5)  # every stream has sent a few events
        exit_code = proxy.stop()
        gots = {rid: f.result(30) for rid, f in futures.items()}
    records = records_of(proxy)
    requests = [r for r in records if r["kind"] == "request"]
    by_id: dict[str, list[dict[str, Any]]] = {}
    for r in requests:
        by_id.setdefault(r["jsonrpc"]["id"], []).append(r)
    phases = {
        rid: (by_id[rid][0]["outcome"], "proxy_shutdown" in by_id[rid][0]["notes"])
        for rid in replies
        if rid in by_id
    }
    line = figures(
        "fault-sigterm",
        in_flight=len(replies) - 3,
        finished=3,
        request_records=len(requests),
        session_end=sum(r["kind"] == "session_end" for r in records),
        doubled=sum(len(v) > 1 for v in by_id.values()),
        exit_code=exit_code,
        lines=assert_whole(proxy),
    )
    assert exit_code is not None, line
    assert sorted(by_id) == sorted(replies) and all(len(v) == 1 for v in by_id.values()), line
    for rid, (outcome, shutdown) in phases.items():
        if rid.startswith("done"):
            assert (outcome, shutdown) == ("TOOL_SUCCESS", False), rid
            assert gots[rid].status == 200
        elif rid.startswith("headers"):
            assert (outcome, shutdown) == ("NO_RESPONSE", True), rid
        else:
            assert (outcome, shutdown) == ("STREAM_INCOMPLETE", True), rid
            assert by_id[rid][0]["sse"]["end"] == "error"
            assert gots[rid].status == 200 and not gots[rid].complete
    ends = [r for r in records if r["kind"] == "session_end"]
    assert [r["endReason"] for r in ends] == ["shutdown"], line
    assert not addon_failures(proxy.log_text())


def test_sigkill_under_load_leaves_only_whole_lines(tmp_path: Path) -> None:
    """No `done` at all: what was written stays, as whole lines (one write per line)."""
    stop = threading.Event()
    sent = [0]

    answered_at: list[float] = []

    def hammer(port: int, worker: int) -> None:
        for n in range(10_000):
            if stop.is_set():
                return
            if ok_call(port, f"kill-{worker}-{n}").status == 200:
                sent[0] += 1
                answered_at.append(time.monotonic())

    with ScriptedUpstream(responder=_ok_responder, keep_log=False) as up:
        proxy = Proxy(up.port, tmp_path, extra_sets=("flow_detail=0",))
        with proxy, concurrent.futures.ThreadPoolExecutor(8) as pool:
            workers = [pool.submit(hammer, proxy.port, w) for w in range(8)]
            wait_for(lambda: sent[0] >= 300, 30)
            proc = proxy._proc
            assert proc is not None
            os.kill(proc.pid, signal.SIGKILL)
            killed_at = time.monotonic()
            proc.wait(10)
            stop.set()
            for w in workers:
                w.result(30)
            proxy._proc = None
    files = check_dir(proxy.record_dir)
    records = sum(len(f.records) for f in files)
    # The recorder writes in batches at most BATCH_DELAY_S after an answer has gone out
    # (docs/hardening.md): a SIGKILL may lose the records of the answers of that last
    # stretch, besides the 8 calls in flight. Measured with twice the delay as margin.
    window = 2 * BATCH_DELAY_S
    recent = sum(1 for t in answered_at if t >= killed_at - window)
    line = figures(
        "fault-sigkill",
        posts_answered_before_kill=sent[0],
        records=records,
        lost_answered=max(0, sent[0] - records),
        answered_in_last_40ms=recent,
        torn_lines=sum(len(f.bad_lines) for f in files),
        ends_whole=all(f.ends_whole for f in files),
    )
    assert files and all(f.ends_whole and not f.bad_lines for f in files), line
    assert records >= sent[0] - 8 - recent, line  # all but in flight and the last batch


# -- the recording refuses ------------------------------------------------------------------------


def test_unwritable_directory_at_start_is_refused_clearly(tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    cmd = procs.mitmdump_cmd(procs.free_port(), procs.free_port(), record_dir=blocker / "rec")
    done = subprocess.run(cmd, capture_output=True, timeout=60, text=True)
    figures("fault-unwritable-at-start", exit_code=done.returncode)
    assert done.returncode != 0
    assert "mcp_record_dir" in done.stdout + done.stderr


def _lost_in_log(log: str) -> int:
    found = LOST.findall(log)
    return int(found[-1]) if found else 0


@pytest.mark.parametrize("how", ["chmod", "read-only-tmpfs", "replaced-by-a-file"])
def test_directory_unwritable_after_start_counts_and_recovers(
    upstream: ScriptedUpstream, tmp_path: Path, how: str
) -> None:
    """The file is opened at the first record: make the directory refuse before that,
    send calls (all answered; every record counted lost, reported once), make it
    writable again, send more (written). Three ways to refuse: permissions (they do
    not bind root), a read-only file system (needs a mount), the path taken by a file."""
    if how == "chmod" and os.geteuid() == 0:
        pytest.skip("root ignores directory permissions; the other two ways run")
    if how == "read-only-tmpfs" and not can_mount():
        pytest.skip("cannot mount a tmpfs here (needs root with CAP_SYS_ADMIN)")
    upstream.script([], _ok_responder)
    workdir = tmp_path / "w"
    record_dir = workdir / "records"
    record_dir.mkdir(parents=True)
    moved = tmp_path / "moved"
    if how == "read-only-tmpfs":
        mount_tmpfs(record_dir, "1m")
    try:
        with Proxy(upstream.port, workdir) as proxy:
            wait_serving(proxy.port)
            if how == "chmod":
                record_dir.chmod(0o500)
            elif how == "read-only-tmpfs":
                remount(record_dir, read_only=True)
            else:
                record_dir.rename(moved)
                record_dir.write_text("in the way")
            refused = [ok_call(proxy.port, f"refused-{n}") for n in range(20)]
            wait_for(lambda: REFUSED in proxy.log_text(), RECORD_WAIT_S)
            # Records are written in batches, at most BATCH_DELAY_S after their answer:
            # let the last of these twenty meet the refusal too.
            time.sleep(10 * BATCH_DELAY_S)
            if how == "chmod":
                record_dir.chmod(0o700)
            elif how == "read-only-tmpfs":
                remount(record_dir, read_only=False)
            else:
                record_dir.unlink()
                moved.rename(record_dir)
            written = [ok_call(proxy.port, f"written-{n}") for n in range(10)]
            wait_records(proxy, 10)
        log = proxy.log_text()
        records = records_of(proxy)
        lines = assert_whole(proxy)
    finally:
        if how == "read-only-tmpfs":
            unmount(record_dir)
    lost = _lost_in_log(log)
    line = figures(
        f"fault-unwritable-after-start-{how}",
        how=how,
        calls=len(refused) + len(written),
        answered=sum(g.status == 200 for g in refused + written),
        records_written=len(records),
        lost_logged=lost,
        refusal_warnings=log.count(REFUSED),
        lines=lines,
    )
    assert all(g.status == 200 for g in refused + written), line
    assert [r["jsonrpc"]["id"] for r in records] == [f"written-{n}" for n in range(10)], line
    assert lost == 20 and log.count(REFUSED) == 1, line
    assert not addon_failures(log)


def _fill(directory: Path, leave: int) -> Path:
    """Fill the file system of `directory` until about `leave` bytes remain."""
    filler = directory / "filler"
    stats = os.statvfs(directory)
    free = stats.f_bavail * stats.f_frsize
    filler.write_bytes(b"\0" * max(0, free - leave))
    return filler


@pytest.mark.parametrize("how", ["tmpfs", "rlimit"])
def test_disk_full_counts_losses_and_recovers(
    upstream: ScriptedUpstream, tmp_path: Path, how: str
) -> None:
    """Records that do not fit are counted, logged once when it starts and in total at
    the end; the file keeps whole lines; traffic never notices. On the tmpfs, room is
    then made again and the records that follow are written."""
    if how == "tmpfs" and not can_mount():
        pytest.skip("cannot mount a tmpfs here (needs root with CAP_SYS_ADMIN); rlimit runs")
    upstream.script([], _ok_responder)
    workdir = tmp_path / "w"
    record_dir = workdir / "records"
    record_dir.mkdir(parents=True)
    first, second = 60, 30
    if how == "tmpfs":
        mount_tmpfs(record_dir, "256k")
        proxy_class: type[Proxy] = Proxy
    else:
        proxy_class = custom_proxy(fsize_limit=40_000)
    try:
        with proxy_class(upstream.port, workdir, extra_sets=("flow_detail=0",)) as proxy:
            filler = _fill(record_dir, 20_000) if how == "tmpfs" else None
            gots = [ok_call(proxy.port, f"full-{n}") for n in range(first)]
            wait_for(lambda: REFUSED in proxy.log_text(), RECORD_WAIT_S)
            if filler is not None:
                filler.unlink()  # room again
            gots += [ok_call(proxy.port, f"room-{n}") for n in range(second)]
            time.sleep(0.3)
        log = proxy.log_text()
        records = records_of(proxy)
        lines = assert_whole(proxy)
    finally:
        if how == "tmpfs":
            unmount(record_dir)
    lost = _lost_in_log(log)
    ids = [r["jsonrpc"]["id"] for r in records]
    line = figures(
        f"fault-disk-full-{how}",
        calls=len(gots),
        answered=sum(g.status == 200 for g in gots),
        records_written=len(records),
        lost_logged=lost,
        written_plus_lost=len(records) + lost,
        refusal_warnings=log.count(REFUSED),
        lines=lines,
    )
    assert all(g.status == 200 for g in gots), line
    assert len(records) + lost == first + second, line
    assert lost > 0 and log.count(REFUSED) == 1, line
    assert len(set(ids)) == len(ids), line
    if how == "tmpfs":
        assert ids[-second:] == [f"room-{n}" for n in range(second)], line  # recovered
    assert not addon_failures(log)
