"""Golden outputs: each case in fixtures/cases.json prints what fixtures/golden/ holds.

Rewrite them with `fixtures/regenerate.py` after a deliberate change, and review the diff.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from analysis_helpers import FIXTURES, invoke

CASES: list[dict[str, Any]] = json.loads((FIXTURES / "cases.json").read_text())
REAL = sorted(FIXTURES.glob("real_*.jsonl"))


def run_case(case: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(FIXTURES)
    golden = FIXTURES / "golden" / f"{case['name']}.json"
    if not golden.exists():
        pytest.fail(
            f"no golden output for {case['name']}: run "
            "tests/analysis/fixtures/regenerate.py and review what it writes"
        )
    for jobs in ("1", "2"):
        result = invoke(*case["args"], "--format", "json", "--jobs", jobs)
        assert result.exit_code == 0, result.stderr
        assert json.loads(result.stdout) == json.loads(golden.read_text()), case["name"]


@pytest.mark.parametrize(
    "case", [c for c in CASES if not c["name"].startswith("real_")], ids=lambda c: c["name"]
)
def test_synthetic_golden(case: dict[str, Any], monkeypatch: pytest.MonkeyPatch) -> None:
    run_case(case, monkeypatch)


@pytest.mark.skipif(
    not REAL,
    reason="no real captures yet: the lead adds recordings made by "
    "the addon as tests/analysis/fixtures/real_*.jsonl (see the README there)",
)
@pytest.mark.parametrize("path", REAL, ids=lambda p: p.name)
def test_real_captures(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    stem = path.name.split(".")[0]
    cases = [c for c in CASES if c["name"].startswith(f"{stem}.")]
    if not cases:
        pytest.fail(
            f"{path.name} has no golden cases: run "
            "tests/analysis/fixtures/regenerate.py and review what it writes"
        )
    for case in cases:
        run_case(case, monkeypatch)
