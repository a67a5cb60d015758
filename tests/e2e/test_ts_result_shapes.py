"""Result shapes held to the official TypeScript SDK client too (1.32.2, from npm).

The TS SDK reads every protocol version it speaks (2024-11-05 … 2025-11-25) with one set
of zod schemas, the 2025-11-25 ones: each mutation of a valid result that
tests/unit/test_result_shapes.py makes is judged by those schemas, in one Node process,
and by `result_fault` for 2025-11-25. They agree, but for the differences the docs name
(docs/record-format.md, "Result shapes"), where the TS SDK is stricter than the schema
and the Python SDK, and the record follows those two: its empty result (`ping`) refuses
any member; `annotations.lastModified` must be an ISO date-time (the schema only says
"Should be"); an integer must be a safe one (zod's `int()`: at most 2^53).
"""

from __future__ import annotations

import json
import random
import subprocess
from pathlib import Path
from typing import Any

from mcp_layers_core.shapes import result_fault
from mcp_layers_demo import npm
from mcp_layers_support import node_peers

from tests.unit.test_result_shapes import DELETE, OLD_RESULTS, REPLACEMENTS, mutate, paths

JUDGE = Path(__file__).resolve().parents[1] / "peers" / "ts_result_judge.mjs"
TYPES_JS = npm.TS_CLIENT_DIR / "node_modules/@modelcontextprotocol/sdk/dist/esm/types.js"
VERSION = "2025-11-25"
#: Mutations judged per run (seeded: the same every run).
SAMPLES = 1500


def ts_accepts(node: Path, cases: list[tuple[str, dict[str, Any]]]) -> list[bool | None]:
    lines = "".join(_json(m, r) + "\n" for m, r in cases)
    out = subprocess.run(
        [str(node), str(JUDGE), str(TYPES_JS)],
        input=lines,
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.split()
    return [json.loads(word) for word in out]


def _json(method: str, result: dict[str, Any]) -> str:
    """JSON text as a server sends it: infinity is spelled `1e400` (which reads back as
    infinity), not Python's `Infinity`, which is no JSON."""
    return json.dumps([method, result]).replace("-Infinity", "-1e400").replace("Infinity", "1e400")


def mutations(rng: random.Random) -> list[tuple[str, dict[str, Any], tuple[Any, ...], Any]]:
    found = []
    methods = sorted(m for m in OLD_RESULTS if m != "ping")
    for _ in range(SAMPLES):
        method = rng.choice(methods)
        result = OLD_RESULTS[method]
        where = rng.choice(paths(result))
        replacement = rng.choice([DELETE, *REPLACEMENTS])
        found.append((method, mutate(result, where, replacement), where, replacement))
    return found


def test_the_ts_sdk_client_accepts_what_the_shapes_accept(peers: node_peers.NodePeers) -> None:
    cases = mutations(random.Random(25))
    valid = [(m, r) for m, r in OLD_RESULTS.items()]
    verdicts = ts_accepts(peers.node, [(m, r) for m, r, _, _ in cases] + valid)
    assert verdicts[len(cases) :] == [True] * len(valid)
    disagreements = []
    for (method, mutated, where, replacement), accepted in zip(cases, verdicts, strict=False):
        fault = result_fault(method, VERSION, mutated)
        if fault is None and not accepted and stricter_in_ts(where, replacement):
            continue
        if (fault is None) != accepted:
            disagreements.append((method, where, replacement, fault, accepted))
    assert disagreements == [], disagreements[:5]


def stricter_in_ts(where: tuple[Any, ...], replacement: Any) -> bool:
    """A documented place where the TS SDK refuses what the schema allows."""
    unsafe_int = isinstance(replacement, int) and abs(replacement) > 2**53
    return unsafe_int or where[-1] == "lastModified"


def test_the_ts_sdk_empty_result_is_strict(peers: node_peers.NodePeers) -> None:
    # The one documented difference: a member in a ping's result.
    assert ts_accepts(peers.node, [("ping", {"extra": 1}), ("ping", {})]) == [False, True]
    assert result_fault("ping", VERSION, {"extra": 1}) is None
