"""Paths and a CLI runner shared by the analysis tests (a unique name: tests/ is no package)."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner, Result
from mcp_layers_analysis.cli import cli

FIXTURES = Path(__file__).resolve().parent / "fixtures"
SYNTHETIC = FIXTURES / "synthetic.jsonl"
BASELINE = FIXTURES / "synthetic-baseline.jsonl.gz"
LEGACY = FIXTURES / "legacy.jsonl"


def invoke(
    *args: str | Path, input: bytes | str | None = None, env: dict[str, str] | None = None
) -> Result:
    """Run the CLI in this process; stdout and stderr stay apart."""
    return CliRunner().invoke(
        cli, [str(a) for a in args], input=input, env=env, catch_exceptions=False
    )
