"""docs/cli.md documents every command, every exit status and every format."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest
from mcp_layers_analysis.cli import cli
from mcp_layers_analysis.exitcodes import ExitStatus
from mcp_layers_analysis.render import OutputFormat

ROOT = Path(__file__).resolve().parents[2]
DOC = (ROOT / "docs" / "cli.md").read_text()


@pytest.mark.parametrize("name", sorted(cli.commands))  # type: ignore[attr-defined]
def test_every_command_is_documented_with_an_example(name: str) -> None:
    assert re.search(rf"^### `{name}", DOC, re.MULTILINE), f"docs/cli.md lacks ### `{name}`"
    assert f"mcp-layers {name} " in DOC


def test_every_exit_status_is_documented() -> None:
    for status in ExitStatus:
        assert re.search(rf"^\| {status.value} \| `{status.name}` \|", DOC, re.MULTILINE), status


def test_every_format_is_documented() -> None:
    for fmt in OutputFormat:
        assert f"`{fmt.value}`" in DOC


def test_analysis_works_without_mitmproxy_or_pyspark() -> None:
    # The CLI must run where neither is installed (pyspark is the `spark` extra's):
    # make importing them fail.
    code = (
        "import sys; sys.modules['mitmproxy'] = None; sys.modules['pyspark'] = None\n"
        "import pkgutil, importlib, mcp_layers_analysis\n"
        "for m in pkgutil.iter_modules(mcp_layers_analysis.__path__):\n"
        "    importlib.import_module('mcp_layers_analysis.' + m.name)\n"
        "from mcp_layers_analysis.cli import main\n"
        f"sys.argv = ['mcp-layers', 'summary', {str(ROOT / 'tests/analysis/fixtures/synthetic.jsonl')!r}]\n"
        "main()\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, check=False, timeout=60
    )
    assert done.returncode == 0, done.stderr.decode()
    assert done.stdout.startswith(b"client")
