"""A tiny MCP stdio server on the official Python SDK, for the `mcp-layers wrap` tests.

Tools: `echo(text)` succeeds, `fail(reason)` raises `ToolError` (`isError: true`),
`crash(code)` ends the process mid-call (no answer: the wrapper must record the calls it
left pending). It writes one line to stderr at start, which the wrapper must count and
never call a failure.
"""

import os
import sys

from mcp.server.mcpserver import MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import ToolAnnotations

server = MCPServer("mcp-layers-stdio-test-server")


@server.tool(annotations=ToolAnnotations(read_only_hint=True))
def echo(text: str) -> str:
    """Return the text."""
    return text


@server.tool()
def fail(reason: str) -> str:
    """Fail as a tool does: the result says isError."""
    raise ToolError(reason)


@server.tool()
def crash(code: int) -> str:
    """Exit now, mid-call: the caller never gets an answer."""
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":
    print("stdio test server starting", file=sys.stderr, flush=True)
    server.run("stdio")
