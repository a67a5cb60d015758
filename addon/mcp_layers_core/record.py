"""The record: the one definition of what a line of a recording holds.

Everything else derives from this module: the record builder (`records.py`) fills a
template made from `FIELDS`; `docs/record.schema.json` and the tables of
`docs/record-format.md` are generated from it (`python -m mcp_layers_core.record_docs`,
checked by a test); the analysis, the lab and the tests import its vocabularies. Adding a
field is one edit here (plus regeneration and whatever code fills it).

A field's type is a small declarative value (`Int`, `Str`, `Enum`, `Obj`, …) rather than
a Python annotation, because it has to become a JSON Schema, a Markdown cell and a
reader's decoder, and none of those can be read back from `int | None` reliably.

Size: over 400 lines because it is the declarative table itself (every field, outcome and
note with its meaning); the code in it is a few small functions.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Any, Final, NamedTuple

#: The format version every record carries as `"v"`. Readers refuse a larger one.
FORMAT_VERSION: Final = 1

#: How a `session` the client stands in for begins (no session the server issued); every
#: other session is one the server issued, hashed or, with `mcp_raw_session_ids`, raw.
#: Nothing else begins so: a raw id may (the transport allows any visible ASCII in one, a
#: 2024-11-05 endpoint URL anything), so such an id is hashed even then (`may_write_raw`).
STAND_IN_PREFIX: Final = "c-"


def may_write_raw(session_id: str) -> bool:
    """May `mcp_raw_session_ids` write this issued session id as it is? Not when it begins
    like a stand-in: it is hashed then, as without the option, so that `is_issued_session`
    stays exact."""
    return not session_id.startswith(STAND_IN_PREFIX)


def is_issued_session(session: object) -> bool:
    """Is a record's `session` one the server issued, not the client's stand-in? The one
    definition every reader uses (the OTel export; the analysis as SQL,
    `terms.issued_session`): a non-empty string that does not begin with `STAND_IN_PREFIX`.
    Exact in both modes, hashed or raw, given `may_write_raw`."""
    return isinstance(session, str) and session != "" and not session.startswith(STAND_IN_PREFIX)


# -- vocabularies ------------------------------------------------------------------


class Kind(StrEnum):
    """What a record is about."""

    REQUEST = "request"
    NOTIFICATION = "notification"
    RESPONSE = "response"
    SESSION_END = "session_end"
    #: A GET event stream (standby or resumption), written when it ends.
    STREAM = "stream"
    #: A model API request and its answer (Anthropic, OpenAI, Gemini), seen in the same
    #: proxy as the MCP traffic: the other half of the agent's turn (docs/model-turns.md).
    MODEL_TURN = "model_turn"


class Layer(StrEnum):
    """Where a call failed (or succeeded), outer to inner, then the proxy's own."""

    TRANSPORT = "transport"
    PROTOCOL = "protocol"
    APPLICATION = "application"
    INTERACTION = "interaction"
    #: The proxy could not look (a cap or an encoding); the traffic still passed.
    PROXY = "proxy"


class Outcome(StrEnum):
    """The verdict on one request, in the order the classifier decides them."""

    NO_RESPONSE = "NO_RESPONSE"
    HTTP_ERROR = "HTTP_ERROR"
    TRANSPORT_VIOLATION = "TRANSPORT_VIOLATION"
    UNINSPECTED = "UNINSPECTED"
    STREAM_INCOMPLETE = "STREAM_INCOMPLETE"
    MALFORMED_JSON = "MALFORMED_JSON"
    INVALID_ENVELOPE = "INVALID_ENVELOPE"
    JSONRPC_ERROR = "JSONRPC_ERROR"
    INPUT_REQUIRED = "INPUT_REQUIRED"
    INVALID_TOOL_RESULT = "INVALID_TOOL_RESULT"
    TOOL_ERROR = "TOOL_ERROR"
    TOOL_SUCCESS = "TOOL_SUCCESS"
    SUCCESS = "SUCCESS"
    INVALID_RESULT = "INVALID_RESULT"


class OutcomeInfo(NamedTuple):
    layer: Layer
    when: str


