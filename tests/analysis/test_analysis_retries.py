"""`retries` against the oracle, and the link-following rules on hand-made recordings."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import analysis_oracle as oracle
import orjson
import pytest
from analysis_helpers import BASELINE, LEGACY, SYNTHETIC, invoke
from mcp_layers_analysis import inputs
from mcp_layers_analysis.histogram import RELATIVE_ERROR


def retries_rows(*args: Any) -> list[dict[str, Any]]:
    result = invoke("retries", *args, "--format", "json")
    assert result.exit_code == 0, result.stderr
    return json.loads(result.stdout)


def expected(f: dict[str, Any]) -> dict[str, tuple[Any, Any]]:
    """Figure name -> (value, of), from the oracle's counts."""
    failed = sum(f["failed"].values())
    out: dict[str, tuple[Any, Any]] = {
        "calls": (f["calls"], None),
        "failed calls": (failed, f["calls"]),
        "failed calls retried": (sum(f["retried"].values()), failed),
        "logical calls": (f["logical"], None),
        "attempts per logical call": (f["calls"] / f["logical"] if f["logical"] else None, None),
        "most attempts of one call": (f["max_attempt"] or None, None),
        "logical calls retried": (f["second"], f["logical"]),
        "retries": (f["retries"], None),
        "responses with Retry-After": (f["retry_after"], None),
        "Retry-After honoured": (f["honoured"], f["honoured"] + f["not_honoured"]),
        "unsafe retries": (f["unsafe"], f["retries"]),
        "futile retries (-32602 repeated)": (f["futile"], f["retries"]),
        "sessions ended by 404": (f["ended_404"], None),
        "sessions ended by 404, never re-initialised": (
            f["ended_404"] - f["reinitialised"],
            f["ended_404"],
        ),
        "input-required results": (f["ir"], None),
        "input-required results continued": (f["continued"], f["ir"]),
        "continued results whose chain completed": (f["completed"], f["continued"]),
    }
    for outcome, n in f["failed"].items():
        out[f"failed calls retried: {oracle.label(outcome)}"] = (f["retried"][outcome], n)
    for origin in ("resend", "reissue", "reinit"):
        out[f"retries: {origin}"] = (f["origins"][origin], f["retries"])
    return out


def check(
    rows: list[dict[str, Any]],
    figs: dict[tuple[str, ...], dict[str, Any]],
    by: tuple[str, ...] = ("client",),
) -> None:
    seen: dict[tuple[str, ...], set[str]] = {}
    for row in rows:
        g = tuple(row[d] for d in by)
        f = figs[g]
        seen.setdefault(g, set()).add(row["figure"])
        if row["figure"].startswith("retry delay"):
            q = 0.5 if row["figure"].endswith("p50") else 0.95
            if not f["delays"]:
                assert row["value"] is None
                continue
            exact = oracle.nearest_rank(f["delays"], q)
            assert abs(row["value"] - exact) <= exact * RELATIVE_ERROR + 0.0005, row
            continue
        value, of = expected(f)[row["figure"]]
        assert row["value"] == pytest.approx(value), (g, row)
        assert row["of"] == of, (g, row)
        if of:
            assert row["share"] == pytest.approx(value / of)
    for g, names in seen.items():
        assert set(expected(figs[g])) <= names | {"most attempts of one call"}
    assert set(seen) == {g for g, f in figs.items() if f["calls"]}


@pytest.mark.parametrize("path", [SYNTHETIC, BASELINE], ids=lambda p: p.name)
def test_retries_match_oracle(path: Path) -> None:
    check(retries_rows(path), oracle.retries([oracle.load(path)]))


def test_two_recordings_by_client_and_scenario() -> None:
    by = ("client", "scenario")
    figs = oracle.retries([oracle.load(SYNTHETIC), oracle.load(BASELINE)], by)
    check(retries_rows(SYNTHETIC, BASELINE, "--by", "client", "--by", "scenario"), figs, by)


