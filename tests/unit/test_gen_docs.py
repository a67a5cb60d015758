"""What the docs list that the code defines is generated from it (scripts/gen_docs.py), and
the example records in the docs are records the core writes."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path
from types import ModuleType
from typing import Any

from jsonschema import Draft202012Validator
from mcp_layers_analysis.cli import cli
from mcp_layers_core import faults
from mcp_layers_core.record import FIELD_NAMES, FIELDS, OUTCOMES, Kind

ROOT = Path(__file__).resolve().parents[2]
FIX = "run: make docs (or .venv/bin/python scripts/gen_docs.py), and commit what it rewrites"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("gen_docs", ROOT / "scripts" / "gen_docs.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


gen_docs = _load()
VALIDATOR = Draft202012Validator(json.loads((ROOT / "docs" / "record.schema.json").read_text()))


def region(path: str, name: str) -> str:
    text = (ROOT / path).read_text(encoding="utf-8")
    m = re.search(
        rf"<!-- generated: {name}(?: \([^)]*\))? -->\n(.*?)<!-- end generated -->", text, re.S
    )
    assert m, f"{path} has no generated region {name!r}"
    return m.group(1)


def records_in(path: str, name: str) -> list[dict[str, Any]]:
    block = region(path, name).split("```", 2)[1]
    return [json.loads(line) for line in block.splitlines()[1:] if line.strip()]


def test_every_generated_region_is_current() -> None:
    assert gen_docs.main(["--check"]) == 0, FIX


def test_every_region_in_the_docs_has_a_generator_and_every_generator_a_region() -> None:
    used = [
        name
        for doc in gen_docs.DOCS
        for name in gen_docs.region_names((ROOT / doc).read_text(encoding="utf-8"))
    ]
    assert set(used) <= set(gen_docs.REGIONS), "a region no generator writes"
    assert set(gen_docs.REGIONS) <= set(used), "a generator whose region is in no doc"


def test_the_example_session_is_what_the_core_writes_every_time() -> None:
    assert gen_docs.example_session() == gen_docs.example_session()


def test_the_docs_example_records_are_full_valid_records() -> None:
    examples = records_in("docs/record-format.md", "example_records")
    readme = records_in("README.md", "example_record")
    assert examples == gen_docs.example_session(), FIX
    assert readme == [gen_docs.readme_example()], FIX
    for record in [*examples, *readme]:
        assert list(VALIDATOR.iter_errors(record)) == [], record
        # Every field the definition has, the later ones too, in its order: an example
        # never shows a record older than the format it documents.
        assert tuple(record) == FIELD_NAMES
    required = {f.name for f in FIELDS if f.always}
    assert all(required <= set(r) for r in examples)


def test_the_example_session_shows_what_a_reader_needs() -> None:
    records = gen_docs.example_session()
    assert {r["kind"] for r in records} == {
        Kind.REQUEST,
        Kind.NOTIFICATION,
        Kind.SESSION_END,
        Kind.STREAM,
    }
    # The later fields a reader meets first carry values here, not only nulls.
    for name in ("requestHeaders", "accept", "eventIds", "retryMs", "sessionStats", "endReason"):
        assert any(r[name] not in (None, []) for r in records), name
    retry = gen_docs.readme_example()
    assert retry["retryOrigin"] == "reissue" and retry["unsafeRetry"] is True
    assert retry["httpStatuses"] == [503, 200] and retry["retryAfterHonored"] is True


def test_the_readme_names_every_preset_and_action() -> None:
    text = region("README.md", "presets")
    assert re.findall(r"`([\w.]+)`", text.split("Actions:")[0]) == faults.preset_names()
    assert re.findall(r"`(\w+)`", text.split("Actions:")[1]) == list(faults.ACTIONS)


def test_the_readme_names_every_outcome() -> None:
    listed = re.findall(r"`([A-Z_]+)`", region("README.md", "outcome_list"))
    assert sorted(listed) == sorted(o.value for o in OUTCOMES)


def test_the_cli_synopsis_has_every_command() -> None:
    text = region("docs/cli.md", "cli_synopsis")
    listed = re.findall(r"^mcp-layers (\S+)", text, re.M)
    assert listed == sorted(cli.commands), FIX  # type: ignore[attr-defined]
