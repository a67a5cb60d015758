"""Test support: scripted peers, generators and harnesses for the tests and the benchmarks.

Not part of the product: a distribution of its own (support/pyproject.toml,
`mcp-layers-testsupport`), installed beside the project in editable mode by
scripts/bootstrap, never in the mcp-layers wheel. What the demo and the lab need to run
(process start and stop, the pinned TS client's npm install) is in the product,
`mcp_layers_demo.procs` and `mcp_layers_demo.npm`. Here: the tests' Node peers
(`node_peers`), a raw HTTP/1.1 client (`rawhttp`), a scripted upstream
(`scripted_upstream`, `upstream_proc`), mitmdump and the bundled server as context
managers (`harness`), MCP messages (`messages`), process gauges (`gauges`), recording
checks (`recordings`), the load and long-stream runners, the OTLP receiver and the
synthetic recording generator (`synthetic`). Nothing here imports from `tests/`, and no
product module imports this package.
"""
