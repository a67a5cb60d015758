"""`verdicts` counts instances in DuckDB (`tallied_sql`): what it keeps per client and kind
of instance is the count and the first `MAX_EVIDENCE`, the same as listing every instance
(`rule_sql`) would give, and no more rows whatever the recording's size."""

from __future__ import annotations

from collections import defaultdict

import pytest
from analysis_helpers import SYNTHETIC
from mcp_layers_analysis import inputs, verdicts
from mcp_layers_analysis.duck import DuckEngine
from mcp_layers_analysis.filters import Filters
from mcp_layers_analysis.verdicts import MAX_EVIDENCE, RULES, Level, Rule, Seen


@pytest.fixture(scope="module")
def engine() -> DuckEngine:
    e = DuckEngine(threads=1)
    e.load(inputs.expand([str(SYNTHETIC)]), verdicts.COLUMNS, print, shared=True)
    return e


def seen(rule: Rule, ok: bool | None, soft: bool) -> Seen:
    if ok is None:
        return Seen.UNDECIDED
    if ok:
        return Seen.PASSED
    return Seen.FAILED if rule.level == Level.MUST and not soft else Seen.MISSED


@pytest.mark.parametrize("rule", RULES, ids=[r.id for r in RULES])
def test_counts_and_first_evidence_are_those_of_every_instance(
    rule: Rule, engine: DuckEngine
) -> None:
    listed: dict[tuple[str, Seen], list[str]] = defaultdict(list)
    for client, ok, _src, record_id, evidence, soft, _ts in engine.rows(
        verdicts.rule_sql(rule, Filters())
    ):
        listed[client, seen(rule, ok, bool(soft))].append(evidence or f"#{record_id}")
    counted: dict[tuple[str, Seen], tuple[int, list[str]]] = {}
    for client, kind, n, _src, _id, evidence in engine.rows(verdicts.tallied_sql(rule, Filters())):
        count, first = counted.setdefault((client, Seen(kind)), (n, []))
        assert count == n
        first.append(evidence)
    assert {k: (len(v), v[:MAX_EVIDENCE]) for k, v in listed.items()} == counted


def test_a_rule_with_hundreds_of_instances_comes_back_in_a_few_rows(engine: DuckEngine) -> None:
    rule = verdicts.RULE["mcp-layers/protocol-version-header"]
    instances = len(engine.rows(verdicts.rule_sql(rule, Filters())))
    rows = engine.rows(verdicts.tallied_sql(rule, Filters()))
    clients = {row[0] for row in rows}
    assert instances > 100 * len(clients)
    assert len(rows) <= len(clients) * len(Seen) * MAX_EVIDENCE
