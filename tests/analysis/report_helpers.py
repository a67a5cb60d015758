"""The report of the real agent recordings, and headless Chromium to look at it (a unique
module name: tests/ is no package)."""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from analysis_helpers import FIXTURES, invoke

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

CHROMIUM_TIMEOUT_S = 90


def write_report(target: Path, *args: str | Path) -> str:
    result = invoke("report", *REAL, "-o", target, *args)
    assert result.exit_code == 0, result.stderr
    assert f"report written to {target}" in result.stderr
    return target.read_text(encoding="utf-8")


def chromium() -> str:
    """Debian's chromium (scripts/os-deps installs it), or skip saying how to get it."""
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    pytest.skip(
        "headless Chromium not found: `make test` installs Debian's chromium when it runs "
        "as root (scripts/os-deps); else apt-get install chromium"
    )


def run_chromium(profile: Path, *args: str) -> str:
    """Chromium headless, its own profile; stdout (the DOM for --dump-dom)."""
    done = subprocess.run(
        [
            chromium(),
            "--headless",
            "--no-sandbox",  # root in CI; the page is our own file
            "--disable-gpu",
            "--hide-scrollbars",
            "--no-first-run",
            f"--user-data-dir={profile}",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=CHROMIUM_TIMEOUT_S,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def selftest_result(dom: str) -> dict[str, object]:
    """What the page's self-test (#selftest) wrote into <output id="selftest">."""
    found = re.search(r'<output id="selftest"[^>]*data-done="1"[^>]*>(.*?)</output>', dom, re.S)
    assert found, "the page's self-test did not run"
    result: dict[str, object] = json.loads(html.unescape(found.group(1)))
    return result
