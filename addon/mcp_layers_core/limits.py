"""Named caps: every buffer the core keeps has its bound here, in one place.

They keep memory flat on endless streams, huge bodies and misbehaving peers. The
adapter's options (`mcp_max_body_kb`, `mcp_max_event_kb`) override the first two.
"""

#: One SSE event's data (and the partial line being read) before the event is dropped.
MAX_EVENT_BYTES = 16 * 1024 * 1024

#: A JSON request or response body the core will parse; larger ones are not inspected.
MAX_BODY_BYTES = 16 * 1024 * 1024

#: Exchanges awaiting their answer; past it the oldest is written as it stands.
MAX_PENDING_EXCHANGES = 10_000

#: Sessions remembered (client, version, counters); past it the least recent is forgotten.
MAX_SESSIONS = 10_000

#: Characters of a JSON-RPC error message kept in a record.
MAX_ERROR_MESSAGE_CHARS = 300

#: SSE events parsed on a stream that has shown no JSON-RPC yet before the tap stops looking.
NON_MCP_STREAM_PROBE_EVENTS = 8

#: (client, call signature) pairs remembered to recognise retries.
MAX_RETRY_SIGNATURES = 20_000

#: Requests parked until their answer arrives on another stream (2024-11-05 GET stream,
#: or a 2025-11-25 resumption); also caps pending server-to-client requests.
MAX_PARKED = 10_000

#: How long a request whose stream broke may wait for a resumed stream to answer it.
RESUME_WINDOW_S = 300.0
