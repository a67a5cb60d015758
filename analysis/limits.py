"""Named bounds and sizes for the analysis.

Memory is bounded by the engine (DuckDB's `memory_limit`, spilling to disk past it; see
`duck`), not by record count; these are the few caps of the Python around it.
"""

from typing import Final

#: Bytes the bad-line report reads and checks at once.
BLOCK_BYTES: Final = 4 * 1024 * 1024

#: Bad lines reported one by one per input; the rest are counted.
MAX_REPORTED_BAD_LINES: Final = 20

#: Records of one session `show` prints.
MAX_SHOWN_RECORDS: Final = 1_000_000
