"""The queries that follow one record to another grow with the records, not their square.

Measured without a clock: DuckDB's profile counts the rows every operator produced, which
is the same on every machine. A query that looks, for each incident, through every record
of its client (a lateral join decorrelated into a per-client join) produced 518 rows per
record at 8,000 records and 137 at 2,000; `retries` on 1 M records then spilled tens of
gigabytes and did not finish.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from mcp_layers_analysis import forensics, inputs, verdicts
from mcp_layers_analysis.duck import DuckEngine
from mcp_layers_analysis.filters import Filters
from mcp_layers_support.synthetic import generate, write

SIZES = (2_000, 8_000)

#: Rows the operators of one query may produce per record read (the linear queries here
#: produce 4–32).
MOST_ROWS_PER_RECORD = 60


def rows_produced(engine: DuckEngine, where: Path, sql: str) -> int:
    profile = where / "profile.json"
    engine.con.execute("PRAGMA enable_profiling = 'json'")
    engine.con.execute(f"PRAGMA profiling_output = '{profile}'")
    try:
        engine.rows(sql)
    finally:
        engine.con.execute("PRAGMA disable_profiling")

    def total(node: dict[str, object]) -> int:
        children = node.get("children", [])
        assert isinstance(children, list)
        produced = node.get("intermediate_rows", 0)
        assert isinstance(produced, int)
        return produced + sum(total(c) for c in children)

    tree = json.loads(profile.read_text())
    return sum(total(op) for op in tree["operator"])


@pytest.fixture(scope="module")
def engines(tmp_path_factory: pytest.TempPathFactory) -> dict[int, tuple[DuckEngine, Path]]:
    out: dict[int, tuple[DuckEngine, Path]] = {}
    for n in SIZES:
        where = tmp_path_factory.mktemp(f"scale{n}")
        path = where / "r.jsonl"
        write(path, generate(n, seed=3, scenario="scale", inject_rate=0.05))
        engine = DuckEngine(threads=1)
        engine.load(inputs.expand([str(path)]), None, print, shared=True)
        out[n] = (engine, where)
    return out


QUERIES: dict[str, str] = {
    "aftermath": forensics.aftermath_sql(verdicts.base(Filters())),
    **{rule.id: verdicts.tallied_sql(rule, Filters()) for rule in verdicts.RULES},
}


@pytest.mark.parametrize("name", QUERIES)
def test_rows_produced_grow_linearly(
    name: str, engines: dict[int, tuple[DuckEngine, Path]]
) -> None:
    small, large = (rows_produced(*engines[n], QUERIES[name]) for n in SIZES)
    assert large <= MOST_ROWS_PER_RECORD * SIZES[1], (small, large)
    # Four times the records: about four times the rows (a square would be sixteen).
    assert large <= 5 * max(small, 1), (small, large)
