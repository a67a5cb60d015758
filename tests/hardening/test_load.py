"""Load: 50 concurrent clients, 2,000 mixed POSTs through one mitmdump (issue 6).

Each client has its own keep-alive connection (reopened when an answer ends it), its
own session (`Mcp-Session-Id`) and sends its POSTs one after the other; together they
keep 50 exchanges in flight. The upstream (scripted, in this process) answers by the
mode each request names: JSON or SSE successes, tool errors, JSON-RPC errors, 500s,
503s with `Retry-After`, SSE streams cut before the answer, and connections reset
before any header (`mcp_layers_support.load_run`). Then, in the recording:

- exactly 2,000 request records (plus the proxy's `session_end` for each session);
- no torn or interleaved line: every line one whole JSON object, record ids unique;
- `postCount` per session is 1, 2, … n in the order the POSTs were sent (record ids
  are taken at the POST) and in file order;
- every record's outcome is the one its mode must give.

The added latency against plain mitmdump is measured by `benchmarks/load.py` (a timing
is a report, not a test on a shared CI machine); this prints the throughput.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from hardening_kit import addon_failures, figures
from mcp_layers_support.harness import Proxy
from mcp_layers_support.load_run import check_records, drive, respond
from mcp_layers_support.scripted_upstream import ScriptedUpstream

pytestmark = pytest.mark.e2e

CLIENTS = 50
POSTS = 2000


def test_2000_posts_from_50_clients(tmp_path: Path) -> None:
    with ScriptedUpstream(responder=respond, keep_log=False) as upstream:
        proxy = Proxy(upstream.port, tmp_path, scenario="load", extra_sets=("flow_detail=0",))
        with proxy:
            seen = asyncio.run(drive(proxy.port, CLIENTS, POSTS))
        answered = upstream.answered
    found, problems = check_records(proxy.record_dir, CLIENTS, POSTS)
    line = figures(
        "load",
        clients=CLIENTS,
        posts=POSTS,
        upstream_answered=answered,
        **found,
        **seen.figures(POSTS),
        statuses=dict(sorted(seen.statuses.items())),
    )
    assert answered == POSTS, line
    assert not problems, f"{line}\n" + "\n".join(problems)
    assert not addon_failures(proxy.log_text()), line
