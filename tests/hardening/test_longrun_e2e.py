"""A proxy that runs for days (issue 19), through a real mitmdump:

- session churn past the session book's cap: every session ends with exactly one
  `session_end` that names a reason (`delete`, `evicted`, `idle`), written as it happens;
- many streams each sending a huge unfinished event: the global buffer budget holds
  (mitmdump's peak RSS measured against a run without it);
- retention keeps the recording directory under its limit while the proxy runs.
"""

from __future__ import annotations

import concurrent.futures
import threading
import time
from collections import Counter, defaultdict
from pathlib import Path

import pytest
from hardening_kit import addon_failures, figures, wait_for
from mcp_layers_support.churn import churn
from mcp_layers_support.churn import respond as churn_respond
from mcp_layers_support.gauges import hwm_kib, proxy_pid, rss_kib
from mcp_layers_support.harness import Proxy
from mcp_layers_support.messages import jbytes, mcp_headers, tool_call
from mcp_layers_support.rawhttp import post_once
from mcp_layers_support.recordings import check_dir
from mcp_layers_support.scripted_upstream import Received, Reply, ScriptedUpstream

pytestmark = pytest.mark.e2e

MIB = 1024 * 1024


def test_churn_past_the_cap_ends_every_session_exactly_once(tmp_path: Path) -> None:
    cap, sessions, idle_s = 40, 240, 2
    sets = (
        f"mcp_max_sessions={cap}",
        f"mcp_session_idle_s={idle_s}",
        "mcp_raw_session_ids=true",
        "flow_detail=0",
    )
    upstream = ScriptedUpstream(responder=churn_respond, keep_log=False)
    with upstream, Proxy(upstream.port, tmp_path, extra_sets=sets) as proxy:
        done = churn(proxy.port, sessions, threads=4)
        # Vanished sessions end idle without any more traffic (the adapter's tick),
        # before the proxy stops: nothing is left for `shutdown`.
        ended_live = wait_for(
            lambda: _named_ends(proxy) >= sessions, timeout=idle_s * 4 + 5, interval=0.2
        )
    records = proxy.records()
    reasons_of: dict[str, list[str | None]] = defaultdict(list)
    for r in records:
        if r["kind"] == "session_end":
            reasons_of[r["session"]].append(r["endReason"])
    reasons = Counter(x for rs in reasons_of.values() for x in rs)
    twice = [s for s, rs in reasons_of.items() if len([x for x in rs if x]) != 1]
    wrong_delete = [
        s for s in done.deleted if "delete" not in reasons_of[s] and "evicted" in reasons_of[s]
    ]
    line = figures(
        "session churn",
        cap=cap,
        sessions=len(done.sessions),
        requests=done.requests,
        records=len(records),
        ends=dict(reasons),
        without_end=len(set(done.sessions) - set(reasons_of)),
        more_than_one=len(twice),
        ended_while_running=ended_live,
    )
    assert not done.failures, f"{line}\n{done.failures[:5]}"
    assert len(done.sessions) == sessions, line
    assert set(reasons_of) == set(done.sessions), line
    assert not twice, f"{line}\n{twice[:5]}"
    assert reasons["evicted"] > 0 and reasons["idle"] > 0 and reasons["delete"] > 0, line
    assert reasons["shutdown"] == 0 and ended_live, line
    # A deleted session ends `delete` unless the cap forgot it first (then `evicted`,
    # and its DELETE, coming after, is recorded with no reason).
    assert len(wrong_delete) <= reasons["evicted"], line
    assert not addon_failures(proxy.log_text()), line


def _named_ends(proxy: Proxy) -> int:
    try:
        text = proxy.text()
    except OSError:
        return 0
    lines = text.splitlines()
    return sum('"kind":"session_end"' in x and '"endReason":null' not in x for x in lines)


EVENT_MIB = 15
STREAMS = 8


def _huge_unfinished_event(request: Received) -> Reply:
    """An SSE answer whose one event never ends: 15 MiB of one data line, then the
    stream stays open a while (so every stream holds its event at once)."""
    piece = b"x" * (256 * 1024)
    head = b'data: {"jsonrpc":"2.0","id":' + jbytes(request.rpc_id) + b',"result":"'
    chunks = [(0.0, head)] + [(0.0, piece)] * (EVENT_MIB * 4) + [(2.5, b"\n")]
    return Reply(200, [("Content-Type", "text/event-stream")], chunks=chunks)


