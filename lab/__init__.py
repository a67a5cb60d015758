"""The client lab: real MCP clients against injected faults, and the retry matrix (docs/lab.md)."""
