"""Each rule's quote is verbatim from the spec version it cites, and its level is the one
that sentence says (checked against a copy of the specification repository, when this
machine has one: MCP_SPEC_GIT, a git directory; skipped otherwise)."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from mcp_layers_analysis.verdicts import RULES, Rule

SPEC_GIT = Path(
    os.environ.get("MCP_SPEC_GIT", "/work/.mirror/modelcontextprotocol+modelcontextprotocol/repo")
)
SITE = "https://modelcontextprotocol.io/specification/"


def _plain(text: str) -> str:
    """Markdown links reduced to their text, whitespace to single spaces."""
    return " ".join(re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text).split())


def _page(rule: Rule) -> str:
    path = rule.url.removeprefix(SITE).split("#")[0]
    done = subprocess.run(
        ["git", "-C", str(SPEC_GIT), "show", f"HEAD:docs/specification/{path}.mdx"],
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode:
        pytest.skip(f"no {path} in {SPEC_GIT}")
    return _plain(done.stdout)


@pytest.mark.skipif(not SPEC_GIT.exists(), reason="no copy of the specification repository")
@pytest.mark.parametrize("rule", [r for r in RULES if r.url.startswith(SITE)], ids=lambda r: r.id)
def test_the_quote_is_verbatim_and_the_level_is_the_sentences(rule: Rule) -> None:
    assert _plain(rule.quote) in _page(rule)
    assert f"/{rule.spec}/" in rule.url
    if rule.level == "MUST":  # a MUST rule grades a MUST sentence; a SHOULD never a MUST
        assert "**MUST" in rule.quote
