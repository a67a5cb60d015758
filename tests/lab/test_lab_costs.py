"""The lab's size and the time of a full pass: one source (mcp_layers_lab), quoted alike by
the Makefile, the README and docs/lab.md."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from mcp_layers_lab import FULL_PASS, INSTALLED_SIZE

ROOT = Path(__file__).resolve().parents[2]


def lab_part(path: str) -> str:
    """The part of a file that speaks of the lab."""
    text = (ROOT / path).read_text(encoding="utf-8")
    if path == "Makefile":
        return text[text.index("# The client lab") : text.index("\nlab:")]
    if path == "README.md":
        start = text.index("## The client lab")
        return text[start : text.index("\n## ", start + 1)]
    return text


@pytest.mark.parametrize("path", ["Makefile", "README.md", "docs/lab.md"])
def test_the_lab_cost_is_quoted_from_its_one_source(path: str) -> None:
    part = lab_part(path)
    assert INSTALLED_SIZE in part, f"{path} does not say the lab is {INSTALLED_SIZE}"
    assert FULL_PASS in part, f"{path} does not say a full pass takes {FULL_PASS}"
    size = INSTALLED_SIZE.split()[1]
    # No other figure for the installed size, however written (~1.1 GB, 2.0 GB, …).
    assert set(re.findall(r"(\d+(?:\.\d+)?) ?GB", part)) == {size}, path


def test_make_lab_runs_what_the_figure_was_measured_with() -> None:
    makefile = (ROOT / "Makefile").read_text(encoding="utf-8")
    target = makefile[makefile.index("\nlab:") :].split("\n\n", 1)[0]
    assert "mcp_layers_lab --all --jobs 2" in target