#: Each outcome's layer and when it applies (the first that applies wins, in this order).
OUTCOMES: Final[dict[Outcome, OutcomeInfo]] = {
    Outcome.NO_RESPONSE: OutcomeInfo(
        Layer.TRANSPORT,
        "no HTTP response reached the client (upstream unreachable, reset before headers, "
        "client gave up before headers, proxy stopped first)",
    ),
    Outcome.HTTP_ERROR: OutcomeInfo(
        Layer.TRANSPORT,
        "status outside 2xx; it wins over anything in the body (a JSON-RPC error in the body "
        "is still recorded in `jsonrpc`)",
    ),
    Outcome.TRANSPORT_VIOLATION: OutcomeInfo(
        Layer.TRANSPORT,
        "a 2xx answer the client rejects or never sees, whatever it says (a JSON-RPC error "
        "in it is still recorded in `jsonrpc`); `notes` names the cause: "
        "`content_type:<type>` / `no_content_type` (a request must be answered "
        "`application/json` or `text/event-stream`), `202_for_request` (202 is for "
        "notifications and responses; clients discard its body), `sse_event_type:<type>` "
        "(the answer came only in an SSE event whose type is not `message`)",
    ),
    Outcome.UNINSPECTED: OutcomeInfo(
        Layer.PROXY,
        "the answer could not be read within the proxy's caps (`mcp_max_body_kb`: note "
        "`body_over_cap:<bytes>`), its encoding (`br`/`zstd`, any unknown one: note "
        "`encoded_body:<encoding>`; a gzip/deflate body that is corrupt or inflates past the "
        "cap: `body_undecodable:<encoding>`), or because mitmproxy streamed a JSON body past "
        "the addon (`stream_large_bodies`; note `body_unseen`): the traffic passed, the "
        "verdict is unknown, and `notes` says why",
    ),
    Outcome.STREAM_INCOMPLETE: OutcomeInfo(
        Layer.TRANSPORT,
        "an SSE response ended (cleanly or not) without the final JSON-RPC response for the "
        "request's id",
    ),
    Outcome.MALFORMED_JSON: OutcomeInfo(
        Layer.PROTOCOL, "the body (or the final SSE data) is not JSON"
    ),
    Outcome.INVALID_ENVELOPE: OutcomeInfo(
        Layer.PROTOCOL,
        'not an object, `jsonrpc` ≠ `"2.0"`, `id` not equal to the request\'s (type '
        'included: `"1"` ≠ `1`), both or neither of `result`/`error`, `error.code` not an '
        "integer or `error.message` not a string",
    ),
    Outcome.JSONRPC_ERROR: OutcomeInfo(Layer.PROTOCOL, "a valid error envelope"),
    Outcome.INPUT_REQUIRED: OutcomeInfo(
        Layer.INTERACTION,
        '`result.resultType == "input_required"` with `inputRequests` (an object) or '
        "`requestState` (a string), 2026-07-28 on",
    ),
    Outcome.INVALID_TOOL_RESULT: OutcomeInfo(
        Layer.PROTOCOL,
        "`tools/call` result that does not fit the negotiated version's `CallToolResult` "
        "schema at any depth (spec/schema/<version>/schema.json; docs/record-format.md, "
        "Result shapes): not an object, an unknown `resultType`, `content` not an array, a "
        "content block of no known type (note `unknown_content_block:<type>`) or not of its "
        "type's shape (note `malformed_content_block:<type>`: a `resource` without `uri` and "
        "one of `text`/`blob`, an `annotations.priority` outside 0..1, …), `isError` not a "
        "boolean, `structuredContent` or `_meta` not an object (note `result_shape:<path>: "
        "<why>`); an `input_required` result with neither `inputRequests` nor `requestState` "
        "(note `input_required_without_requests`)",
    ),
    Outcome.TOOL_ERROR: OutcomeInfo(Layer.APPLICATION, "`tools/call` with `isError: true`"),
    Outcome.TOOL_SUCCESS: OutcomeInfo(
        Layer.APPLICATION,
        '`tools/call` complete result (absent `resultType` means `"complete"`)',
    ),
    Outcome.SUCCESS: OutcomeInfo(
        Layer.PROTOCOL,
        "any other method: the result is an object with the members its method requires; "
        "also a 2025-11-25 task-augmented `tools/call` (`params.task`) answered with a "
        "`CreateTaskResult` (`{task: {taskId, status, …}}`, no `content` by design; note "
        "`task_created`)",
    ),
    Outcome.INVALID_RESULT: OutcomeInfo(
        Layer.PROTOCOL,
        "any other method: the result does not fit its method's result schema of the "
        "negotiated version at any depth: not an object, a member it requires missing or "
        "of the wrong JSON type (note `result_missing:<member>`: `initialize` needs "
        "`protocolVersion`, `capabilities`, `serverInfo`; 2026-07-28 results `resultType`, "
        "cacheable ones `ttlMs` and `cacheScope`; …), or something deeper (note "
        "`result_shape:<path>: <why>`: `serverInfo/version: missing`, "
        "`tools/0/inputSchema: missing`, …); or an `input_required` result with neither "
        "`inputRequests` nor `requestState`",
    ),
}

#: Each outcome's layer.
LAYER_OF: Final[dict[Outcome, Layer]] = {o: info.layer for o, info in OUTCOMES.items()}

#: Outcomes after which the call has its final, successful answer.
SUCCESSFUL: Final[frozenset[Outcome]] = frozenset({Outcome.SUCCESS, Outcome.TOOL_SUCCESS})

#: A call whose outcome is none of these failed. INPUT_REQUIRED is a turn, not a failure.
NOT_FAILED: Final[frozenset[Outcome]] = SUCCESSFUL | {Outcome.INPUT_REQUIRED}


class RetryOrigin(StrEnum):
    """How an attempt repeats the previous one (docs/record-format.md, retries)."""

    NONE = "none"
    RESEND = "resend"
    REISSUE = "reissue"
    REINIT = "reinit"
    #: Not the client's transport retry: the model asked for the call again, in a new
    #: model turn (a `tools/call` joined to a tool call other than its predecessor's).
    MODEL = "model"


#: The origins that make an attempt a retry, in the order tables list them.
RETRY_ORIGINS: Final = (RetryOrigin.RESEND, RetryOrigin.REISSUE, RetryOrigin.REINIT)


class Provider(StrEnum):
    """Who serves a model API, as the path and body shape say (`model_turn` records)."""

    ANTHROPIC = "anthropic"
    OPENAI = "openai"
    GEMINI = "gemini"
    #: The path promised a model API; the body was not its shape (a note says which).
    UNKNOWN = "unknown"


class ModelApi(StrEnum):
    """Which model API a `model_turn` spoke."""

    MESSAGES = "messages"
    CHAT_COMPLETIONS = "chat_completions"
    RESPONSES = "responses"
    GENERATE_CONTENT = "generate_content"
    UNKNOWN = "unknown"


class ModelJoin(StrEnum):
    """How a `tools/call` was joined to the model's tool call (`modelCall.join`)."""

    #: The agent carried the model's tool call id (Claude Code
    #: `_meta["claudecode/toolUseId"]`, Codex `_meta.callId`).
    EXACT = "exact"
    #: No id: the first not yet joined tool call of the same name and arguments hash.
    INFERRED = "inferred"


class ToolSafety(StrEnum):
    """Is a tool safe to repeat, by the annotations its server declared?"""

    READ_ONLY = "read_only"
    IDEMPOTENT = "idempotent"
    UNSAFE = "unsafe"
    UNKNOWN = "unknown"


class Transport(StrEnum):
    """How the messages travelled. The HTTP proxy leaves `transport` null (its records
    predate the field); `mcp-layers wrap` writes `stdio`."""

    STDIO = "stdio"


