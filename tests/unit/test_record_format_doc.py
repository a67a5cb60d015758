"""docs/record-format.md and the records the tracker builds must say the same thing."""

from __future__ import annotations

import json
import re
from pathlib import Path

from mcp_layers_core.classify import LAYER_OF, Layer, Outcome
from mcp_layers_core.events import PostReceived, ResponseBody, ResponseStarted
from mcp_layers_core.tracker import Tracker

DOC = (Path(__file__).resolve().parents[2] / "docs" / "record-format.md").read_text()


def table_fields(section: str) -> list[str]:
    body = DOC.split(section, 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    return re.findall(r"^\| `(\w+)` \|", body, flags=re.M)


def a_record() -> dict:
    t = Tracker()
    t.handle(PostReceived("f", 1.0, "h:1", "p:2", {}, b'{"jsonrpc":"2.0","id":1,"method":"ping"}'))
    t.handle(ResponseStarted("f", 1.1, 200, {"content-type": "application/json"}))
    (record,) = t.handle(ResponseBody("f", 1.2, b'{"jsonrpc":"2.0","id":1,"result":{}}'))
    return record


def test_fields_appear_in_the_documented_order() -> None:
    main = table_fields("## Fields")
    extra = table_fields("## Retry, session and fault fields")
    assert main[-2:] == ["scenario", "notes"]
    assert list(a_record()) == main[:-2] + extra + main[-2:]


def test_documented_outcomes_and_layers_are_the_real_ones() -> None:
    body = DOC.split("### Outcomes", 1)[1].split("\n## ", 1)[0]
    rows = re.findall(r"^\| `(\w+)` \| (\w+) \|", body, flags=re.M)
    assert {name for name, _ in rows} == {o.value for o in Outcome}
    assert {Outcome(name): Layer(layer) for name, layer in rows} == LAYER_OF


def test_example_lines_are_version_1_records_with_documented_fields() -> None:
    block = DOC.split("```jsonl", 1)[1].split("```", 1)[0]
    documented = set(table_fields("## Fields")) | set(
        table_fields("## Retry, session and fault fields")
    )
    lines = [json.loads(line) for line in block.strip().splitlines()]
    assert lines
    for record in lines:
        assert record["v"] == 1 and set(record) <= documented
