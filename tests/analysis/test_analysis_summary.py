"""`summary` against the naive oracle: counts exact, percentiles within the stated bound."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import analysis_oracle as oracle
import pytest
from analysis_helpers import BASELINE, LEGACY, SYNTHETIC, invoke
from mcp_layers_analysis.histogram import RELATIVE_ERROR

PCT = {"p50_ms": 0.50, "p95_ms": 0.95, "p99_ms": 0.99}


def summary_rows(*args: Any) -> list[dict[str, Any]]:
    result = invoke("summary", *args, "--format", "json", "--top", "1000")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def check_against_oracle(
    rows: list[dict[str, Any]], records: list[dict[str, Any]], by: tuple[str, ...] = ("client",)
) -> None:
    want = oracle.summary(records, by)
    got_keys = set()
    for row in rows:
        key = (*(row[d] for d in by), row["origin"], row["breakdown"], row["key"])
        got_keys.add(key)
        cell = want[key]
        assert row["calls"] == cell["calls"], key
        assert row["failed"] == cell["failed"], key
        total = want[(*key[:-2], "all", None)]["calls"]
        assert row["share"] == pytest.approx(cell["calls"] / total)
        assert row["failure_rate"] == pytest.approx(cell["failed"] / cell["calls"])
        for column, q in PCT.items():
            exact = oracle.nearest_rank(cell["durations"], q)
            # Reported values are rounded to the microsecond after the bucket's error.
            assert abs(row[column] - exact) <= exact * RELATIVE_ERROR + 0.0005 + 1e-9, (
                key,
                column,
                row[column],
                exact,
            )
    assert got_keys == set(want)


@pytest.mark.parametrize("path", [SYNTHETIC, BASELINE, LEGACY], ids=lambda p: p.name)
def test_summary_matches_oracle(path: Path) -> None:
    check_against_oracle(summary_rows(path), oracle.load(path))


@pytest.mark.parametrize("by", [("scenario",), ("version",), ("client", "scenario")])
def test_summary_by_dimensions(by: tuple[str, ...]) -> None:
    records = oracle.load(SYNTHETIC) + oracle.load(BASELINE)
    by_args = [a for d in by for a in ("--by", d)]
    check_against_oracle(summary_rows(SYNTHETIC, BASELINE, *by_args), records, by)


def test_filters_choose_the_records() -> None:
    records = [
        r
        for r in oracle.load(SYNTHETIC)
        if r["client"] in ("peer-py-client@0.1", "peer-ts-client@0.1")
        and r["method"] == "tools/call"
        and "2026-11-30T15:00:05.000Z" <= r["ts"] < "2026-11-30T15:00:20.000Z"
    ]
    rows = summary_rows(
        SYNTHETIC,
        "--client",
        "peer-py-client",
        "--client",
        "peer-ts-client@0.1",
        "--method",
        "tools/call",
        "--since",
        "2026-11-30T15:00:05Z",
        "--until",
        "2026-11-30T15:00:20Z",
    )
    check_against_oracle(rows, records)


def test_tool_and_scenario_filters() -> None:
    records = [
        r
        for r in oracle.load(SYNTHETIC) + oracle.load(BASELINE)
        if r.get("tool") == "search" and r["scenario"] == "baseline"
    ]
    rows = summary_rows(SYNTHETIC, BASELINE, "--tool", "search", "--scenario", "baseline")
    check_against_oracle(rows, records)


def test_top_limits_codes_and_statuses() -> None:
    result = invoke("summary", SYNTHETIC, "--format", "json", "--top", "1")
    rows = json.loads(result.stdout)
    for breakdown in ("jsonrpc_error", "http_status"):
        per_group: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for r in rows:
            if r["breakdown"] == breakdown:
                per_group.setdefault((r["client"], r["origin"]), []).append(r)
        assert per_group and all(len(v) == 1 for v in per_group.values())
    full = summary_rows(SYNTHETIC)
    tops = {(r["client"], r["origin"]): r["calls"] for r in rows if r["breakdown"] == "http_status"}
    for r in full:
        if r["breakdown"] == "http_status":
            assert r["calls"] <= tops[(r["client"], r["origin"])]


def test_injected_calls_are_apart_from_organic() -> None:
    rows = summary_rows(SYNTHETIC)
    injected = [r for r in rows if r["origin"] == "injected"]
    assert injected, "the fixture has injected faults"
    rules = {r["key"] for r in injected if r["breakdown"] == "rule"}
    assert rules == {"flaky-503"}
    assert not [r for r in summary_rows(BASELINE) if r["origin"] == "injected"]


def test_rows_come_in_a_stable_order() -> None:
    rows = summary_rows(SYNTHETIC)
    clients = [r["client"] for r in rows if r["breakdown"] == "all" and r["origin"] == "organic"]
    assert clients == sorted(clients)
    first = [r for r in rows if r["client"] == clients[0] and r["origin"] == "organic"]
    assert first[0]["breakdown"] == "all"
    layers = [r["key"] for r in first if r["breakdown"] == "layer"]
    order = ["transport", "protocol", "application", "interaction", "proxy"]
    assert layers == [x for x in order if x in layers]