class EndReason(StrEnum):
    """Why a session's lifeline ended (`session_end` records)."""

    DELETE = "delete"
    NOT_FOUND = "not_found"
    SHUTDOWN = "shutdown"
    #: No traffic for `mcp_session_idle_s`: the client is taken to have gone.
    IDLE = "idle"
    #: Forgotten to keep the session book within `mcp_max_sessions`.
    EVICTED = "evicted"
    #: stdio: the wrapped server process ended (notes say how: `server_exited:…`).
    EXITED = "exited"
    #: stdio: the server command could not be started (note `spawn_failed:<errno>`).
    SPAWN_FAILED = "spawn_failed"


class StreamEnd(StrEnum):
    """How an SSE answer ended (`sse.end`)."""

    COMPLETE = "complete"
    EOF = "eof"
    ERROR = "error"


class NoteCode(StrEnum):
    """The codes a note starts with; detail, where there is any, follows a colon."""

    PROXY_SHUTDOWN = "proxy_shutdown"
    SSE_EVENT_OVER_CAP = "sse_event_over_cap"
    SSE_UNTERMINATED_EVENT = "sse_unterminated_event"
    BODY_OVER_CAP = "body_over_cap"
    BODY_UNSEEN = "body_unseen"
    ENCODED_BODY = "encoded_body"
    BODY_UNDECODABLE = "body_undecodable"
    EMPTY_BODY = "empty_body"
    ENCODED_STREAM = "encoded_stream"
    STREAM_DECODE_ERROR = "stream_decode_error"
    STREAM_INFLATE_OVER_CAP = "stream_inflate_over_cap"
    UNEXPECTED_RESPONSE_ID = "unexpected_response_id"
    RESULT_AND_ERROR = "result_and_error"
    ERROR_WITHOUT_ID = "error_without_id"
    CONTENT_TYPE = "content_type"
    NO_CONTENT_TYPE = "no_content_type"
    ACCEPTED_FOR_REQUEST = "202_for_request"
    SSE_EVENT_TYPE = "sse_event_type"
    BATCH_ANSWER = "batch_answer"
    RESULT_MISSING = "result_missing"
    UNKNOWN_CONTENT_BLOCK = "unknown_content_block"
    MALFORMED_CONTENT_BLOCK = "malformed_content_block"
    RESULT_SHAPE = "result_shape"
    INPUT_REQUIRED_WITHOUT_REQUESTS = "input_required_without_requests"
    TASK_CREATED = "task_created"
    REQUEST_BOM = "request_bom"
    BATCH = "batch"
    SUBSCRIPTION = "subscription"
    SESSION_LOST = "session_lost"
    CLOSED_AFTER_ANSWER = "closed_after_answer"
    UPSTREAM_BROKE_MID_BODY = "upstream_broke_mid_body"
    ANSWER_ON_GET_STREAM = "answer_on_get_stream"
    ANSWER_STREAM_CLOSED = "answer_stream_closed"
    NOT_RESUMED = "not_resumed"
    EVICTED_PENDING_CAP = "evicted_pending_cap"
    EVICTED_PARKED_CAP = "evicted_parked_cap"
    DELETE_UNANSWERED = "delete_unanswered"
    NOT_ENDED = "not_ended"
    ALREADY_ENDED = "already_ended"
    SSE_EVENT_OVER_BUDGET = "sse_event_over_budget"
    # stdio (`mcp-layers wrap`): the process and its pipes.
    SPAWN_FAILED = "spawn_failed"
    SERVER_EXITED = "server_exited"
    STDIN_CLOSED_PENDING = "stdin_closed_pending"
    STDOUT_NOT_JSON = "stdout_not_json"
    STDIN_NOT_JSON = "stdin_not_json"
    PARTIAL_LAST_LINE = "partial_last_line"
    LINE_OVER_CAP = "line_over_cap"
    LATE_ANSWER = "late_answer"
    STDERR_LINES = "stderr_lines"
    EPIPE_TO_CLIENT = "epipe_to_client"
    EPIPE_TO_SERVER = "epipe_to_server"
    OBSERVER_DROPPED = "observer_dropped"
    OBSERVER_SKIPPED = "observer_skipped"
    # model API exchanges (`model_turn` records; docs/model-turns.md).
    MODEL_REQUEST_UNREAD = "model_request_unread"
    MODEL_SHAPE_UNKNOWN = "model_shape_unknown"
    MODEL_EVENT_NOT_JSON = "model_event_not_json"
    MODEL_ANSWER_NOT_JSON = "model_answer_not_json"
    MODEL_TOOL_CALLS_OVER_CAP = "model_tool_calls_over_cap"
    MODEL_ARGS_OVER_CAP = "model_args_over_cap"
    MODEL_STREAM_CUT = "model_stream_cut"
    MODEL_FLOW_ERROR = "model_flow_error"
    MODEL_RESULTS_WITHOUT_ID = "model_results_without_id"


