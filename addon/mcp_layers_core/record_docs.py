"""Generate what is derived from the record definition: the JSON Schema and the doc's tables.

    python -m mcp_layers_core.record_docs          # rewrite both files
    python -m mcp_layers_core.record_docs --check  # exit 1 if either is stale

`docs/record.schema.json` is written whole. In `docs/record-format.md` only the regions
between `<!-- generated: NAME -->` and `<!-- end generated -->` are replaced, so the prose
around them stays hand-written. Regions this module does not know (the example records)
are left alone: `scripts/gen_docs.py` writes those, and everything this module writes too.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

from .record import (
    FIELDS,
    FORMAT_VERSION,
    NOTE_MEANING,
    OUTCOMES,
    AnyJson,
    Bool,
    Enum,
    FieldType,
    Int,
    ListOf,
    Num,
    Obj,
    RpcId,
    Str,
)

SCHEMA_ID = "https://mcp-layers.invalid/record.schema.json"


# -- JSON Schema -----------------------------------------------------------------------


def _type_schema(t: FieldType) -> dict[str, Any]:
    if isinstance(t, Int):
        return {"type": "integer"} if t.const is None else {"const": t.const}
    if isinstance(t, Num):
        return {"type": "number"}
    if isinstance(t, Str):
        return {"type": "string"} if t.pattern is None else {"type": "string", "pattern": t.pattern}
    if isinstance(t, Bool):
        return {"type": "boolean"}
    if isinstance(t, Enum):
        return {"enum": [v.value for v in t.values]}
    if isinstance(t, ListOf):
        return {"type": "array", "items": _type_schema(t.item)}
    if isinstance(t, RpcId | AnyJson):
        # An id is recorded as the client sent it, even when JSON-RPC would refuse it.
        return {}
    assert isinstance(t, Obj)
    return {
        "type": "object",
        "properties": {
            m.name: _nullable(_type_schema(m.type), m.nullable, m.meaning) for m in t.members
        },
        "required": [m.name for m in t.members],
        "additionalProperties": False,
    }


def _nullable(schema: dict[str, Any], nullable: bool, meaning: str) -> dict[str, Any]:
    if not schema:  # any JSON value, null included
        return {"description": meaning}
    if nullable:
        schema = {"anyOf": [schema, {"type": "null"}]}
    return {"description": meaning, **schema}


def json_schema() -> dict[str, Any]:
    """The record as JSON Schema 2020-12: strict (no unknown field, every type checked)."""
    return {
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "$id": SCHEMA_ID,
        "title": f"mcp-layers record, format version {FORMAT_VERSION}",
        "description": (
            "One line of a recording written by the mcp-layers mitmproxy addon. Generated "
            "from addon/mcp_layers_core/record.py; do not edit."
        ),
        "type": "object",
        "properties": {
            f.name: _nullable(_type_schema(f.type), f.nullable, f.meaning) for f in FIELDS
        },
        "required": [f.name for f in FIELDS if f.always],
        "additionalProperties": False,
    }


def schema_text() -> str:
    return json.dumps(json_schema(), indent=2, ensure_ascii=False) + "\n"


# -- Markdown ----------------------------------------------------------------------------


def _type_cell(t: FieldType, nullable: bool) -> str:
    if isinstance(t, Int):
        name = "int" if t.const is None else f"int (`{t.const}`)"
    elif isinstance(t, Num):
        name = "number"
    elif isinstance(t, Str):
        name = "string"
    elif isinstance(t, Bool):
        name = "bool"
    elif isinstance(t, Enum):
        name = "string (" + ", ".join(f"`{v.value}`" for v in t.values) + ")"
    elif isinstance(t, ListOf):
        name = f"list of {_type_cell(t.item, False)}"
    elif isinstance(t, RpcId):
        return "string, number or null (as sent)"
    elif isinstance(t, AnyJson):
        return "any JSON"
    else:
        name = "object"
    return f"{name} or null" if nullable else name


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def fields_table() -> str:
    rows = ["| field | type | since | meaning |", "|---|---|---|---|"]
    for f in FIELDS:
        since = f"v{f.since}" if f.always else f"v{f.since} (later)"
        meaning = f.meaning
        if isinstance(f.type, Obj):
            members = "; ".join(
                f"`{m.name}` ({_type_cell(m.type, m.nullable)}): {m.meaning}"
                for m in f.type.members
            )
            meaning = f"{meaning}. {members}"
        rows.append(
            f"| `{f.name}` | {_cell(_type_cell(f.type, f.nullable))} | {since} | {_cell(meaning)} |"
        )
    return "\n".join(rows)


def outcomes_table() -> str:
    rows = ["| outcome | layer | when |", "|---|---|---|"]
    rows += [f"| `{o.value}` | {i.layer.value} | {_cell(i.when)} |" for o, i in OUTCOMES.items()]
    return "\n".join(rows)


def notes_table() -> str:
    rows = ["| note | meaning |", "|---|---|"]
    rows += [f"| `{n.value}` | {_cell(meaning)} |" for n, meaning in NOTE_MEANING.items()]
    return "\n".join(rows)


REGIONS = {"fields": fields_table, "outcomes": outcomes_table, "notes": notes_table}

_REGION = re.compile(r"(<!-- generated: (\w+) -->\n)(.*?)(<!-- end generated -->)", flags=re.DOTALL)


def render_doc(doc: str) -> str:
    """`doc` with every generated region replaced by what the definition says now."""

    def fill(m: re.Match[str]) -> str:
        make = REGIONS.get(m.group(2))
        if make is None:  # another generator's region (scripts/gen_docs.py knows them all)
            return m.group(0)
        return f"{m.group(1)}{make()}\n{m.group(4)}"

    return _REGION.sub(fill, doc)


# -- the command ---------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m mcp_layers_core.record_docs")
    parser.add_argument("--docs", type=Path, default=Path("docs"), help="the docs folder")
    parser.add_argument("--check", action="store_true", help="exit 1 if a file is stale")
    args = parser.parse_args(argv)
    doc_path = args.docs / "record-format.md"
    targets = {
        args.docs / "record.schema.json": schema_text(),
        doc_path: render_doc(doc_path.read_text(encoding="utf-8")),
    }
    stale = [p for p, text in targets.items() if not p.exists() or p.read_text("utf-8") != text]
    if args.check:
        for p in stale:
            print(f"{p}: stale; run python -m mcp_layers_core.record_docs", file=sys.stderr)
        return 1 if stale else 0
    for p in stale:
        p.write_text(targets[p], encoding="utf-8")
        print(f"wrote {p}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