def test_filters_count_matching_records_but_follow_every_link() -> None:
    def keep(r: dict[str, Any]) -> bool:
        return r.get("method") == "tools/call"

    figs = oracle.retries([oracle.load(SYNTHETIC)], keep=keep)
    check(retries_rows(SYNTHETIC, "--method", "tools/call"), figs)


def test_legacy_records_have_no_retry_links() -> None:
    # Written before the tracker: no retryOf, no previousSession. Nothing is a retry, and
    # a session lost to a 404 cannot be shown re-initialised.
    rows = retries_rows(LEGACY)
    check(rows, oracle.retries([oracle.load(LEGACY)]))
    by_name = {(r["client"], r["figure"]): r for r in rows}
    assert all(r["value"] == 0 for (_, name), r in by_name.items() if name == "retries")
    lost = [
        r
        for (_, name), r in by_name.items()
        if name == "sessions ended by 404, never re-initialised"
    ]
    assert all(r["value"] == r["of"] for r in lost)


# --------------------------------------------------------------------- hand-made links


def rec(id: int, outcome: str | None, **fields: Any) -> dict[str, Any]:
    base: dict[str, Any] = {
        "v": 1,
        "id": id,
        "kind": "request" if outcome else "notification",
        "ts": f"2026-11-30T15:00:{id % 60:02d}.000Z",
        "durationMs": 5.0,
        "session": "s-a",
        "client": "c@1",
        "method": "tools/call",
        "tool": "t",
        "httpStatuses": [200],
        "jsonrpc": {"id": id, "errorCode": None, "errorMessage": None},
        "outcome": outcome,
        "retryOrigin": "none",
        "attempt": 1,
        "retryOf": None,
    }
    base.update(fields)
    return base


def write_jsonl(path: Path, records: list[dict[str, Any]]) -> Path:
    path.write_bytes(b"".join(orjson.dumps(r) + b"\n" for r in records))
    return path


def figures_of(path: Path | list[Path]) -> dict[str, Any]:
    """Figure name -> (value, of), as `retries` prints them for the one client."""
    paths = path if isinstance(path, list) else [path]
    rows = retries_rows(*paths)
    assert {r["client"] for r in rows} == {"c@1"}
    return {r["figure"]: (r["value"], r["of"]) for r in rows}


CHAIN = [
    rec(1, "SUCCESS", method="initialize", tool=None),
    rec(2, "JSONRPC_ERROR", jsonrpc={"id": 2, "errorCode": -32602, "errorMessage": "x"}),
    rec(
        3,
        "JSONRPC_ERROR",
        attempt=2,
        retryOf=2,
        retryOrigin="reissue",
        jsonrpc={"id": 3, "errorCode": -32602, "errorMessage": "x"},
    ),
    rec(4, "HTTP_ERROR", httpStatuses=[503], retryAfterMs=1000),
    rec(
        5,
        "NO_RESPONSE",
        attempt=2,
        retryOf=4,
        retryOrigin="reissue",
        retryAfterHonored=True,
        httpStatuses=[503],
        toolSafety="unsafe",
    ),
    rec(
        6,
        "TOOL_SUCCESS",
        attempt=3,
        retryOf=5,
        retryOrigin="resend",
        unsafeRetry=True,
        httpStatuses=[503, 200],
        retryDelayMs=250.0,
    ),
    rec(7, "INPUT_REQUIRED"),
    rec(8, "INPUT_REQUIRED", continues=7),
    rec(9, "STREAM_INCOMPLETE", continues=8),
    rec(10, "TOOL_SUCCESS", continues=8, retryOf=9, attempt=2, retryOrigin="resend"),
    rec(11, "INPUT_REQUIRED"),
    rec(12, "HTTP_ERROR", httpStatuses=[404]),
    {**rec(13, None), "kind": "session_end", "endReason": "not_found", "outcome": None},
    rec(14, "SUCCESS", method="initialize", tool=None, session="s-b", previousSession="s-a"),
    rec(
        15,
        "TOOL_SUCCESS",
        session="s-b",
        attempt=2,
        retryOf=12,
        retryOrigin="reinit",
        httpStatuses=[404, 200],
    ),
    rec(16, "HTTP_ERROR", session="s-c", httpStatuses=[404]),
]