#: What each note means, with its detail (the Notes table of docs/record-format.md).
NOTE_MEANING: Final[dict[NoteCode, str]] = {
    NoteCode.PROXY_SHUTDOWN: "the proxy stopped while the exchange was still open",
    NoteCode.SSE_EVENT_OVER_CAP: "`:<bytes>` an SSE event larger than `mcp_max_event_kb` passed "
    "unparsed (the first such event; later ones are counted in one "
    "`sse_event_over_cap_more:<n>`)",
    NoteCode.SSE_UNTERMINATED_EVENT: "`:<bytes>` the stream ended inside an event (no blank line "
    "after it): clients drop it (later ones counted in `sse_unterminated_event_more:<n>`)",
    NoteCode.BODY_OVER_CAP: "`:<bytes>` a JSON answer larger than `mcp_max_body_kb` (or what it "
    "inflates to) passed unread",
    NoteCode.BODY_UNSEEN: "mitmproxy streamed a JSON body past the addon (`stream_large_bodies`)",
    NoteCode.ENCODED_BODY: "`:<encoding>` a JSON answer in an encoding the proxy does not decode "
    "(`br`, `zstd`, any unknown one)",
    NoteCode.BODY_UNDECODABLE: "`:<encoding>` a gzip/deflate JSON answer that is corrupt or "
    "inflates past `mcp_max_body_kb`",
    NoteCode.EMPTY_BODY: "a 2xx answer to a request with an empty body",
    NoteCode.ENCODED_STREAM: "`:<encoding>` an SSE answer in an encoding the proxy does not decode "
    "(`br`, `zstd`)",
    NoteCode.STREAM_DECODE_ERROR: "a gzip/deflate SSE answer that does not inflate",
    NoteCode.STREAM_INFLATE_OVER_CAP: "a compressed SSE chunk that inflates past the event cap: "
    "reading stopped",
    NoteCode.UNEXPECTED_RESPONSE_ID: "`:<id>` a response on the SSE answer with an id that is not "
    "the request's (the first, cut to 120 characters)",
    NoteCode.RESULT_AND_ERROR: "the answer has both `result` and `error`",
    NoteCode.ERROR_WITHOUT_ID: "a JSON-RPC error with a null or absent id (allowed when the server "
    "could not read the request's id); in a JSON body and on a POST's SSE stream alike it answers "
    "every request of the POST that no answer named (all of a batch the server refused whole)",
    NoteCode.CONTENT_TYPE: "`:<type>` `TRANSPORT_VIOLATION`: a 2xx answer to a request in a media "
    "type other than `application/json` or `text/event-stream` (clients refuse it)",
    NoteCode.NO_CONTENT_TYPE: "`TRANSPORT_VIOLATION`: a 2xx answer to a request without a "
    "`Content-Type`",
    NoteCode.ACCEPTED_FOR_REQUEST: "`TRANSPORT_VIOLATION`: a 202 to a request (202 is for "
    "notifications and responses; clients discard its body), with no 2024-11-05 endpoint "
    "stream of the session open to carry the answer",
    NoteCode.SSE_EVENT_TYPE: "`:<type>` `TRANSPORT_VIOLATION`: the answer came only in an SSE "
    "event whose type is not `message` (clients skip it)",
    NoteCode.BATCH_ANSWER: "`:<version>` `INVALID_ENVELOPE`: a JSON array (a JSON body, or an SSE "
    "event's data) answered a request of a version without batches (only 2025-03-26 has them)",
    NoteCode.RESULT_MISSING: "`:<member>` `INVALID_RESULT`: the result lacks a member its method "
    "requires (or has it with the wrong JSON type)",
    NoteCode.UNKNOWN_CONTENT_BLOCK: "`:<type>` `INVALID_TOOL_RESULT`: a content block of no known "
    "type (cut to 40 characters)",
    NoteCode.MALFORMED_CONTENT_BLOCK: "`:<type>` `INVALID_TOOL_RESULT`: a content block that "
    "does not fit its type's shape at some depth (a member missing or of the wrong type, a "
    "`resource` without `uri` and `text`/`blob`, an annotation out of range)",
    NoteCode.RESULT_SHAPE: "`:<path>: <why>` `INVALID_RESULT`/`INVALID_TOOL_RESULT`: where "
    "below its first level the result departs from its method's result schema "
    "(`tools/0/inputSchema: missing`; cut to 120 characters), or `resultType: unknown "
    "'<value>'` (2026-07-28: an unrecognised `resultType` MUST be considered invalid)",
    NoteCode.INPUT_REQUIRED_WITHOUT_REQUESTS: "an `input_required` result with neither "
    "`inputRequests` nor `requestState` (the spec requires one)",
    NoteCode.TASK_CREATED: "2025-11-25: a task-augmented `tools/call` answered with the task "
    "(`CreateTaskResult`), not yet its content",
    NoteCode.REQUEST_BOM: "the POST body started with a UTF-8 BOM (read past it, as RFC 8259 "
    "allows); what the server made of it decides the outcome",
    NoteCode.BATCH: "`:<n>` the POST was a batch of n messages",
    NoteCode.SUBSCRIPTION: "a 2026-07-28 `subscriptions/listen`: long by design",
    NoteCode.SESSION_LOST: "the server answered 404 on a live session (it forgot it): the "
    "session's lifeline ends here (a `session_end` record with `endReason: not_found` follows)",
    NoteCode.CLOSED_AFTER_ANSWER: "the stream was cut after every answer was delivered (SDK "
    "clients hang up on the final event): `sse.end` is `complete`",
    NoteCode.UPSTREAM_BROKE_MID_BODY: "`:<status>` the upstream broke inside a buffered body; "
    "mitmproxy answered the client 502 itself",
    NoteCode.ANSWER_ON_GET_STREAM: "2024-11-05: the answer came on the session's GET stream",
    NoteCode.ANSWER_STREAM_CLOSED: "2024-11-05: the GET stream that was to carry the answer ended "
    "first",
    NoteCode.NOT_RESUMED: "2025-11-25: a stream with event ids ended without the answer and no "
    "resumption delivered it within 300 s",
    NoteCode.EVICTED_PENDING_CAP: "written early: too many exchanges were open at once",
    NoteCode.EVICTED_PARKED_CAP: "written early: too many requests were waiting for an answer on "
    "another stream",
    NoteCode.DELETE_UNANSWERED: "a DELETE the server never answered (the client exited "
    "meanwhile); it still ends the lifeline",
    NoteCode.NOT_ENDED: "`:<status>` the server refused the DELETE (405, say): it ended "
    "nothing (`endReason` null)",
    NoteCode.ALREADY_ENDED: "`:<endReason>` a DELETE of a session whose lifeline had already "
    "ended (a 404, idle, evicted): it ended nothing (`endReason` null)",
    NoteCode.SSE_EVENT_OVER_BUDGET: "`:<bytes>` an SSE event dropped unparsed because all "
    "streams together held `mcp_max_buffered_mb` (later ones counted in "
    "`sse_event_over_budget_more:<n>`)",
    NoteCode.SPAWN_FAILED: "stdio: `:<errno>` the server command could not be started "
    "(`ENOENT`: not found; `EACCES`: not executable); on the run's only record, a "
    "`session_end` with `endReason: spawn_failed`",
    NoteCode.SERVER_EXITED: "stdio: `:code=<n>` or `:signal=<NAME>` how the server process "
    "ended; on its `session_end`, and on each request it left unanswered (`NO_RESPONSE`)",
    NoteCode.STDIN_CLOSED_PENDING: "stdio: the client closed the server's stdin while this "
    "request still awaited its answer (on the request; on the `session_end` `:<n>`, how many)",
    NoteCode.STDOUT_NOT_JSON: "stdio: `:<n>` lines on the server's stdout that are not JSON "
    "(a banner, a `console.log`): passed on, and a violation of the transport, not a failed "
    "call (`session_end`)",
    NoteCode.STDIN_NOT_JSON: "stdio: `:<n>` lines the client wrote that are not JSON "
    "(`session_end`)",
    NoteCode.PARTIAL_LAST_LINE: "stdio: `:<bytes>` the server's stdout ended inside a line "
    "(no newline after its last bytes); clients drop it (`session_end`)",
    NoteCode.LINE_OVER_CAP: "stdio: `:<bytes>` a line longer than the wrapper reads "
    "(`--max-line-kb`) passed unread (the first; on the `session_end`); an answer whose id "
    "could still be read from its start is `UNINSPECTED` with `body_over_cap`",
    NoteCode.LATE_ANSWER: "stdio: the answer came after the client cancelled the request "
    "(`notifications/cancelled`)",
    NoteCode.STDERR_LINES: "stdio: `:<n>` lines the server wrote to stderr: counted, never a "
    "failure (2025-11-25: stderr is for logging) (`session_end`)",
    NoteCode.EPIPE_TO_CLIENT: "stdio: the client stopped reading the wrapper's stdout "
    "(`session_end`)",
    NoteCode.EPIPE_TO_SERVER: "stdio: the server stopped reading its stdin while the client "
    "still wrote (`session_end`)",
    NoteCode.OBSERVER_DROPPED: "stdio: `:<n>` lines passed on but not recorded because the "
    "recorder fell behind (`session_end`): the records of the calls they carried are missing",
    NoteCode.OBSERVER_SKIPPED: "stdio: `:<bytes>` bytes passed on without a copy to the "
    "recorder (`splice`), while it was so far behind that copies were being dropped "
    "(`session_end`)",
    NoteCode.MODEL_REQUEST_UNREAD: "`:<bytes>` a model request whose body could not be read "
    "(over `mcp_max_body_kb`, or a coding the proxy does not inflate, such as zstd): the path "
    "says which API; the tool results it carried are unknown",
    NoteCode.MODEL_SHAPE_UNKNOWN: "`:<api>` a POST to a model API's path whose body is not that "
    "API's shape: `provider` is `unknown`",
    NoteCode.MODEL_EVENT_NOT_JSON: "an event of a model answer's stream was not a JSON object "
    "(once per record)",
    NoteCode.MODEL_ANSWER_NOT_JSON: "a model answer's body was not a JSON object",
    NoteCode.MODEL_TOOL_CALLS_OVER_CAP: "the answer asked for more tool calls than a record lists "
    "(64)",
    NoteCode.MODEL_ARGS_OVER_CAP: "a tool call's arguments streamed past 1 MiB: hashed as far as "
    "they came",
    NoteCode.MODEL_STREAM_CUT: "a streamed model answer ended without its terminal event "
    "(`complete` is false)",
    NoteCode.MODEL_FLOW_ERROR: "`:<reason>` the model exchange broke (mitmproxy's reason)",
    NoteCode.MODEL_RESULTS_WITHOUT_ID: "`:<n>` tool results the request carried without an id "
    "(Gemini's Developer API often omits it): they are not in `toolResults`",
}


