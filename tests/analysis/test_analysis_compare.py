"""`compare` puts the summary and retries figures side by side, one column per group."""

from __future__ import annotations

import json
from typing import Any

import pytest
from analysis_helpers import BASELINE, SYNTHETIC, invoke


def cli_json(*args: Any) -> list[dict[str, Any]]:
    result = invoke(*args, "--format", "json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def test_one_column_per_client_with_the_summary_and_retries_figures() -> None:
    rows = {r["figure"]: r for r in cli_json("compare", SYNTHETIC)}
    summary = cli_json("summary", SYNTHETIC)
    retries = cli_json("retries", SYNTHETIC)
    clients = sorted({r["client"] for r in summary})
    assert list(rows["calls"]) == ["figure", *clients]
    for s in summary:
        if s["origin"] != "organic":
            continue
        c = s["client"]
        if s["breakdown"] == "all":
            assert rows["calls"][c] == s["calls"]
            assert rows["failure rate"][c] == pytest.approx(s["failure_rate"])
            assert rows["latency p95 (ms)"][c] == s["p95_ms"]
        elif s["breakdown"] == "outcome":
            assert rows[f"outcome {s['key']}"][c] == pytest.approx(s["share"])
        elif s["breakdown"] == "tool":
            assert rows[f"tool {s['key']}: calls"][c] == s["calls"]
    for r in retries:
        name = "retries: calls" if r["figure"] == "calls" else r["figure"]
        want = r["share"] if r["of"] is not None else r["value"]
        assert rows[name][r["client"]] == pytest.approx(want), name


def test_by_client_and_scenario_gives_a_column_per_pair() -> None:
    rows = cli_json("compare", SYNTHETIC, BASELINE, "--by", "client", "--by", "scenario")
    columns = list(rows[0])[1:]
    assert len(columns) == 10
    assert "peer-py-client@0.1 / baseline" in columns
    assert "peer-py-client@0.1 / flaky-503" in columns
    names = [r["figure"] for r in rows]
    assert len(names) == len(set(names))
    # Every column has the same per-outcome retry rows, in the record format's order.
    retried = [n for n in names if n.startswith("failed calls retried: ")]
    assert retried[0] == "failed calls retried: NO_RESPONSE"
    injected = next(r for r in rows if r["figure"] == "injected calls")
    assert injected["peer-py-client@0.1 / baseline"] == 0
    assert injected["peer-py-client@0.1 / flaky-503"] > 0


def test_by_version_groups_on_the_protocol_version() -> None:
    rows = cli_json("compare", SYNTHETIC, "--by", "version")
    assert list(rows[0])[1:] == ["2025-11-25", "2026-07-28"]
