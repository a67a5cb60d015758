"""`mcp-layers verdicts` against the conformance suite's own verdict, on the same run.

The conformance suite (@modelcontextprotocol/conformance 0.1.16) has three client checks
that `mcp-layers verdicts` shares by id (`Rule.namespace == "conformance"`):
`client-sse-graceful-reconnect`, `client-sse-retry-timing`, `client-sse-last-event-id`,
all graded by its `sse-retry` scenario. Each case here runs a client scenario with a
client behind mitmdump with the addon (tests/peers/conformance_client.py), reads the
suite's checks (`-o DIR`: a checks.json per scenario) and grades the recording with
`mcp-layers verdicts --format json`. For every shared id, the suite's status and ours
agree:

- SUCCESS is PASS; WARNING is WARNING;
- FAILURE is FAIL where our rule is a MUST, WARNING where it is a SHOULD (the spec's
  level: the suite fails `client-sse-graceful-reconnect`, which the spec words as a
  SHOULD), in a session of the version whose text the rule cites; the suite grades every
  session by 2025-11-25's text, and its `sse-retry` server negotiates 2025-03-26, where
  a missed `retry:` delay is a WARNING for us and not polling after a close is no miss
  (UNDECIDABLE);
- a check the suite did not report is NOT_EXERCISED or UNDECIDABLE for us.

The clients: the official Python SDK client and the official TypeScript SDK client
(both resume as the spec asks, so the suite says SUCCESS to all three), and a scripted
client that reconnects late, too early, very late, without `Last-Event-ID` or not at
all, so that each of the suite's statuses for these checks happens on a real run.
`tools_call`, a scenario without the shared checks, is the control: nothing to grade.

The suite measures `client-sse-retry-timing` at its server, the addon at the proxy: the
two gaps differ by the proxy's hops. The test holds them within `MEASURE_SLACK_MS` of
each other and, where the suite's gap falls that close to one of its thresholds, accepts
the verdict on either side of it.

One disagreement is by design and pinned below
(`test_a_get_before_the_cut_is_no_reconnection`): the suite counts any GET, even one
opened before the POST's stream was closed, as the reconnection.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from conformance_run import (
    CONFORMANCE_PY_CLIENT,
    CONFORMANCE_TS_CLIENT,
    ConformanceRun,
    run_conformance,
    ts_client_env,
)
from mcp_layers_analysis.cli import cli
from mcp_layers_analysis.verdicts import CONFORMANCE, RULE, RULES, Level, Verdict
from mcp_layers_support import node_peers

pytestmark = pytest.mark.e2e

SCRIPTED_CLIENT = "mcp-layers-conformance-scripted@0.1.0"

#: The checks we share with the suite, and our level for each.
SHARED: dict[str, Level] = {r.id: r.level for r in RULES if r.namespace == CONFORMANCE}

GRACEFUL = "client-sse-graceful-reconnect"
TIMING = "client-sse-retry-timing"
LAST_EVENT_ID = "client-sse-last-event-id"
ALL_THREE = frozenset({GRACEFUL, TIMING, LAST_EVENT_ID})

#: The client scenarios of the installed suite that report a shared check (see
#: `test_the_cases_cover_every_scenario_with_a_shared_check`).
SHARED_SCENARIOS = frozenset({"sse-retry"})

#: How far apart the suite's gap (at its server) and ours (at the proxy) may be.
MEASURE_SLACK_MS = 50

#: The suite's `client-sse-retry-timing` thresholds for sse-retry's `retry: 500`
#: (EARLY_TOLERANCE 50, LATE_TOLERANCE 200, VERY_LATE_MULTIPLIER 2).
RETRY_MS = 500
EARLY_MS, LATE_MS, VERY_LATE_MS = RETRY_MS - 50, RETRY_MS + 200, RETRY_MS * 2

NOT_EVALUATED = frozenset({Verdict.NOT_EXERCISED.value, Verdict.UNDECIDABLE.value})


def scripted(**plan: Any) -> Callable[[node_peers.NodePeers], dict[str, str]]:
    return lambda _peers: {"MCP_LAYERS_SCRIPTED_CLIENT": json.dumps(plan)}


@dataclass(frozen=True)
class Case:
    id: str
    scenario: str
    #: The client, as its records name it.
    client: str
    #: The wrapper's environment for this client (none: the Python SDK client).
    env: Callable[[node_peers.NodePeers], dict[str, str]] | None = None
    #: The shared checks the suite must report on this run (the case is not vacuous).
    reported: frozenset[str] = frozenset()
    #: The suite's statuses this case exists to produce (the scripted client's).
    suite: dict[str, str] = field(default_factory=dict)


CASES = (
    Case("python-sdk/sse-retry", "sse-retry", CONFORMANCE_PY_CLIENT, None, ALL_THREE),
    Case("typescript-sdk/sse-retry", "sse-retry", CONFORMANCE_TS_CLIENT, ts_client_env, ALL_THREE),
    Case("python-sdk/tools_call", "tools_call", CONFORMANCE_PY_CLIENT),
    Case("typescript-sdk/tools_call", "tools_call", CONFORMANCE_TS_CLIENT, ts_client_env),
    Case(
        "scripted/late",
        "sse-retry",
        SCRIPTED_CLIENT,
        scripted(reconnectMs=850, lastEventId=True),
        ALL_THREE,
        {GRACEFUL: "SUCCESS", TIMING: "WARNING", LAST_EVENT_ID: "SUCCESS"},
    ),
    Case(
        "scripted/very-late-without-last-event-id",
        "sse-retry",
        SCRIPTED_CLIENT,
        scripted(reconnectMs=1300, lastEventId=False),
        ALL_THREE,
        {GRACEFUL: "SUCCESS", TIMING: "FAILURE", LAST_EVENT_ID: "WARNING"},
    ),
    Case(
        "scripted/too-early",
        "sse-retry",
        SCRIPTED_CLIENT,
        scripted(reconnectMs=150, lastEventId=True),
        ALL_THREE,
        {GRACEFUL: "SUCCESS", TIMING: "FAILURE", LAST_EVENT_ID: "SUCCESS"},
    ),
    Case(
        "scripted/never",
        "sse-retry",
        SCRIPTED_CLIENT,
        scripted(reconnectMs=None),
        # No GET at all: the suite reports the reconnection, and nothing it cannot measure.
        frozenset({GRACEFUL}),
        {GRACEFUL: "FAILURE"},
    ),
)


def _run(case: Case, peers: node_peers.NodePeers, workdir: Path) -> ConformanceRun:
    return run_conformance(
        peers, case.scenario, workdir, case.env(peers) if case.env is not None else None
    )


def ours(run: ConformanceRun) -> dict[str, dict[str, str]]:
    """`mcp-layers verdicts --format json` on the run's recording: client -> check -> verdict."""
    result = CliRunner().invoke(cli, ["verdicts", str(run.recording()), "--format", "json"])
    rows = json.loads(result.stdout)
    fails = any(r["verdict"] == Verdict.FAIL for r in rows)
    # Exit status 3 on a FAIL only (a WARNING does not fail it).
    assert result.exit_code == (3 if fails else 0), (result.exit_code, result.output[-2000:])
    table: dict[str, dict[str, str]] = {}
    for r in rows:
        table.setdefault(r["client"], {})[r["check"]] = r["verdict"]
    return table


