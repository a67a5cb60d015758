"""Each rule's quote is verbatim from the spec version it cites, and its level is the one
that sentence says (checked against the pages the rules cite, copied verbatim into
spec/text/ from the specification repository; spec/README.md)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mcp_layers_analysis.verdicts import RULES, Rule

SPEC_TEXT = Path(__file__).resolve().parents[2] / "spec" / "text"
SITE = "https://modelcontextprotocol.io/specification/"


def _plain(text: str) -> str:
    """Markdown links reduced to their text, whitespace to single spaces."""
    return " ".join(re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text).split())


def _page(rule: Rule) -> str:
    path = rule.url.removeprefix(SITE).split("#")[0]
    page = SPEC_TEXT / f"{path}.mdx"
    assert page.exists(), f"copy {path}.mdx of the specification into spec/text/"
    return _plain(page.read_text("utf-8"))


@pytest.mark.parametrize("rule", [r for r in RULES if r.url.startswith(SITE)], ids=lambda r: r.id)
def test_the_quote_is_verbatim_and_the_level_is_the_sentences(rule: Rule) -> None:
    assert _plain(rule.quote) in _page(rule)
    assert f"/{rule.spec}/" in rule.url
    if rule.level == "MUST":  # a MUST rule grades a MUST sentence; a SHOULD never a MUST
        assert "**MUST" in rule.quote
