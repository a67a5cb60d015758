"""What the README and docs/cli.md list of the command line is what click defines: every
command is shown in the README, no command shown there is missing from the CLI, and the
common options table of docs/cli.md is exactly the options every reading command takes."""

from __future__ import annotations

import re
from pathlib import Path

import click
from mcp_layers_analysis.cli import cli

ROOT = Path(__file__).resolve().parents[2]
README = (ROOT / "README.md").read_text(encoding="utf-8")
CLI_DOC = (ROOT / "docs" / "cli.md").read_text(encoding="utf-8")
#: The commands that read recordings (they share `reading_options`).
READING = ("summary", "retries", "compare", "sessions", "show", "verdicts", "report", "query")


def _commands() -> dict[str, click.Command]:
    return dict(cli.commands)  # type: ignore[attr-defined]


def test_every_command_is_shown_in_the_readme_and_every_one_shown_exists() -> None:
    # As a command is written: at the start of a line, in backticks, or in `$(…)`.
    shown = set(re.findall(r"(?:^|[`(] ?)mcp-layers ([a-z][a-z-]+)", README, re.MULTILINE))
    commands = set(_commands())
    assert commands <= shown, f"README never shows: {sorted(commands - shown)}"
    # `mcp-layers-lab` is the lab's console script; everything else must be a command.
    unknown = {name for name in shown - commands if not name.startswith("lab")}
    assert not unknown, f"README shows commands that do not exist: {sorted(unknown)}"


def _flags(command: click.Command) -> set[str]:
    return {
        opt
        for p in command.params
        if isinstance(p, click.Option)
        for opt in (*p.opts, *p.secondary_opts)
        if opt.startswith("--")
    }


def test_the_common_options_table_is_the_options_every_reading_command_takes() -> None:
    commands = _commands()
    common = set.intersection(*(_flags(commands[name]) for name in READING)) - {"--help"}
    table = CLI_DOC[CLI_DOC.index("## Common options") : CLI_DOC.index("### Output formats")]
    listed = {flag for row in table.splitlines() if row.startswith("| `")
              for flag in re.findall(r"--[a-z][a-z-]*", row.split("|")[1])}  # fmt: skip
    assert listed == common, (
        f"docs/cli.md's common options table: missing {sorted(common - listed)}, "
        f"not common to the reading commands {sorted(listed - common)}"
    )