def _ms(ts: str) -> float:
    return datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp() * 1000


def proxy_gap_ms(run: ConformanceRun) -> float | None:
    """The gap the proxy saw from the POST's stream closing to the client's next GET."""
    cut = [
        _ms(r["ts"]) + r["streamClosedMs"]
        for r in run.records
        if r["method"] == "tools/call" and r.get("streamClosedMs") is not None
    ]
    if len(cut) != 1:
        return None
    gets = sorted(_ms(r["ts"]) for r in run.records if r["kind"] == "stream")
    after = [t for t in gets if t >= cut[0] - 5]
    return after[0] - cut[0] if after else None


def timing_status(delay_ms: float) -> str:
    """The suite's status for a reconnection `delay_ms` after the cut (sse-retry's rule)."""
    if delay_ms < EARLY_MS or delay_ms > VERY_LATE_MS:
        return "FAILURE"
    return "WARNING" if delay_ms > LATE_MS else "SUCCESS"


def expected(check: str, status: str | None, version: str | None = None) -> set[str]:
    """Our verdicts that agree with the suite's status on a shared check, in a session of
    `version`: the suite grades every version by 2025-11-25's text; we grade a MUST miss
    as FAIL only under the version whose text has the MUST (and an unknown one)."""
    if status == "SUCCESS":
        return {Verdict.PASS.value}
    if status == "WARNING":
        return {Verdict.WARNING.value}
    if status == "FAILURE":
        if (version or "9") < RULE[check].spec:
            # The cited text is newer than the session: a MUST missed is a warning, a
            # SHOULD (graceful-reconnect's polling) no duty at all there.
            return {Verdict.WARNING.value if SHARED[check] == Level.MUST else "UNDECIDABLE"}
        return {Verdict.FAIL.value if SHARED[check] == Level.MUST else Verdict.WARNING.value}
    return set(NOT_EVALUATED)  # not reported (or INFO/SKIPPED): not evaluated


def suite_statuses(run: ConformanceRun) -> dict[str, str]:
    found: dict[str, str] = {}
    for check in SHARED:
        statuses = run.status(check)
        assert len(statuses) <= 1, f"the suite reported {check} {len(statuses)} times"
        if statuses:
            found[check] = statuses[0]
    return found


@pytest.fixture
def conformance(
    peers: node_peers.NodePeers, tmp_path: Path, request: pytest.FixtureRequest
) -> ConformanceRun:
    return _run(request.param, peers, tmp_path)


