"""The record definition, what is generated from it, and the records the core builds agree."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from jsonschema import Draft202012Validator
from mcp_layers_core import record_docs
from mcp_layers_core.classify import LAYER_OF, Outcome
from mcp_layers_core.events import PostReceived, ResponseBody, ResponseStarted
from mcp_layers_core.record import FIELD_NAMES, FIELDS, FORMAT_VERSION, OUTCOMES, new_record
from mcp_layers_core.tracker import Tracker, records_of

DOCS = Path(__file__).resolve().parents[2] / "docs"
DOC = (DOCS / "record-format.md").read_text()
SCHEMA = json.loads((DOCS / "record.schema.json").read_text())
VALIDATOR = Draft202012Validator(SCHEMA)


def a_record() -> dict[str, Any]:
    t = Tracker()
    t.handle(PostReceived("f", 1.0, "h:1", "p:2", {}, b'{"jsonrpc":"2.0","id":1,"method":"ping"}'))
    t.handle(ResponseStarted("f", 1.1, 200, {"content-type": "application/json"}))
    (record,) = records_of(
        t.handle(ResponseBody("f", 1.2, b'{"jsonrpc":"2.0","id":1,"result":{}}'))
    )
    return record


def test_generated_files_are_current() -> None:
    assert record_docs.main(["--docs", str(DOCS), "--check"]) == 0, (
        "run: python -m mcp_layers_core.record_docs"
    )


def test_the_schema_is_valid_json_schema_2020_12() -> None:
    Draft202012Validator.check_schema(SCHEMA)


def test_records_carry_the_defined_fields_in_order() -> None:
    assert tuple(a_record()) == FIELD_NAMES
    assert tuple(new_record()) == FIELD_NAMES


def test_a_built_record_validates() -> None:
    assert list(VALIDATOR.iter_errors(a_record())) == []


def test_new_record_refuses_an_unknown_field() -> None:
    with pytest.raises(KeyError, match="outcom"):
        new_record(outcom="SUCCESS")


def test_outcome_layers_are_the_classifiers() -> None:
    assert set(OUTCOMES) == set(Outcome)
    assert {o: i.layer for o, i in OUTCOMES.items()} == LAYER_OF


@pytest.mark.parametrize(
    ("change", "why"),
    [
        (lambda r: r.pop("v"), "missing v"),
        (lambda r: r.update(v=FORMAT_VERSION + 1), "a newer version"),
        (lambda r: r.update(outcome="SUCCEEDED"), "an unknown outcome"),
        (lambda r: r.update(layer="network"), "an unknown layer"),
        (lambda r: r.update(id="1"), "an id that is a string"),
        (lambda r: r.update(httpStatuses=["200"]), "a status that is a string"),
        (lambda r: r.update(notes="none"), "notes not a list"),
        (lambda r: r.update(ts="2026-11-30 15:02:51"), "a timestamp not in the format"),
        (lambda r: r.update(extra=1), "an unknown field"),
        (lambda r: r["jsonrpc"].update(errorCode=1.5), "a fractional error code"),
        (lambda r: r.update(retryOrigin=None), "retryOrigin null"),
        (lambda r: r.update(sse={"events": 1}), "an incomplete sse object"),
    ],
)
def test_the_schema_is_strict(change: Any, why: str) -> None:
    record = copy.deepcopy(a_record())
    change(record)
    assert list(VALIDATOR.iter_errors(record)), f"accepted {why}"


def test_legacy_records_without_later_fields_validate() -> None:
    record = a_record()
    for f in FIELDS:
        if not f.always:
            del record[f.name]
    assert list(VALIDATOR.iter_errors(record)) == []


def test_example_lines_are_valid_records() -> None:
    block = DOC.split("```jsonl", 1)[1].split("```", 1)[0]
    lines = [json.loads(line) for line in block.strip().splitlines()]
    assert lines
    for record in lines:
        assert list(VALIDATOR.iter_errors(record)) == [], record


def test_committed_recordings_validate() -> None:
    """The real captures and the synthetic fixtures are records like any other."""
    fixtures = Path(__file__).resolve().parents[1] / "analysis" / "fixtures"
    paths = [*sorted(fixtures.glob("real_*.jsonl")), fixtures / "synthetic.jsonl"]
    assert len(paths) > 5
    for path in paths:
        for lineno, line in enumerate(path.read_text().splitlines(), 1):
            errors = [e.message for e in VALIDATOR.iter_errors(json.loads(line))]
            assert errors == [], f"{path.name}:{lineno}: {errors}"
