"""Headless Chromium for the tests that look at a page as a reader would (the report's,
lab/MATRIX.html): the browser, one run of it, and what a page's self-test wrote.

A page under test runs its own self-test when its address ends in `#selftest` and writes
what it saw, as JSON, into an `<output>` element; `--dump-dom` prints the DOM after the
page has loaded, and `selftest_result` reads that element back.
"""

from __future__ import annotations

import html
import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest

CHROMIUM_TIMEOUT_S = 90


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
    """Chromium headless, its own profile, nothing fetched on its own account; stdout
    (the DOM for --dump-dom)."""
    done = subprocess.run(
        [
            chromium(),
            "--headless",
            "--no-sandbox",  # root in CI; the page is our own file
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
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


def selftest_result(dom: str, output_id: str = "selftest") -> dict[str, object]:
    """What the page's self-test (#selftest) wrote into <output id=OUTPUT_ID>."""
    found = re.search(
        rf'<output id="{re.escape(output_id)}"[^>]*data-done="1"[^>]*>(.*?)</output>', dom, re.S
    )
    assert found, f"the page's self-test did not run (no <output id={output_id!r}> done)"
    result: dict[str, object] = json.loads(html.unescape(found.group(1)))
    return result
