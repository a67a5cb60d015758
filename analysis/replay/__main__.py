"""`python -m mcp_layers_analysis.replay RECORDING...`: the same as `mcp-layers replay`, for
callers that start it by interpreter (the lab, tests) rather than by console script."""

from .command import replay

replay(prog_name="mcp-layers replay")
