"""The synthetic generator writes records exactly in the documented format, realistically."""

from __future__ import annotations

import re
from collections import defaultdict

import analysis_oracle as oracle
from analysis_helpers import LEGACY, SYNTHETIC
from jsonschema import Draft202012Validator
from mcp_layers_analysis.schema import LAYERS, OUTCOMES
from mcp_layers_core.record import FIELD_NAMES
from mcp_layers_core.record_docs import json_schema
from mcp_layers_support.synthetic import TRACKER_FIELDS, generate

VALIDATOR = Draft202012Validator(json_schema())


def test_records_have_exactly_the_documented_fields_and_types() -> None:
    for rec in generate(3000, seed=1, scenario="s", inject_rate=0.05):
        assert tuple(rec) == FIELD_NAMES
        assert [e.message for e in VALIDATOR.iter_errors(rec)] == [], rec
        if rec["kind"] == "session_end":
            assert rec["method"] is None  # "else null", as the addon writes it
        assert rec["session"] is None or re.fullmatch(r"[sc]-[0-9a-f]{10}", rec["session"])
        if rec["outcome"] is None:
            assert rec["layer"] is None and rec["kind"] != "request"
        else:
            assert rec["kind"] == "request" and rec["layer"] in LAYERS


def test_legacy_records_lack_only_the_tracker_fields() -> None:
    fields = set(FIELD_NAMES) - set(TRACKER_FIELDS)
    assert all(set(r) == fields for r in oracle.load(LEGACY))


def test_same_seed_same_records() -> None:
    assert list(generate(500, seed=3)) == list(generate(500, seed=3))
    assert list(generate(500, seed=3)) != list(generate(500, seed=4))


def test_links_point_back_and_counters_go_up() -> None:
    records = list(generate(5000, seed=2, inject_rate=0.05))
    by_id = {r["id"]: r for r in records}
    ids = [r["id"] for r in records]
    # Unique; given at arrival and written at the end, so not in order (as in the addon).
    assert len(set(ids)) == len(ids) and ids != sorted(ids)
    position = {r["id"]: i for i, r in enumerate(records)}
    posts: dict[str, list[int]] = defaultdict(list)
    for r in records:
        if r["kind"] in ("request", "notification", "response") and r["session"]:
            posts[r["session"]].append(r["postCount"])  # GET streams and DELETEs are no POSTs
        if r["retryOf"] is not None:
            prev = by_id[r["retryOf"]]
            assert prev["client"] == r["client"]
            assert prev["method"] == r["method"] and prev["tool"] == r["tool"]
            assert r["attempt"] == prev["attempt"] + 1
            if r["retryDelayMs"] is not None:
                # The previous attempt had ended when this one began. (Two look-alike
                # clients on one host asking the same at once: the later is taken for a
                # retry of the one still in flight, with no delay, as the core says.)
                assert position[prev["id"]] < position[r["id"]]  # written before its retry
                assert r["httpStatuses"][: len(prev["httpStatuses"])] == prev["httpStatuses"]
        if r["continues"] is not None:
            assert by_id[r["continues"]]["outcome"] == "INPUT_REQUIRED"
        if r["retryOrigin"] == "resend":
            assert r["jsonrpc"]["id"] == by_id[r["retryOf"]]["jsonrpc"]["id"]
    for counts in posts.values():  # every POST of a session counted once
        assert len(set(counts)) == len(counts) and min(counts) >= 1


def test_the_fixture_has_a_realistic_mix() -> None:
    records = oracle.load(SYNTHETIC)
    seen = {r["outcome"] for r in records} - {None}
    assert seen == set(OUTCOMES)
    kinds = {"request", "notification", "response", "session_end", "stream"}
    assert {r["kind"] for r in records} == kinds
    assert {r["layer"] for r in records} - {None} == set(LAYERS)
    assert {r["retryOrigin"] for r in records} == {"none", "resend", "reissue", "reinit"}
    assert {r["endReason"] for r in records} >= {"delete", "not_found", "shutdown"}
    assert {r["contentType"] for r in records} >= {"text/event-stream", "application/json"}
    assert len({r["client"] for r in records}) == 5
    for flag in (
        "injected",
        "unsafeRetry",
        "continues",
        "previousSession",
        "negotiation",
        "retryAfterMs",
        "ackNote",
        "serverMethod",
    ):
        assert any(r[flag] for r in records), flag
    assert {r["retryAfterHonored"] for r in records} == {None, True, False}
