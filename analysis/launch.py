"""The `mcp-layers` console script: `wrap` before anything else is imported.

`mcp-layers wrap` sits in front of an MCP server that a client starts, and the client
counts the wrapper's start-up against the server's. The analysis commands import click,
DuckDB and sqlglot (tens of milliseconds at least), so `wrap` is dispatched here, before
the click group is imported, to a module that needs only the standard library at start
(addon/mcp_layers_stdio.py). Every other command goes to the click CLI unchanged.
"""

from __future__ import annotations

import sys


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "wrap":
        import mcp_layers_stdio

        mcp_layers_stdio.main(sys.argv[2:])
        return
    from .cli import main as cli_main

    cli_main()
