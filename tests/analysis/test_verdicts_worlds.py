"""`mcp-layers verdicts` over several recordings: each recording is its own world.

Random small recordings (real records, `new_record`) share client names, session ids and
record ids on purpose, so that a rule joining records across files would show: reading
them together must give each client exactly the aggregate of reading each alone. And
over every committed fixture, a verdict other than PASS and NOT_EXERCISED names its
evidence.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from tempfile import TemporaryDirectory
from typing import Any

import pytest
from analysis_helpers import FIXTURES, invoke
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from mcp_layers_analysis.verdicts import RULES, Verdict, combine
from mcp_layers_core.record import new_record

T0 = datetime(2026, 12, 1, 12, 0, 0, tzinfo=UTC)
CLIENTS = ("alpha@1", "beta@2")
SESSIONS = ("s-aaaaaaaaaa", "s-bbbbbbbbbb", "c-cccccccccc")
HEADERS = ["accept", "mcp-protocol-version", "mcp-session-id"]
BOTH = ["application/json", "text/event-stream"]


@dataclass
class Recording:
    """One recording's records, numbered and timed in order."""

    records: list[dict[str, Any]] = field(default_factory=list)
    at_s: float = 0.0

    def add(self, kind: str, gap_s: float, **fields: Any) -> None:
        self.at_s += gap_s
        ts = (T0 + timedelta(seconds=self.at_s)).isoformat(timespec="milliseconds")
        values: dict[str, Any] = {
            "protocolVersion": "2025-11-25",
            "durationMs": 10.0,
            "server": "127.0.0.1:1",
            "requestHeaders": HEADERS if kind != "session_end" else [],
            "accept": BOTH if kind in ("request", "notification") else ["text/event-stream"],
        }
        values.update(fields)
        self.records.append(
            new_record(id=len(self.records) + 1, kind=kind, ts=ts.replace("+00:00", "Z"), **values)
        )


def _rpc(rpc_id: int) -> dict[str, Any]:
    return {"id": rpc_id, "errorCode": None, "errorMessage": None}


# One step of a client's life: (what, client, session, gap in s, a free integer).
Step = tuple[str, int, int, float, int]

WHAT = (
    "initialize",
    "initialized",
    "call",
    "lost",
    "limited",
    "retry",
    "cut",
    "get",
    "get_405",
    "delete",
    "end",
)


def _play(rec: Recording, step: Step) -> None:
    """Append the records of one step."""
    what, c, s, gap, n = step
    who = {"client": CLIENTS[c], "session": SESSIONS[s]}
    if what == "initialize":
        headers = ["accept"] if n % 3 else None  # sometimes headers were not recorded
        rec.add(
            "request",
            gap,
            method="initialize",
            jsonrpc=_rpc(0),
            outcome="SUCCESS",
            httpStatuses=[200],
            requestHeaders=headers,
            previousSession=SESSIONS[n % 2] if n % 4 == 0 else None,
            **who,
        )
    elif what == "initialized":
        rec.add("notification", gap, method="notifications/initialized", **who)
    elif what == "call":
        rec.add(
            "request",
            gap,
            method="tools/call" if n % 2 else "tools/list",
            jsonrpc=_rpc(n % 4),
            outcome="SUCCESS",
            httpStatuses=[200],
            **who,
        )
    elif what == "lost":
        rec.add(
            "request",
            gap,
            method="tools/call",
            jsonrpc=_rpc(n % 4),
            outcome="HTTP_ERROR",
            httpStatuses=[404],
            notes=["session_lost"],
            **who,
        )
        rec.add("session_end", 0, endReason="not_found", httpStatuses=[404], **who)
    elif what == "limited":
        rec.add(
            "request",
            gap,
            method="tools/call" if n % 2 else "tools/list",
            jsonrpc=_rpc(n % 4),
            outcome="HTTP_ERROR",
            httpStatuses=[429],
            retryAfterMs=1000,
            **who,
        )
    elif what == "retry":
        rec.add(
            "request",
            gap,
            method="tools/call" if n % 2 else "tools/list",
            jsonrpc=_rpc(n % 4),
            outcome="SUCCESS",
            httpStatuses=[200],
            retryOrigin="resend" if n % 3 == 0 else "reissue",
            retryOf=max(1, len(rec.records)),
            retryDelayMs=gap * 1000,
            retryAfterHonored=gap >= 1,
            **who,
        )
    elif what == "cut":
        rec.add(
            "request" if n % 2 else "stream",
            gap,
            method="tools/call" if n % 2 else None,
            jsonrpc=_rpc(n % 4) if n % 2 else None,
            outcome="STREAM_INCOMPLETE" if n % 2 else None,
            httpStatuses=[200],
            contentType="text/event-stream",
            sse={"events": 1, "final": False, "end": ("eof", "complete", "error")[n % 3]},
            eventIds=True,
            retryMs=(None, 500, 2000)[n % 3],
            durationMs=100.0,
            **who,
        )
    elif what == "get":
        headers = sorted([*HEADERS, "last-event-id"]) if n % 2 else HEADERS
        rec.add(
            "stream",
            gap,
            httpStatuses=[200],
            contentType="text/event-stream",
            requestHeaders=headers,
            sse={"events": 0, "final": False, "end": ("error", "eof", "complete")[n % 3]},
            eventIds=n % 2 == 1,
            durationMs=float(n % 5) * 1000,
            injected={"rule": "middlebox.idle_cut", "action": "idle_cut"} if n % 7 == 0 else None,
            **who,
        )
    elif what == "get_405":
        rec.add("stream", gap, httpStatuses=[405], contentType=None, **who)
    elif what == "delete":
        rec.add(
            "session_end",
            gap,
            endReason="delete" if n % 2 else None,
            httpStatuses=[200] if n % 2 else [405],
            requestHeaders=["mcp-protocol-version", "mcp-session-id"],
            **who,
        )
    else:
        rec.add("session_end", gap, endReason=("shutdown", "idle", "evicted")[n % 3], **who)


