"""`mcp-layers replay`: a recording becomes the server, transport faults included.

`script` reads a recording into what each request got back, `player` decides which
recorded answer a live request gets (pure), `server` sends it with the recorded timing,
and `command` is the CLI. docs/replay.md says what a recording needs and how to use it.
"""
