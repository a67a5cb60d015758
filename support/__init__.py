"""Test support: real processes, peers and data for the tests, the lab, the demo and the
benchmarks.

Installed with the distribution (package `mcp_layers_support`) so that every one of them
imports it by name: process helpers (`procs`), pinned npm installs (`npm`, `node_peers`),
a raw HTTP/1.1 client (`rawhttp`), a scripted upstream (`scripted_upstream`,
`upstream_proc`), mitmdump and the bundled server as context managers (`harness`), MCP
messages (`messages`), process gauges (`gauges`), recording checks (`recordings`), the
load and long-stream runners and the synthetic recording generator (`synthetic`).
Nothing here imports from `tests/`. Of the product packages only the demo and the lab
import it: they run real processes.
"""