def test_the_shared_checks_are_the_suites_three() -> None:
    assert set(SHARED) == ALL_THREE
    assert SHARED == {GRACEFUL: Level.SHOULD, TIMING: Level.MUST, LAST_EVENT_ID: Level.SHOULD}


def test_the_cases_cover_every_scenario_with_a_shared_check(
    peers: node_peers.NodePeers,
) -> None:
    """Every place the installed suite emits a shared check id is inside a scenario we
    run: a new version that grades them elsewhere fails here, not silently."""
    source = peers.conformance.read_text(encoding="utf-8")
    names = [(m.start(), m.group(1)) for m in re.finditer(r"this\.name=`([^`]+)`", source)]
    emitted: dict[str, set[str]] = {}
    for check in SHARED:
        for m in re.finditer(re.escape(f"`{check}`"), source):
            scenario = max((n for n in names if n[0] < m.start()), default=(0, "?"))[1]
            emitted.setdefault(check, set()).add(scenario)
    assert emitted == {check: set(SHARED_SCENARIOS) for check in SHARED}
    assert {c.scenario for c in CASES if c.reported} == SHARED_SCENARIOS


@pytest.mark.parametrize("conformance", CASES, ids=[c.id for c in CASES], indirect=True)
def test_our_verdict_is_the_suites(
    conformance: ConformanceRun, request: pytest.FixtureRequest
) -> None:
    case: Case = request.node.callspec.params["conformance"]
    run = conformance
    suite = suite_statuses(run)
    assert set(suite) == case.reported, suite
    for check, status in case.suite.items():
        assert suite[check] == status, (check, run.checks)
    assert run.records, "nothing recorded"
    table = ours(run)
    assert set(table) == {case.client}, f"clients in the recording: {sorted(table)}"
    verdicts = table[case.client]

    versions = {r["protocolVersion"] for r in run.records if r["kind"] == "request"}
    version = max((v for v in versions if v), default=None)
    agreed = {check: expected(check, suite.get(check), version) for check in SHARED}
    (timing,) = [c for c in run.checks if c["id"] == TIMING] or [None]
    delay = (timing or {}).get("details", {}).get("actualDelayMs")
    if delay is not None:
        # The same reconnection, measured at the server and at the proxy.
        gap = proxy_gap_ms(run)
        assert gap is not None and abs(gap - delay) <= MEASURE_SLACK_MS, (gap, delay)
        near = {timing_status(delay + d) for d in (-MEASURE_SLACK_MS, 0, MEASURE_SLACK_MS)}
        assert timing_status(delay) == timing["status"], timing
        agreed[TIMING] = set().union(*(expected(TIMING, s, version) for s in near))
    disagree = {
        check: (suite.get(check, "(not reported)"), verdicts[check])
        for check in SHARED
        if verdicts[check] not in agreed[check]
    }
    assert not disagree, f"suite vs ours: {disagree}"


def test_a_get_before_the_cut_is_no_reconnection(
    peers: node_peers.NodePeers, tmp_path: Path
) -> None:
    """A known disagreement, the suite's: a client that opens its standalone GET stream
    first and never reconnects after the POST's stream is closed.

    The suite's sse-retry server counts every GET (`getConnectionCount`) and times the
    last one (`getReconnectionTime`), wherever it falls: the GET opened before the tool
    call makes `client-sse-graceful-reconnect` a SUCCESS, and `client-sse-retry-timing` a
    FAILURE with a negative delay ("reconnected too early (-N ms)"). The spec
    (2025-11-25, transports: "The client SHOULD then "poll" the SSE stream by attempting to
    reconnect") asks for a reconnection after the close; this client made none. Ours: no
    reconnection to time or to carry `Last-Event-ID` (NOT_EXERCISED both), and no miss of
    the polling SHOULD either, since the scenario's server negotiates 2025-03-26, where
    resuming is the client's choice (UNDECIDABLE)."""
    case = Case(
        "scripted/standalone-get-never",
        "sse-retry",
        SCRIPTED_CLIENT,
        scripted(reconnectMs=None, standaloneGet=True),
    )
    run = _run(case, peers, tmp_path)
    suite = suite_statuses(run)
    assert suite == {GRACEFUL: "SUCCESS", TIMING: "FAILURE", LAST_EVENT_ID: "WARNING"}, (
        run.failure_context()
    )
    (timing,) = [c for c in run.checks if c["id"] == TIMING]
    assert timing["details"]["actualDelayMs"] < 0, timing
    assert proxy_gap_ms(run) is None  # the proxy saw no GET after the cut
    mine = ours(run)[SCRIPTED_CLIENT]
    assert {check: mine[check] for check in SHARED} == {
        GRACEFUL: Verdict.UNDECIDABLE.value,
        TIMING: Verdict.NOT_EXERCISED.value,
        LAST_EVENT_ID: Verdict.NOT_EXERCISED.value,
    }