# -- field types --------------------------------------------------------------------

# Named tuples rather than frozen dataclasses: every command and the addon import this
# module, and a dozen dataclasses cost 5 ms there (an eighth of the CLI's own start-up).
# Tuples compare by value across classes (`Num() == Bool()`): tell types apart with
# isinstance, as every reader does.


class Int(NamedTuple):
    const: int | None = None


class Num(NamedTuple):
    """A JSON number (integer or not)."""


class Str(NamedTuple):
    #: A JSON Schema regular expression the value matches, where there is one.
    pattern: str | None = None


class Bool(NamedTuple):
    pass


class Enum(NamedTuple):
    values: type[StrEnum]


class ListOf(NamedTuple):
    item: FieldType


class RpcId(NamedTuple):
    """A JSON-RPC id as it was on the wire: a string, a number, or null, or whatever else
    a client sent (the record keeps what the client did, valid or not)."""


class AnyJson(NamedTuple):
    """Any JSON value (redacted message bodies)."""


class Member(NamedTuple):
    name: str
    type: FieldType
    nullable: bool
    meaning: str


class Obj(NamedTuple):
    """A nested object with exactly these members, all present."""

    members: tuple[Member, ...]


FieldType = Int | Num | Str | Bool | Enum | ListOf | RpcId | AnyJson | Obj


class Field(NamedTuple):
    name: str
    type: FieldType
    #: May the value be null? (A field that does not apply is null, never absent.)
    nullable: bool
    meaning: str
    #: The format version that added the field.
    since: int = 1
    #: Present in every record. Fields added after the first release of a version are
    #: not: recordings written before them lack them, and readers treat absence as null.
    always: bool = True


def _m(name: str, type_: FieldType, nullable: bool, meaning: str) -> Member:
    return Member(name, type_, nullable, meaning)


