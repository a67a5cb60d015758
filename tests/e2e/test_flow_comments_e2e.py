"""The verdict travels with the flow: a real mitmdump saves its flows (`save_stream_file`,
i.e. `-w`) in front of the bundled server, the real SDK client makes calls (one failed by a
fault preset, one by the tool itself), and the saved flows, read back with mitmproxy's own
`FlowReader`, carry each record's comment and marker."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from mcp_layers_core.flow_comment import MARK_FAILED, MARK_INJECTED, comment_of, mark_of
from mcp_layers_demo.client import LIST_TOOLS
from mcp_layers_support.harness import SSE_STATEFUL, Proxies, Server, ServerPool
from mitmproxy import http, io
from test_faults_e2e import REFUSED, ClientRun, faulted

pytestmark = pytest.mark.e2e

RECORDS_KEY = "mcp_layers.records"  # mcp_layers.RECORDS_KEY (the script is not a package)


@pytest.fixture
def server(servers: ServerPool) -> Server:
    return servers.get(SSE_STATEFUL)


def saved_flows(path: Path) -> list[http.HTTPFlow]:
    with path.open("rb") as f:
        return [flow for flow in io.FlowReader(f).stream() if isinstance(flow, http.HTTPFlow)]


def test_saved_flows_carry_each_records_comment_and_mark(
    proxies: Proxies, server: Server, tmp_path: Path
) -> None:
    saved = tmp_path / "flows.out"
    done = faulted(
        proxies, server, "mcp_faults=errors.http_status_sequence", f"save_stream_file={saved}"
    )
    client = ClientRun(
        calls=[(LIST_TOOLS, {}), ("echo", {"text": "a"}), ("echo", {"text": "a"}), ("fail", {})]
    )
    done.run(client)
    assert client.error is None, client.error
    assert [r.error for r in client.results][1] == REFUSED

    by_id: dict[int, dict[str, Any]] = {r["id"]: r for r in done.records}
    flows = saved_flows(saved)
    commented = [f for f in flows if RECORDS_KEY in f.metadata]
    # Every record of a flow is on exactly one saved flow; only the proxy's own end of a
    # session (no flow) is on none.
    on_flows = [rid for f in commented for rid in f.metadata[RECORDS_KEY]]
    assert sorted(on_flows) == sorted(
        r["id"] for r in done.records if r.get("endReason") != "shutdown"
    ), done.failure_context()
    for f in commented:
        records = [by_id[rid] for rid in f.metadata[RECORDS_KEY]]
        assert f.comment == " | ".join(comment_of(r) for r in records)
        assert f.marked == next((m for m in map(mark_of, records) if m), "")
    # Flows the addon has no record for (GET streams) carry nothing of it.
    assert all(not f.comment and not f.marked for f in flows if f not in commented)

    first, again, failed = (r for r in done.records if r["method"] == "tools/call")
    flow_of = {rid: f for f in commented for rid in f.metadata[RECORDS_KEY]}
    assert flow_of[first["id"]].marked == MARK_INJECTED
    assert flow_of[first["id"]].comment == (
        f"#{first['id']} HTTP_ERROR 503 · transport · tools/call echo"
        " · injected: errors.http_status_sequence/http_status"
    )
    assert flow_of[again["id"]].marked == ""
    assert flow_of[again["id"]].comment == (
        f"#{again['id']} TOOL_SUCCESS · application · tools/call echo"
        f" · retry of #{first['id']} (reissue)"
    )
    assert flow_of[failed["id"]].marked == MARK_FAILED
    assert (
        flow_of[failed["id"]].comment
        == f"#{failed['id']} TOOL_ERROR · application · tools/call fail"
    )
    # The verdict rides in mitmproxy's metadata only: the request is the client's own
    # (an SSE answer streams through, so mitmproxy keeps no body of it to compare).
    request = json.loads(flow_of[again["id"]].request.content or b"")
    assert (request["method"], request["params"]["name"]) == ("tools/call", "echo")
