"""`mcp-layers`, the offline analysis of mcp-layers recordings (docs/cli.md).

`cli` is the command; `engine` reads inputs (in parallel) and runs a job; `summary`,
`retries`, `compare` and `sessions` are the jobs; `render` prints their rows. The package
never imports mitmproxy: it runs wherever the recordings are.
"""