def _later(name: str, type_: FieldType, nullable: bool, meaning: str) -> Field:
    """A field added with the retry/session tracker: absent from older v1 recordings."""
    return Field(name, type_, nullable, meaning, always=False)


#: The request headers whose presence (never value) a record notes, in `requestHeaders`.
RECORDED_REQUEST_HEADERS: Final = (
    "accept",
    "last-event-id",
    "mcp-protocol-version",
    "mcp-session-id",
)

#: At most this many `Accept` media types are recorded, each cut to this many characters.
MAX_ACCEPT_TYPES: Final = 8
MAX_ACCEPT_CHARS: Final = 80

TS_PATTERN: Final = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$"

#: Every field, in the order records carry them (identity, timing, who, what, how it went,
#: what it repeated, what the session did; the label and the notes last).
FIELDS: Final[tuple[Field, ...]] = (
    Field("v", Int(const=FORMAT_VERSION), False, f"format version, `{FORMAT_VERSION}`"),
    Field("id", Int(), False, "record number, unique within the file (1, 2, 3, …)"),
    Field(
        "kind",
        Enum(Kind),
        False,
        "`request` (a JSON-RPC request from the client), `notification` (a POST that "
        "carried only notifications), `response` (a POST that carried the client's answer "
        "to a server request), `session_end` (a DELETE or the proxy's end of a session), "
        "`stream` (a GET event stream of a session, standby or resumption, written when "
        "it ends; `httpStatuses` holds its status, `sse` how it went), `model_turn` (a "
        "model API request and its answer, seen in the same proxy: `modelTurn`; "
        "docs/model-turns.md)",
    ),
    Field(
        "ts",
        Str(TS_PATTERN),
        False,
        "when the POST reached the proxy, ISO-8601 UTC with milliseconds, `Z`",
    ),
    Field(
        "durationMs",
        Num(),
        True,
        "from the POST reaching the proxy to the end of its response (last byte, error, or "
        "proxy shutdown)",
    ),
    Field(
        "server",
        Str(),
        False,
        "upstream `host:port`; `stdio:<name>` for a server run by `mcp-layers wrap` "
        "(`--name`, else the command's file name)",
    ),
    _later(
        "transport",
        Enum(Transport),
        True,
        "`stdio` on the records of `mcp-layers wrap` (docs/stdio.md), whose HTTP-only fields "
        "(`httpStatuses`, `contentType`, `requestHeaders`, `accept`) are empty; null on the "
        "HTTP proxy's",
    ),
    Field(
        "session",
        Str(),
        True,
        "hashed `Mcp-Session-Id` (see Privacy). Where a server issues no session "
        "(stateless, or 2026-07-28, where an `Mcp-Session-Id` a request carries names no "
        "session) the client stands in: `c-` and a hash of the client's "
        "address and user agent (not the connection: SDK clients open a new one after "
        "every SSE answer). Two clients with the same user agent on one host share it",
    ),
    Field(
        "client",
        Str(),
        True,
        '`"name@version"` from `initialize` `params.clientInfo`, or from '
        '`params._meta["io.modelcontextprotocol/clientInfo"]` (2026-07-28), remembered '
        "per session",
    ),
    Field("userAgent", Str(), True, "the request's `User-Agent`"),
    Field(
        "protocolVersion",
        Str(),
        True,
        "the negotiated version: the `initialize` result's `protocolVersion` (an "
        "`initialize` that got no result shows the version it asked for), else the "
        'request\'s `_meta["io.modelcontextprotocol/protocolVersion"]`, else its '
        "`MCP-Protocol-Version` header (a GET stream's or DELETE's too), else the session's",
    ),
    Field(
        "method",
        Str(),
        True,
        "the JSON-RPC method of the request (or of the notification); null on `response` "
        "records (see `serverMethod`) and `session_end` records",
    ),
    Field("tool", Str(), True, "`params.name` of a `tools/call`"),
    _later("prompt", Str(), True, "`params.name` of a `prompts/get`"),
    Field(
        "postCount",
        Int(),
        True,
        "1-based count of this session's POSTs so far, this one included; every POST counts "
        "(notifications too, a batch once); GET and DELETE do not",
    ),
    Field(
        "httpStatuses",
        ListOf(Int()),
        False,
        "HTTP statuses of every attempt of this logical call, this POST's last (`[]` when "
        "no response arrived)",
    ),
    Field("contentType", Str(), True, "the response's media type without parameters"),
    Field(
        "jsonrpc",
        Obj(
            (
                _m(
                    "id",
                    RpcId(),
                    True,
                    "the request's id, exactly as on the wire (whatever the client sent)",
                ),
                _m(
                    "errorCode",
                    Int(),
                    True,
                    "`error.code` when the answer is a JSON-RPC error (also inside an HTTP "
                    "error body)",
                ),
                _m(
                    "errorMessage",
                    Str(),
                    True,
                    "`error.message`, cut to 300 characters and scrubbed of token shapes",
                ),
            )
        ),
        True,
        "on requests: `{id, errorCode, errorMessage}`",
    ),
    Field(
        "resultType",
        Str(),
        True,
        '`result.resultType`; `"complete"` when a result has none (the 2026-07-28 rule); '
        "null without a result",
    ),
    Field(
        "isError",
        Bool(),
        True,
        "`result.isError` of a `tools/call` (`false` when absent); null otherwise",
    ),
    Field(
        "outcome",
        Enum(Outcome),
        True,
        "the classification (Outcomes, below); null for `notification`, `response` and "
        "`session_end` records",
    ),
    Field("layer", Enum(Layer), True, "the outcome's layer (Outcomes, below); null where it is"),
    Field(
        "sse",
        Obj(
            (
                _m("events", Int(), False, "events parsed"),
                _m(
                    "final",
                    Bool(),
                    False,
                    "whether the final JSON-RPC response for this request arrived",
                ),
                _m(
                    "end",
                    Enum(StreamEnd),
                    False,
                    "how the stream ended: `complete` (the message ended normally, or the "
                    "connection closed after every answer was delivered, noted "
                    "`closed_after_answer`), `eof` (the server closed a stream that had no "
                    "length framing, so truncation cannot be seen at the HTTP level), "
                    "`error` (interrupted: reset, client gone, or proxy shutdown)",
                ),
                _m(
                    "resumed",
                    Bool(),
                    False,
                    "the answer came on a later GET stream with `Last-Event-ID` (2025-11-25 "
                    "polling)",
                ),
            )
        ),
        True,
        "for `text/event-stream` answers: `{events, final, end, resumed}`; on `stream` "
        "records `final` says whether the stream delivered an answer to a request and "
        "`resumed` whether the GET carried `Last-Event-ID`",
    ),
    Field(
        "retryOrigin",
        Enum(RetryOrigin),
        False,
        "`none`, or how this attempt repeats the previous one (How a retry is recognised)",
    ),
    _later(
        "attempt",
        Int(),
        True,
        "on requests: 1 for a first try, n for the n-th attempt of the same logical call",
    ),
    _later("retryOf", Int(), True, "`id` of the previous attempt's record"),
    _later(
        "retryDelayMs",
        Num(),
        True,
        "from the end of the previous attempt to the start of this one",
    ),
    _later(
        "retryAfterMs",
        Int(),
        True,
        "on an error response (429, 503, …) that had `Retry-After` (seconds or HTTP date), in ms",
    ),
    _later(
        "retryAfterHonored",
        Bool(),
        True,
        "on the attempt after such a response: did it wait at least that long",
    ),
    _later(
        "toolSafety",
        Enum(ToolSafety),
        True,
        "`tools/call` only: `read_only`, `idempotent`, `unsafe` or `unknown`, from the "
        "tool's annotations in the server's last `tools/list` answer the client could take "
        "(`SUCCESS`; spec defaults when a hint is absent)",
    ),
    _later(
        "unsafeRetry",
        Bool(),
        True,
        "on a retry: true when the tool is `unsafe` and the previous attempt's side effect "
        "is uncertain (5xx, `STREAM_INCOMPLETE`, `NO_RESPONSE`, `TRANSPORT_VIOLATION`)",
    ),
    _later(
        "continues",
        Int(),
        True,
        "a 2026-07-28 multi round-trip continuation (carries `inputResponses`/"
        "`requestState`): the `id` of the `INPUT_REQUIRED` record it answers. Never a retry",
    ),
    _later(
        "previousSession",
        Str(),
        True,
        "on `initialize`: the session of the same client that a 404 (or abandonment) ended "
        "just before",
    ),
    _later(
        "negotiation",
        Bool(),
        True,
        "true on a 400 carrying -32020/-32021/-32022 (or a discover probe's rejection) that "
        "the client followed with a fallback `initialize`; false when it did not",
    ),
    _later(
        "ackNote",
        Str(),
        True,
        "a notification or response POST acknowledged with something other than `202` "
        "(`200 with body`, `204 without body`)",
    ),
    _later(
        "serverMethod",
        Str(),
        True,
        "on `response` records: the server request being answered (`elicitation/create`, "
        "`sampling/createMessage`, `roots/list`, `ping`)",
    ),
    _later(
        "answerMs",
        Num(),
        True,
        "on `response` records: from the server request on the stream to the client's answer POST",
    ),
    _later(
        "requestHeaders",
        ListOf(Str()),
        False,
        "on POST, GET and DELETE records: which of the MCP request headers "
        + ", ".join(f"`{h}`" for h in RECORDED_REQUEST_HEADERS)
        + " the request carried, lower-case and sorted: names only, never values (`[]` on "
        "records of no request)",
    ),
    _later(
        "accept",
        ListOf(Str()),
        False,
        "the media types the request's `Accept` listed, lower-case, without parameters, in "
        "order (`[]` without one)",
    ),
    _later(
        "eventIds",
        Bool(),
        True,
        "on SSE answers and `stream` records: whether an event carried an `id` (the stream "
        "can be resumed with `Last-Event-ID`); null without a stream",
    ),
    _later(
        "retryMs",
        Int(),
        True,
        "on SSE answers and `stream` records: the last `retry:` delay (ms) the stream sent, "
        "the least a client waits before reconnecting; null when it sent none",
    ),
    _later(
        "streamClosedMs",
        Num(),
        True,
        "on a request answered with SSE whose answer came resumed on a GET (`sse.resumed`) "
        "or never came: ms from the POST to the end of its own stream (when the client had "
        "to reconnect); null otherwise",
    ),
    _later(
        "lastEventMs",
        Num(),
        True,
        "on a request answered with SSE: ms from the POST to the last event its own stream "
        "carried (a progress notification, the final answer); null without events. What "
        "`hangs` reads to tell a slow call (events kept coming) from a hung one",
    ),
    _later(
        "endReason",
        Enum(EndReason),
        True,
        "on `session_end` records: `delete`, `not_found` (a 404), `shutdown`, `idle` (no "
        "traffic for `mcp_session_idle_s`), `evicted` (forgotten past `mcp_max_sessions`); "
        "stdio: `exited` (the server process ended), `spawn_failed` (it never started); "
        "null on a DELETE that ended nothing (refused, or the session had already ended)",
    ),
    _later(
        "sessionStats",
        Obj(
            (
                _m("posts", Int(), False, "POSTs in the session"),
                _m("getStreams", Int(), False, "GET streams opened"),
                _m("serverRequests", Int(), False, "server requests on any of its streams"),
                _m(
                    "serverNotifications",
                    Int(),
                    False,
                    "server notifications on any of its streams",
                ),
            )
        ),
        True,
        "on `session_end` records: `{posts, getStreams, serverRequests, "
        "serverNotifications}` counted over the session's life",
    ),
    _later(
        "injected",
        Obj(
            (
                _m("rule", Str(), False, "the fault rule's name"),
                _m("action", Str(), False, "what it did (`http_status`, `sse_truncate`, …)"),
            )
        ),
        True,
        "`{rule, action}` when a fault rule of the proxy produced or altered this exchange; "
        "organic failures have null",
    ),
    _later(
        "bodies",
        Obj(
            (
                _m("request", AnyJson(), True, "the request message, redacted"),
                _m("response", AnyJson(), True, "its answer, redacted (null if none)"),
                _m(
                    "headersMs",
                    Num(),
                    True,
                    "ms from the request to the response's headers (null: none came)",
                ),
                _m(
                    "events",
                    ListOf(
                        Obj(
                            (
                                _m("ms", Num(), False, "ms from the request to the event"),
                                _m("id", Str(), True, "the event's `id` (the last one set)"),
                                _m("event", Str(), True, "the event's type (`message`)"),
                                _m("retry", Int(), True, "the `retry:` the event set"),
                                _m("data", AnyJson(), True, "the data, redacted"),
                                _m(
                                    "json",
                                    Bool(),
                                    False,
                                    "`data` is the JSON value the data held; false: its text",
                                ),
                            )
                        )
                    ),
                    False,
                    "every SSE event of the answer's stream as it came (at most 256), for "
                    "`mcp-layers replay`; `[]` for a JSON answer",
                ),
            )
        ),
        True,
        "only with `--set mcp_record_bodies=true`: `{request, response, headersMs, events}`, "
        "redacted: members "
        "named like secrets (`authorization`, `token`, `password`, `api_key`, `cookie`, …, "
        "and any name ending in one: `accessToken`, `clientSecret`, `x-api-key`; not "
        "`progressToken`) blanked, member names and every string scrubbed of token shapes, "
        "strings cut to 2,000 characters",
    ),
    _later(
        "modelTurn",
        Obj(
            (
                _m("provider", Enum(Provider), False, "`anthropic`, `openai`, `gemini`, `unknown`"),
                _m(
                    "api",
                    Enum(ModelApi),
                    False,
                    "`messages`, `chat_completions`, `responses`, `generate_content`, `unknown`",
                ),
                _m("model", Str(), True, "the model's name (the answer's, else the request's)"),
                _m("streamed", Bool(), False, "the answer was asked for as a stream"),
                _m(
                    "ttftMs",
                    Num(),
                    True,
                    "streamed: ms from the request to the first output (text or a tool call); "
                    "null unstreamed or when none came",
                ),
                _m(
                    "stopReason",
                    Str(),
                    True,
                    "as the API says it (`tool_use`, `end_turn`, `tool_calls`, `stop`, "
                    "`completed`, `STOP`, …); null when none came",
                ),
                _m(
                    "complete",
                    Bool(),
                    False,
                    "the answer's terminal event came (`message_stop`, `[DONE]`, "
                    "`response.completed|failed|incomplete`, a Gemini `finishReason`) or its "
                    "JSON body was read whole; false: cut midway (note `model_stream_cut`) "
                    "or not read",
                ),
                _m("error", Str(), True, "the error type the answer carried, if any"),
                _m(
                    "toolCalls",
                    ListOf(
                        Obj(
                            (
                                _m("id", Str(), True, "the tool call id (`toolu_…`, `call_…`)"),
                                _m(
                                    "name",
                                    Str(),
                                    True,
                                    "the name as the model spells it (Codex: `namespace.name`)",
                                ),
                                _m(
                                    "argsHash",
                                    Str(),
                                    True,
                                    "sha256 (20 hex) of the arguments' canonical JSON, the "
                                    "same hash as a joined `tools/call`'s; never the arguments",
                                ),
                            )
                        )
                    ),
                    False,
                    "the tool calls the model asked for, in order",
                ),
                _m(
                    "toolResults",
                    ListOf(Str()),
                    False,
                    "ids of the tool results this request carried back for the first time "
                    "(each request resends the history: a result counts on the first only)",
                ),
                _m("inputTokens", Int(), True, "as the API counted them, when given"),
                _m("outputTokens", Int(), True, "as the API counted them, when given"),
            )
        ),
        True,
        "on `model_turn` records: what the model was asked and answered, never text, "
        "arguments or keys (docs/model-turns.md)",
    ),
    _later(
        "modelCall",
        Obj(
            (
                _m("turn", Int(), False, "`id` of the `model_turn` record that asked for the call"),
                _m("toolCallId", Str(), True, "the model's tool call id"),
                _m("join", Enum(ModelJoin), False, "`exact` (by id) or `inferred`"),
            )
        ),
        True,
        "on a `tools/call` whose model turn the proxy saw: `{turn, toolCallId, join}`",
    ),
    Field("scenario", Str(), True, "`--set mcp_scenario=LABEL`"),
    Field(
        "notes",
        ListOf(Str()),
        False,
        "anomalies worth knowing, as short codes with detail after a colon (Notes, below)",
    ),
)

#: Field names, in record order.
FIELD_NAMES: Final[tuple[str, ...]] = tuple(f.name for f in FIELDS)

#: Field by name.
FIELD: Final[dict[str, Field]] = {f.name: f for f in FIELDS}

_LIST_FIELDS: Final = tuple(f.name for f in FIELDS if isinstance(f.type, ListOf))
_TEMPLATE: Final[dict[str, Any]] = {
    f.name: FORMAT_VERSION if f.name == "v" else None for f in FIELDS
}
_TEMPLATE["retryOrigin"] = RetryOrigin.NONE.value


def new_record(**values: Any) -> dict[str, Any]:
    """A record with every field in order: `values` set, lists fresh, the rest null.

    Unknown names are refused, so a misspelt field fails at once rather than shipping.
    """
    record = _TEMPLATE.copy()
    for name in _LIST_FIELDS:
        record[name] = []
    for name, value in values.items():
        if name not in record:
            raise KeyError(f"not a record field: {name!r}")
        record[name] = value
    return record
