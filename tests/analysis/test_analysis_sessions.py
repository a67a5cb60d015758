"""`sessions` and `show` against the records themselves."""

from __future__ import annotations

import itertools
import json
from collections import defaultdict
from typing import Any

import analysis_oracle as oracle
from analysis_helpers import BASELINE, SYNTHETIC, invoke


def cli_json(*args: Any) -> list[dict[str, Any]]:
    result = invoke(*args, "--format", "json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_sessions_match_the_records() -> None:
    records = oracle.load(SYNTHETIC)
    want: dict[str, dict[str, Any]] = defaultdict(
        lambda: {"requests": 0, "failed": 0, "retries": 0, "posts": 0, "ts": []}
    )
    order: list[str] = []
    nexts = {}
    for r in records:
        if r.get("previousSession") and r["method"] == "initialize":
            nexts[r["previousSession"]] = r["session"]
        if r.get("session") is None:
            continue
        if r["session"] not in want:
            order.append(r["session"])
        w = want[r["session"]]
        w["ts"].append(r["ts"])
        w["posts"] = max(w["posts"], r["postCount"] or 0)  # GET streams: null
        if r["kind"] == "request":
            w["requests"] += 1
            probe = r.get("negotiation") is True or r.get("method") == "server/discover"
            w["failed"] += r["outcome"] not in oracle.SUCCESSISH and not probe
            w["retries"] += r.get("retryOf") is not None
        refused = any(n.startswith("not_ended") for n in r["notes"])
        if r["kind"] == "session_end" and "ended" not in w and not refused:
            w["ended"] = r["endReason"]
    rows = cli_json("sessions", SYNTHETIC)
    assert [r["session"] for r in rows] == order
    for row in rows:
        w = want[row["session"]]
        assert (row["requests"], row["failed"], row["retries"], row["posts"]) == (
            w["requests"],
            w["failed"],
            w["retries"],
            w["posts"],
        )
        assert row["started"] == min(w["ts"])
        assert row["next_session"] == nexts.get(row["session"])
        if "ended" in w:
            assert row["ended"] == w["ended"]
    assert {r["ended"] for r in rows} >= {"delete", "not_found", None}


def test_sessions_of_two_inputs_come_input_by_input() -> None:
    rows = cli_json("sessions", SYNTHETIC, BASELINE)
    scenarios = [r["scenario"] for r in rows]
    first_baseline = scenarios.index("baseline")
    assert set(scenarios[:first_baseline]) == {"flaky-503"}
    assert set(scenarios[first_baseline:]) == {"baseline"}


def test_sessions_filters_list_sessions_with_a_matching_record() -> None:
    rows = cli_json("sessions", SYNTHETIC, "--client", "inspector-cli")
    assert rows and {r["client"] for r in rows} == {"inspector-cli@2.12.0"}


def reinitialised_session() -> tuple[str, str]:
    for r in oracle.load(SYNTHETIC):
        if r.get("previousSession"):
            return r["session"], r["previousSession"]
    raise AssertionError("fixture has a re-initialised session")


def test_show_prints_every_post_in_order_with_what_it_retried() -> None:
    session, previous = reinitialised_session()
    records = [r for r in oracle.load(SYNTHETIC) if r.get("session") == session]
    rows = cli_json("show", session, SYNTHETIC)
    assert len(rows) == len(records)
    assert [r["id"] for r in rows] == [
        r["id"] for r in sorted(records, key=lambda r: (r["ts"], r["postCount"], r["id"]))
    ]
    assert rows[0]["offset_s"] == 0.0
    assert all(a["offset_s"] <= b["offset_s"] for a, b in itertools.pairwise(rows))
    assert rows[0]["call"] == "initialize"
    assert rows[0]["detail"] == f"replaces {previous}"
    reinit = [r for r in rows if r["retry"] and r["retry"].startswith("reinit of #")]
    assert reinit and reinit[0]["statuses"].startswith("404")
    by_id = {r["id"]: r for r in records}
    for row in rows:
        rec = by_id[row["id"]]
        assert row["outcome"] == rec["outcome"]
        assert row["attempt"] == rec.get("attempt")
        if rec.get("retryOf"):
            assert row["retry"] == f"{rec['retryOrigin']} of #{rec['retryOf']}"


def test_show_with_a_filter_and_an_unknown_session() -> None:
    session, _ = reinitialised_session()
    rows = cli_json("show", session, SYNTHETIC, "--method", "tools/call")
    assert rows and {r["call"].split()[0] for r in rows} == {"tools/call"}
    result = invoke("show", "s-0000000000", SYNTHETIC)
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == (
        "mcp-layers: no records of session s-0000000000 "
        "(list them with: mcp-layers sessions PATH)\n"
    )


def test_the_first_real_end_of_a_session_counts(tmp_path: Any) -> None:
    # From a real capture: a 404 ends the session (not_found); the client's DELETE after
    # it is refused (404, note not_ended:404) and ends nothing.
    lines = [
        {
            "v": 1,
            "id": 1,
            "kind": "request",
            "session": "s-a",
            "ts": "2026-11-30T16:17:00.955Z",
            "method": "tools/call",
            "outcome": "HTTP_ERROR",
            "httpStatuses": [404],
        },
        {
            "v": 1,
            "id": 2,
            "kind": "session_end",
            "session": "s-a",
            "endReason": "not_found",
            "ts": "2026-11-30T16:17:00.956Z",
            "httpStatuses": [404],
            "notes": [],
        },
        {
            "v": 1,
            "id": 3,
            "kind": "session_end",
            "session": "s-a",
            "endReason": "delete",
            "ts": "2026-11-30T16:17:01.000Z",
            "httpStatuses": [404],
            "notes": ["not_ended:404"],
        },
    ]
    path = tmp_path / "r.jsonl"
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    (row,) = cli_json("sessions", path)
    assert row["ended"] == "not_found"