def test_links_on_a_hand_made_recording(tmp_path: Path) -> None:
    got = figures_of(write_jsonl(tmp_path / "r.jsonl", CHAIN))
    assert got["calls"] == (15, None)
    assert got["failed calls"] == (7, 15)
    assert got["failed calls retried"] == (5, 7)  # 2, 4, 5, 9, 12 (3 and 16 were not)
    assert got["failed calls retried: JSONRPC_ERROR"] == (1, 2)
    assert got["failed calls retried: HTTP_ERROR"] == (2, 3)
    assert got["futile retries (-32602 repeated)"] == (1, 5)
    assert got["unsafe retries"] == (1, 5)
    assert got["Retry-After honoured"] == (1, 1)
    assert got["retries: resend"] == (2, 5)
    assert got["retries: reinit"] == (1, 5)
    assert got["most attempts of one call"] == (3, None)
    assert got["sessions ended by 404"] == (2, None)  # s-a and s-c
    assert got["sessions ended by 404, never re-initialised"] == (1, 2)  # s-c
    assert got["input-required results"] == (3, None)
    assert got["input-required results continued"] == (2, 3)  # 7 and 8; 11 was not
    assert got["continued results whose chain completed"] == (2, 2)  # via 9's resend


def test_concatenated_recordings_restart_ids(tmp_path: Path) -> None:
    # Two runs' files joined: ids restart at 1, so id 2 of the second is not id 2 of the
    # first (whose retry, id 3 in the second file, must not be linked to the first's 2).
    first = CHAIN[:3]
    second = [
        rec(1, "SUCCESS", method="initialize", tool=None),
        rec(2, "TOOL_ERROR"),
        rec(3, "JSONRPC_ERROR", attempt=2, retryOf=2, retryOrigin="reissue"),
    ]
    joined = write_jsonl(tmp_path / "joined.jsonl", first + second)
    got = figures_of(joined)
    assert got["futile retries (-32602 repeated)"] == (1, 2)  # only the first file's
    assert got["failed calls retried: TOOL_ERROR"] == (1, 1)
    separate = figures_of(
        [write_jsonl(tmp_path / "a.jsonl", first), write_jsonl(tmp_path / "b.jsonl", second)]
    )
    assert got == separate


def test_ids_out_of_order_within_a_recording_are_one_run(tmp_path: Path) -> None:
    # The addon numbers records as requests arrive and writes them as they end: a slow
    # call's record comes after faster later ones. That is not a new run.
    out_of_order = [CHAIN[0], CHAIN[3], CHAIN[2 - 1], CHAIN[2], CHAIN[4], CHAIN[5]]
    got = figures_of(write_jsonl(tmp_path / "r.jsonl", out_of_order))
    assert got["futile retries (-32602 repeated)"] == (1, 3)
    assert got["failed calls retried: HTTP_ERROR"] == (1, 1)


def test_a_retry_in_a_rotated_part_links_to_the_first_part(tmp_path: Path) -> None:
    # mcp-<start>-002.jsonl carries on the run's ids; by name it sorts before the first
    # part, so directories and globs are read in run order instead.
    runs = tmp_path / "recordings"
    runs.mkdir()
    write_jsonl(runs / "mcp-20261130T154121Z.jsonl", CHAIN[:4])
    write_jsonl(runs / "mcp-20261130T154121Z-002.jsonl", CHAIN[4:7])
    write_jsonl(
        runs / "mcp-20261130T170000Z.jsonl", [rec(1, "SUCCESS", method="initialize", tool=None)]
    )
    names = [Path(s.name).name for s in inputs.expand([str(runs)])]
    assert names == [
        "mcp-20261130T154121Z.jsonl",
        "mcp-20261130T154121Z-002.jsonl",
        "mcp-20261130T170000Z.jsonl",
    ]
    got = figures_of(runs)
    assert got["failed calls retried: HTTP_ERROR"] == (1, 1)  # 4 (part 1) by 5 (part 2)
    assert got["failed calls retried: NO_RESPONSE"] == (1, 1)