steps = st.tuples(
    st.sampled_from(WHAT),
    st.integers(0, len(CLIENTS) - 1),
    st.integers(0, len(SESSIONS) - 1),
    st.sampled_from((0.0, 0.05, 0.6, 1.5, 3.0, 35.0)),
    st.integers(0, 20),
)
recordings = st.lists(st.lists(steps, min_size=1, max_size=12), min_size=2, max_size=3)


def _verdicts(*paths: Path) -> dict[tuple[str, str], str]:
    result = invoke("verdicts", *paths, "--format", "json", "--no-progress")
    assert result.exit_code in (0, 1, 3), result.output
    rows = json.loads(result.stdout) if result.stdout.strip() else []
    verdicts = {(r["client"], r["check"]): r["verdict"] for r in rows}
    # The exit status fails on a MUST broken, and on nothing else.
    if rows:
        assert result.exit_code == (3 if Verdict.FAIL in verdicts.values() else 0)
    return verdicts


# Derandomized so that CI runs the same 40 examples each time (150 random ones passed
# when this was written; a DELETE-only recording once named no client, fixed then).
@settings(
    max_examples=40,
    derandomize=True,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
)
@given(recordings)
def test_reading_recordings_together_is_the_aggregate_of_each_alone(
    worlds: list[list[Step]],
) -> None:
    with TemporaryDirectory() as tmp:
        paths = []
        for i, world in enumerate(worlds):
            rec = Recording()
            for step in world:
                _play(rec, step)
            path = Path(tmp) / f"rec-{i}.jsonl"
            path.write_text("".join(json.dumps(r) + "\n" for r in rec.records))
            paths.append(path)
        together = _verdicts(*paths)
        alone = [_verdicts(p) for p in paths]
    clients = {c for c, _ in together} | {c for each in alone for c, _ in each}
    for client in clients:
        for rule in RULES:
            each = [v.get((client, rule.id), Verdict.NOT_EXERCISED) for v in alone]
            got = together.get((client, rule.id), Verdict.NOT_EXERCISED)
            assert got == combine(Verdict(v) for v in each), (client, rule.id, each)


def test_combine_is_the_worst_verdict() -> None:
    assert combine([]) == Verdict.NOT_EXERCISED
    assert combine([Verdict.NOT_EXERCISED, Verdict.UNDECIDABLE]) == Verdict.UNDECIDABLE
    assert combine([Verdict.UNDECIDABLE, Verdict.PASS]) == Verdict.PASS
    assert combine([Verdict.PASS, Verdict.WARNING]) == Verdict.WARNING
    assert combine([Verdict.WARNING, Verdict.FAIL, Verdict.PASS]) == Verdict.FAIL


FIXTURE_FILES = sorted(
    p
    for p in [*FIXTURES.glob("*.jsonl"), *FIXTURES.glob("*.jsonl.gz")]
    if p.name not in ("empty.jsonl", "newer_version.jsonl")
)


@pytest.mark.parametrize("path", FIXTURE_FILES, ids=lambda p: p.name)
def test_evidence_is_never_empty_for_a_verdict_that_needs_it(path: Path) -> None:
    result = invoke("verdicts", path, "--format", "json", "--no-progress", "--lenient")
    if result.exit_code not in (0, 3):
        pytest.skip(f"not a readable recording: exit {result.exit_code}")
    for row in json.loads(result.stdout):
        if row["verdict"] not in ("PASS", "NOT_EXERCISED"):
            assert row["evidence"], row
