"""The `mcp-layers` console script: `wrap` before anything else is imported.

`mcp-layers wrap` sits in front of an MCP server that a client starts, and the client
counts the wrapper's start-up against the server's. The analysis commands import click,
DuckDB and sqlglot (tens of milliseconds at least), so `wrap` is dispatched here, before
the click group is imported, to a module that needs only the standard library at start
(addon/mcp_layers_stdio.py).

A question asked before of the same inputs is answered here too, from the answer cache
(answers.py), before click and DuckDB are imported: its whole cost is Python's start-up
and a look at the inputs. Every other command goes to the click CLI unchanged, its output
kept as the answer when it is one.
"""

from __future__ import annotations

import sys


def main() -> None:
    if len(sys.argv) > 1 and sys.argv[1] == "wrap":
        import mcp_layers_stdio

        mcp_layers_stdio.main(sys.argv[2:])
        return
    argv = sys.argv[1:]
    from . import answers

    if answers.answerable(argv):
        status = answers.replay(argv)
        if status is not None:
            sys.exit(status)
        answers.start(argv)
    from .cli import main as cli_main

    try:
        cli_main()
    except SystemExit as exc:
        answers.finish(exc.code)
        raise
    answers.finish(0)


if __name__ == "__main__":
    main()
