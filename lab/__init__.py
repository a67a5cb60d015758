"""The client lab: real MCP clients against injected faults, and the retry matrix (docs/lab.md)."""

from typing import Final

#: What the full lab costs, measured. The Makefile, README.md and docs/lab.md quote these
#: words, and tests/lab/test_lab_costs.py fails when one of them says otherwise: measure
#: again, change them here, and in those three places.
#: `du -sh ~/.cache/mcp-layers/lab` with every client installed (2026-12-02: 2.2G with the
#: nine agents, whose installs took 11 minutes; 2.7G with the six frameworks too; 3.3G
#: with Cline, 434M, and Droid, 243M, whose installs took 30 s and 7 s).
INSTALLED_SIZE: Final = "about 3.3 GB"
#: `python -m mcp_layers_lab --all --jobs 2` (what `make lab` runs) on 2 cores, from an
#: empty cache: the installs included. Timed on 2026-12-03: `make lab` with every client
#: installed ran all 24 entries (696 runs) in 96 minutes, and the installs took 18
#: minutes that morning: 114 minutes (docs/lab.md, "CI and cost").
FULL_PASS: Final = "about 2 hours"
