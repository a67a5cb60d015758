"""Generate `result_shapes.py` from the spec's published JSON Schemas.

    python -m mcp_layers_core.result_shapes_gen           # rewrite result_shapes.py
    python -m mcp_layers_core.result_shapes_gen --check   # exit 1 if it is stale

The input is `spec/schema/<version>/schema.json`, copied verbatim from the specification
repository (spec/README.md says from which commit). The output is a plain Python literal
module: for each protocol version, the result definition of each method a client sends,
and every definition those reach, reduced to the keywords that decide acceptance. The
addon imports only that output (the standard library is enough to read it); this
generator runs at development time and in the test that checks the output is current.

What a client accepts, not what a server must send, decides a success, so some
keywords of the published schemas are not carried over (docs/record-format.md lists
them):

- `minimum: 0` of `ttlMs` (2026-07-28, server/utilities/caching): "If `ttlMs` is
  negative, clients **SHOULD** ignore it and treat it as `0`" (the Python SDK client
  floors it before validating);
- `format` (`uri`, `byte`, `uri-template`): an annotation in JSON Schema, and the SDK
  clients read these members as plain strings;
- the scalars of `JSONValue` (2026-07-28): the schema lists string, integer and
  boolean, leaving out the other numbers and null that JSON has and the Python SDK
  client's `JSONValue` accepts (`0.5` in a capability's settings): any JSON value;
- `description`, `default`, examples: no bearing on acceptance.

`additionalProperties` is never `false` in these schemas (unknown members are allowed),
so it is not carried over either; the generator refuses a schema where it is.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

#: The versions whose schemas are read, oldest first.
VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25", "2026-07-28")

#: Definitions that stand for any JSON value (see the module's docstring).
ANY_VALUE = frozenset({"JSONValue"})

#: Shapes any method's result may take besides its own (2026-07-28 on).
EXTRA_ROOTS = ("InputRequiredResult",)

#: A method whose result has no definition of its own (`ping`, `logging/setLevel`, …)
#: is answered with the empty result.
_EMPTY_RESULTS = ("EmptyResult", "Result")

_HERE = Path(__file__).resolve().parent
DEFAULT_SPEC = _HERE.parents[1] / "spec" / "schema"
DEFAULT_OUT = _HERE / "result_shapes.py"

_DROPPED = frozenset(
    {"description", "default", "examples", "format", "$schema", "title", "$comment"}
)
#: JSON Schema keywords the reduced form keeps, and their short names in it.
_KEPT = {
    "type": "t",
    "properties": "p",
    "required": "r",
    "items": "i",
    "anyOf": "any",
    "allOf": "all",
    "const": "c",
    "enum": "e",
    "minimum": "lo",
    "maximum": "hi",
    "maxItems": "n",
    "additionalProperties": "ap",
    "$ref": "$",
}


class SchemaError(ValueError):
    """A published schema uses a keyword the reduction does not know."""


def reduce_node(node: Any, where: str) -> Any:
    """The reduced form of one schema node: a dict of short keys, or None (anything)."""
    if node is True or node == {}:
        return None
    if not isinstance(node, dict):
        raise SchemaError(f"{where}: not a schema object")
    ref = node.get("$ref")
    if isinstance(ref, str) and ref.rsplit("/", 1)[-1] in ANY_VALUE:
        return None
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in _DROPPED:
            continue
        if key == "additionalProperties":
            if value is False:
                raise SchemaError(f"{where}: additionalProperties false is not supported")
            if value is True or value == {}:
                continue  # unknown members allowed, and not looked at
        short = _KEPT.get(key)
        if short is None:
            raise SchemaError(f"{where}: keyword {key!r} is not supported")
        out[short] = _reduce_value(key, value, f"{where}/{key}")
    return out or None


def _reduce_value(key: str, value: Any, where: str) -> Any:
    if key == "properties":
        props = {name: reduce_node(sub, f"{where}/{name}") for name, sub in value.items()}
        ttl = props.get("ttlMs")
        if isinstance(ttl, dict):
            props["ttlMs"] = {k: v for k, v in ttl.items() if k != "lo"}
        return props
    if key in ("items", "additionalProperties"):
        return reduce_node(value, where)
    if key in ("anyOf", "allOf"):
        return tuple(reduce_node(sub, f"{where}/{i}") for i, sub in enumerate(value))
    if key == "$ref":
        return value.rsplit("/", 1)[-1]
    if key in ("type", "enum", "required"):
        return tuple(value) if isinstance(value, list) else value
    return value


def result_definitions(schema: dict[str, Any]) -> dict[str, str]:
    """Method → the name of its result definition, for every request a client sends."""
    defs = schema.get("$defs") or schema["definitions"]
    empty = next(name for name in _EMPTY_RESULTS if name in defs)
    methods: dict[str, str] = {}
    for arm in defs["ClientRequest"]["anyOf"]:
        request = arm["$ref"].rsplit("/", 1)[-1]
        method = defs[request]["properties"]["method"]["const"]
        result = request.removesuffix("Request") + "Result"
        methods[method] = result if result in defs else empty
    return methods


def reachable(defs: dict[str, Any], roots: list[str]) -> dict[str, Any]:
    """The reduced definitions `roots` reach through `$ref`, by name."""
    out: dict[str, Any] = {}
    todo = list(roots)
    while todo:
        name = todo.pop()
        if name in out:
            continue
        out[name] = None if name in ANY_VALUE else reduce_node(defs[name], name)
        todo.extend(_refs(out[name]))
    return dict(sorted(out.items()))


def _refs(node: Any) -> list[str]:
    if isinstance(node, dict):
        found = [node["$"]] if "$" in node else []
        for key, value in node.items():
            if key == "p":
                for sub in value.values():
                    found += _refs(sub)
            elif key in ("any", "all"):
                for sub in value:
                    found += _refs(sub)
            elif key in ("i", "ap"):
                found += _refs(value)
        return found
    return []


def build(spec_dir: Path) -> str:
    """The text of result_shapes.py."""
    pool: dict[str, str] = {}  # node text → constant name
    versions: dict[str, tuple[dict[str, str], dict[str, str]]] = {}
    for version in VERSIONS:
        schema = json.loads((spec_dir / version / "schema.json").read_text("utf-8"))
        defs = schema.get("$defs") or schema["definitions"]
        methods = result_definitions(schema)
        names: dict[str, str] = {}
        roots = {*methods.values(), *(name for name in EXTRA_ROOTS if name in defs)}
        for name, node in reachable(defs, sorted(roots)).items():
            text = repr(node)
            names[name] = pool.setdefault(text, f"_{len(pool)}")
        versions[version] = (dict(sorted(methods.items())), names)
    lines = [
        '"""Result shapes of every MCP protocol version, from the spec\'s JSON Schemas.',
        "",
        "GENERATED by `python -m mcp_layers_core.result_shapes_gen` from",
        "spec/schema/<version>/schema.json: do not edit. Keys: t type, p properties,",
        "r required, i items, ap additionalProperties, any anyOf, all allOf, c const,",
        "e enum, lo minimum, hi maximum, n maxItems, $ a definition's name; None",
        "accepts anything.",
        '"""',
        "",
        "# fmt: off",
        "# ruff: noqa: E501",
        "from typing import Any, Final",
        "",
    ]
    lines += [f"{const}: Final[Any] = {text}" for text, const in pool.items()]
    lines += ["", "#: Version → (method → result definition, definition name → shape).", ""]
    lines.append("VERSIONS: Final[dict[str, tuple[dict[str, str], dict[str, Any]]]] = {")
    for version, (methods, names) in versions.items():
        lines.append(f"    {version!r}: (")
        lines.append(f"        {methods!r},")
        body = ", ".join(f"{name!r}: {const}" for name, const in names.items())
        lines.append(f"        {{{body}}},")
        lines.append("    ),")
    lines.append("}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--spec", type=Path, default=DEFAULT_SPEC)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--check", action="store_true", help="exit 1 if the output is stale")
    args = parser.parse_args(argv)
    text = build(args.spec)
    if args.check:
        current = args.out.read_text("utf-8") if args.out.exists() else ""
        if current != text:
            print(f"{args.out} is stale: run python -m mcp_layers_core.result_shapes_gen")
            return 1
        return 0
    args.out.write_text(text, "utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
