"""Rotation: `--set mcp_record_max_mb=N` rotates without losing or splitting a record
(issue 6), through a real mitmdump.

With `mcp_record_bodies=true` each record carries its (redacted) answer, so a few dozen
calls from four concurrent clients make a few MiB: several parts at 1 MiB, one record
larger than the cap on its own (a record is never split, so it gets a part to itself),
and every record exactly once across the parts, each line whole, each part `0600`.
"""

from __future__ import annotations

import concurrent.futures
import re
from collections import Counter
from pathlib import Path

import pytest
from hardening_kit import figures
from mcp_layers_support.harness import Proxy
from mcp_layers_support.messages import jbytes, mcp_headers, tool_call
from mcp_layers_support.rawhttp import post_once
from mcp_layers_support.recordings import check_dir
from mcp_layers_support.scripted_upstream import Received, Reply, ScriptedUpstream

pytestmark = pytest.mark.e2e

MAX_MB = 1
CALLS = 48
BIG_CALL = 17  # its answer makes one record larger than the cap
PART = re.compile(r"^mcp-\d{8}T\d{6}Z(?:-(\d{3}))?\.jsonl$")


def respond(request: Received) -> Reply:
    rid = request.rpc_id
    n = int(str(rid).split("-")[1])
    items = 600 if n == BIG_CALL else 40 + n % 20
    words = "lorem ipsum dolor sit amet " * 70  # prose: nothing for the scrubber to take
    content = [{"type": "text", "text": f"{n}:{i}: {words}"} for i in range(items)]
    body = jbytes({"jsonrpc": "2.0", "id": rid, "result": {"content": content, "isError": False}})
    return Reply(200, [("Content-Type", "application/json")], body)


def test_rotation_never_loses_or_splits_a_record(tmp_path: Path) -> None:
    with ScriptedUpstream(responder=respond, keep_log=False) as upstream:
        sets = (f"mcp_record_max_mb={MAX_MB}", "mcp_record_bodies=true", "flow_detail=0")
        with Proxy(upstream.port, tmp_path, extra_sets=sets) as proxy:

            def call(n: int) -> int | None:
                body = jbytes(tool_call(f"rot-{n}", "fetch"))
                return post_once(proxy.port, body, mcp_headers()).status

            with concurrent.futures.ThreadPoolExecutor(4) as pool:
                statuses = list(pool.map(call, range(CALLS)))
    files = check_dir(proxy.record_dir)
    cap = MAX_MB * 1024 * 1024
    parts = sorted(int(m.group(1) or 1) for f in files if (m := PART.match(f.path.name)))
    records = [r for f in files for r in f.records]
    ids = Counter(r["jsonrpc"]["id"] for r in records if r["kind"] == "request")
    over = [(f.path.name, f.size, len(f.records)) for f in files if f.size > cap]
    line = figures(
        "rotation",
        max_mb=MAX_MB,
        calls=CALLS,
        parts=len(files),
        part_sizes=",".join(str(f.size) for f in files),
        records=len(records),
        distinct_ids=len(ids),
        torn_lines=sum(len(f.bad_lines) + (not f.ends_whole) for f in files),
        over_cap_parts=len(over),
        modes=",".join(sorted({oct(f.mode) for f in files})),
    )
    assert statuses == [200] * CALLS, line
    assert parts == list(range(1, len(files) + 1)) and len(files) >= 4, line
    assert all(not f.bad_lines and f.ends_whole for f in files), line
    assert sorted(ids) == sorted(f"rot-{n}" for n in range(CALLS)) and set(ids.values()) == {1}
    # Past the cap only when one record alone is larger than the cap (never split).
    assert all(count == 1 for _name, _size, count in over), line
    assert len(over) == 1, line
    assert {f.mode for f in files} == {0o600}, line
    assert sorted(r["id"] for r in records) == list(range(1, len(records) + 1)), line