def _peak_with(tmp_path: Path, budget_mb: int) -> tuple[int, int, list[dict]]:
    with ScriptedUpstream(responder=_huge_unfinished_event, keep_log=False) as upstream:
        sets = (f"mcp_max_buffered_mb={budget_mb}", "flow_detail=0")
        with Proxy(upstream.port, tmp_path / f"b{budget_mb}", extra_sets=sets) as proxy:
            pid = proxy_pid(proxy)
            # A few calls first, so the baseline includes a warmed-up proxy.
            post_once(proxy.port, jbytes(tool_call("warm")), mcp_headers())
            before = rss_kib(pid)

            def call(n: int) -> int | None:
                got = post_once(proxy.port, jbytes(tool_call(n)), mcp_headers(), keep_body=False)
                return got.status

            with concurrent.futures.ThreadPoolExecutor(STREAMS) as pool:
                statuses = list(pool.map(call, range(STREAMS)))
            peak = hwm_kib(pid)
        assert statuses == [200] * STREAMS
    return before, peak, proxy.records()


def test_the_buffer_budget_holds_with_many_huge_unfinished_events(tmp_path: Path) -> None:
    budget_mb = 16
    before, peak, records = _peak_with(tmp_path, budget_mb)
    off_before, off_peak, _ = _peak_with(tmp_path, 1024)  # effectively no budget
    growth, off_growth = (peak - before) / 1024, (off_peak - off_before) / 1024
    calls = [r for r in records if r["kind"] == "request" and r["jsonrpc"]["id"] != "warm"]
    dropped = [r for r in calls if any("over_budget" in n for n in r["notes"])]
    line = figures(
        "buffer budget",
        streams=STREAMS,
        event_mib=EVENT_MIB,
        budget_mib=budget_mb,
        rss_growth_mib=round(growth, 1),
        rss_growth_without_budget_mib=round(off_growth, 1),
        dropped_for_budget=len(dropped),
        notes=sorted({n.split(":")[0] for r in calls for n in r["notes"]}),
    )
    assert len(calls) == STREAMS, line
    # Held by the core: the budget, plus what mitmproxy and the parser's line joins add
    # for the events within it; far below the 8 x 15 MiB the streams send.
    assert growth < budget_mb * 2.5, line
    assert off_growth > growth + 40, line
    assert len(dropped) >= STREAMS - budget_mb // EVENT_MIB - 1, line
    assert all(r["outcome"] in ("UNINSPECTED", "STREAM_INCOMPLETE") for r in calls), line


def test_retention_keeps_the_directory_under_its_limit_while_running(tmp_path: Path) -> None:
    retain_mb, calls = 3, 90
    words = "lorem ipsum dolor sit amet " * 70

    def respond(request: Received) -> Reply:
        content = [{"type": "text", "text": f"{i}: {words}"} for i in range(60)]
        result = {"content": content, "isError": False}
        return Reply(
            200,
            [("Content-Type", "application/json")],
            jbytes({"jsonrpc": "2.0", "id": request.rpc_id, "result": result}),
        )

    record_dir = tmp_path / "records"
    record_dir.mkdir()
    foreign = record_dir / "notes-of-someone-else.jsonl"
    foreign.write_bytes(b"x" * MIB)
    sizes: list[int] = []
    stop = threading.Event()

    def sample() -> None:
        while not stop.is_set():
            total = sum(p.stat().st_size for p in record_dir.glob("mcp-*.jsonl") if p.exists())
            sizes.append(total)
            time.sleep(0.02)

    sets = ("mcp_record_max_mb=1", f"mcp_retain_mb={retain_mb}", "mcp_record_bodies=true")
    upstream = ScriptedUpstream(responder=respond, keep_log=False)
    with upstream, Proxy(upstream.port, tmp_path, extra_sets=(*sets, "flow_detail=0")) as proxy:
        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        statuses = [
            post_once(proxy.port, jbytes(tool_call(f"r-{n}")), mcp_headers()).status
            for n in range(calls)
        ]
        stop.set()
        sampler.join(5)
    files = check_dir(proxy.record_dir)
    ids = sorted(int(r["jsonrpc"]["id"][2:]) for f in files for r in f.records)
    line = figures(
        "retention",
        retain_mib=retain_mb,
        calls=calls,
        written_mib=round(sum(len(words) * 60 for _ in range(calls)) / MIB, 1),
        max_dir_mib=round(max(sizes) / MIB, 2),
        samples=len(sizes),
        files_left=len(files),
        oldest_kept=ids[0] if ids else None,
    )
    assert statuses == [200] * calls, line
    assert max(sizes) <= retain_mb * MIB, line
    assert ids and ids[0] > 0 and ids[-1] == calls - 1, line  # the newest are kept
    assert foreign.exists() and foreign.stat().st_size == MIB, line
    assert not addon_failures(proxy.log_text()), line
