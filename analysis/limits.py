"""Named bounds and sizes for the analysis: every cap on what it keeps in memory is here.

Memory is flat in the input size: what grows is bounded by these caps or by the
vocabulary of the recordings (clients, methods, tools, statuses), never by record count.
"""

from typing import Final

#: Bytes a worker reads and decodes at once.
BLOCK_BYTES: Final = 4 * 1024 * 1024

#: A regular file is split into ranges about this big (at line boundaries), one task each;
#: smaller when that would give a worker fewer than four, but not below MIN_RANGE_BYTES.
RANGE_BYTES: Final = 32 * 1024 * 1024
MIN_RANGE_BYTES: Final = 1024 * 1024

#: Below this much input, one process does it all: starting workers would cost more.
PARALLEL_MIN_BYTES: Final = 16 * 1024 * 1024

#: Tasks carrying bytes (stdin, .gz) in flight per worker; bounds the memory of streamed input.
STREAM_TASKS_PER_WORKER: Final = 2

#: Above this much input on a terminal, a progress bar is drawn on stderr.
PROGRESS_MIN_BYTES: Final = 8 * 1024 * 1024

#: Bad lines reported one by one per input; the rest are counted.
MAX_REPORTED_BAD_LINES: Final = 20

#: Distinct values of a string field the fast decoder learns before decoding it as plain text.
MAX_VOCABULARY: Final = 512

#: Failed and input-required records kept so a later retry or continuation can name them.
#: Past it the oldest is forgotten: a retry of it then counts as "retry of an unseen record".
MAX_LINK_CANDIDATES: Final = 200_000

#: Sessions ended by a 404 kept to match a later re-initialisation; past it the oldest is
#: forgotten, as never re-initialised.
MAX_ENDED_SESSIONS: Final = 100_000

#: Records of one session `show` keeps to sort its timeline.
MAX_SHOWN_RECORDS: Final = 1_000_000
