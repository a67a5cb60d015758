"""How fault injection writes JSON: compact one-line bytes, and the content types it labels
the bodies it builds with (rule bodies, replies, rewritten requests).
"""

from __future__ import annotations

import json
from typing import Final

_JSON: Final = "application/json"
_SSE: Final = "text/event-stream"
_TEXT: Final = "text/plain; charset=utf-8"


def _dumps(value: object) -> bytes:
    # Compact and on one line (JSON escapes newlines in strings): also a valid SSE data line.
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False).encode()
