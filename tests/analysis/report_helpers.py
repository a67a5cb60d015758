"""The report of the real agent recordings, and headless Chromium to look at it (from the
test support, `mcp_layers_support.chromium`, shared with the lab's tests; a unique module
name: tests/ is no package)."""

from __future__ import annotations

from pathlib import Path

from analysis_helpers import FIXTURES, invoke
from mcp_layers_support.chromium import (  # noqa: F401 (the report's tests import them here)
    chromium,
    run_chromium,
    selftest_result,
)

#: The lab's first four agents.
_AGENTS = ("claude-code", "codex", "gemini-cli", "opencode")

#: The real recordings of the lab's first four agents: the golden data of the report's
#: tests (the page's figures and stories for them are pinned below).
REAL = sorted(p for a in _AGENTS for p in FIXTURES.glob(f"real_lab_{a}_*.jsonl"))

#: The clients in them, as the page names them.
REAL_CLIENTS = (
    "claude-code@2.1.197",
    "codex-mcp-client@0.171.0",
    "gemini-cli-mcp-client@0.61.0",
    "opencode@1.18.33",
)


def write_report(target: Path, *args: str | Path) -> str:
    result = invoke("report", *REAL, "-o", target, *args)
    assert result.exit_code == 0, result.stderr
    assert f"report written to {target}" in result.stderr
    return target.read_text(encoding="utf-8")
