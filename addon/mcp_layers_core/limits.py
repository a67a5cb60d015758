"""Named caps: every buffer the core keeps has its bound here, in one place.

They keep memory flat on endless streams, huge bodies and misbehaving peers, and on a
proxy that runs for days. Each is a total for the whole proxy unless it says "one"; the
adapter's options (`mcp_max_body_kb`, `mcp_max_event_kb`, `mcp_max_buffered_mb`,
`mcp_max_sessions`, `mcp_session_idle_s`) override the ones they name.
"""

#: One SSE event's data (and the partial line being read) before the event is dropped.
MAX_EVENT_BYTES = 16 * 1024 * 1024

#: All SSE buffers together (every open stream's partial event): past it, the event of
#: the stream that grows is dropped (note `sse_event_over_budget`). Held to within one
#: chunk: the check runs after each chunk is parsed.
MAX_BUFFERED_BYTES = 64 * 1024 * 1024

#: A JSON request or response body the core will parse; larger ones are not inspected.
MAX_BODY_BYTES = 16 * 1024 * 1024

#: Exchanges awaiting their answer; past it the oldest is written as it stands.
MAX_PENDING_EXCHANGES = 10_000

#: Sessions remembered (client, version, counters); past it the least recent is forgotten,
#: and a live one gets its `session_end` (`evicted`) as it goes. Also bounds the memo of
#: ended sessions that keeps a late DELETE from ending a lifeline twice.
MAX_SESSIONS = 10_000

#: A session with no traffic for this long ends (`idle`); 0 never.
SESSION_IDLE_S = 3600.0

#: Idle sessions ended per event at most, so that one tick never holds the event loop
#: for long; the rest end on the next events.
MAX_IDLE_ENDS_PER_EVENT = 500

#: Characters of a JSON-RPC error message kept in a record.
MAX_ERROR_MESSAGE_CHARS = 300

#: SSE events parsed on a stream that has shown no JSON-RPC yet before the tap stops looking.
NON_MCP_STREAM_PROBE_EVENTS = 8

#: (client, call signature) pairs remembered to recognise retries.
MAX_RETRY_SIGNATURES = 20_000

#: Tool annotations remembered, all servers together (least recently listed server out
#: first), and servers with a tool list.
MAX_TOOL_NAMES = 50_000
MAX_TOOL_SERVERS = 1_000

#: A tool name longer than this is not remembered (its safety stays `unknown`); the spec
#: asks for 1 to 128 characters.
MAX_TOOL_NAME_CHARS = 256

#: Requests parked until their answer arrives on another stream (2024-11-05 GET stream,
#: or a 2025-11-25 resumption); also caps pending server-to-client requests.
MAX_PARKED = 10_000

#: How long a request whose stream broke may wait for a resumed stream to answer it.
RESUME_WINDOW_S = 300.0
