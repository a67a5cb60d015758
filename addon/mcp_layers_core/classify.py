"""Where did an MCP exchange fail? One verdict per request, on one of three layers.

The order of the checks is the point: the transport decides first (a 500 with a
success-looking body is an HTTP error), then the JSON-RPC envelope, then the tool
result. `classify_answer` judges one decoded answer to one request; the exchange
tracker decides which answer that is (a JSON body, or one event of an SSE stream) and
builds the verdicts with no answer (`NO_RESPONSE`, `STREAM_INCOMPLETE`, …) itself.
`classify_body` is the seed article's whole-exchange classifier, kept as the reference
the table tests hold the rules to.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .jsonrpc import NOT_JSON, same_id, try_loads
from .notes import Note
from .record import LAYER_OF, SUCCESSFUL, Layer, NoteCode, Outcome

__all__ = [
    "CACHEABLE_METHODS",
    "KNOWN_RESULT_TYPES",
    "LAYER_OF",
    "REQUIRED_MEMBERS",
    "SUCCESSFUL",
    "Layer",
    "Outcome",
    "Verdict",
    "answer_form_fault",
    "batch_allowed",
    "classify_answer",
    "classify_body",
    "event_type_ok",
    "http_error",
    "is_modern",
    "violation",
]


#: `resultType` values a client must understand (2026-07-28); absent means "complete".
KNOWN_RESULT_TYPES = frozenset({"complete", "input_required"})


@dataclass(frozen=True, slots=True)
class Verdict:
    """The classification of one request's exchange, and what the answer said."""

    outcome: Outcome
    error_code: int | None = None
    error_message: str | None = None
    result_type: str | None = None
    is_error: bool | None = None
    #: Why the outcome is what it is, where the fields alone do not say.
    note: Note | None = None

    @property
    def layer(self) -> Layer:
        return LAYER_OF[self.outcome]


#: The media types a Streamable HTTP server may answer a request with (every version).
ANSWER_MEDIA_TYPES = frozenset({"application/json", "text/event-stream"})

#: The only SSE event type clients act on (both SDKs; event types are case-sensitive).
MESSAGE_EVENT = "message"

#: A server's media type is kept in a note at most this long.
_MAX_TYPE_CHARS = 80


def answer_form_fault(status: int, content_type: str | None) -> Note | None:
    """Why a 2xx answer to a Streamable HTTP request cannot reach the client, or None.

    `content_type` is the media type without parameters, lower-cased. The spec: a POST
    carrying a request MUST be answered `application/json` or `text/event-stream`; a
    202 is for notifications and responses only (the SDKs discard a 202's body).
    """
    if not 200 <= status < 300:
        return None
    if status == 202:
        return Note(NoteCode.ACCEPTED_FOR_REQUEST)
    if content_type in ANSWER_MEDIA_TYPES:
        return None
    if not content_type:
        return Note(NoteCode.NO_CONTENT_TYPE)
    return Note(NoteCode.CONTENT_TYPE, content_type[:_MAX_TYPE_CHARS])


def event_type_ok(event: str) -> bool:
    """Does a client read a message out of an SSE event of this type?"""
    return event == MESSAGE_EVENT


def violation(why: Note, carried: Verdict | None = None) -> Verdict:
    """`TRANSPORT_VIOLATION`, keeping a JSON-RPC error's fields the answer carried."""
    code = carried.error_code if carried else None
    message = carried.error_message if carried else None
    return Verdict(Outcome.TRANSPORT_VIOLATION, code, message, note=why)


def http_error(body: bytes | None) -> Verdict:
    """A non-2xx status. The body cannot change the verdict, but a JSON-RPC error in it
    (a 400 with -32022 during version negotiation, say) is worth keeping."""
    code, message = _error_fields(try_loads(body) if body else NOT_JSON)
    return Verdict(Outcome.HTTP_ERROR, error_code=code, error_message=message)


def classify_answer(
    method: str,
    request_id: object,
    answer: Any,
    *,
    version: str | None = None,
    task: bool = False,
) -> Verdict:
    """Judge the decoded answer (`NOT_JSON` if it did not decode) to one request.

    `version` is the exchange's protocol version (None: unknown, judged by the newest
    rules); `task` says the request was task-augmented (`params.task`, 2025-11-25).
    """
    if answer is NOT_JSON:
        return Verdict(Outcome.MALFORMED_JSON)
    if isinstance(answer, list) and not batch_allowed(version):
        return Verdict(Outcome.INVALID_ENVELOPE, note=Note(NoteCode.BATCH_ANSWER, version))
    if not isinstance(answer, dict) or answer.get("jsonrpc") != "2.0":
        return Verdict(Outcome.INVALID_ENVELOPE)
    has_result, has_error = "result" in answer, "error" in answer
    if has_result == has_error:
        note = Note(NoteCode.RESULT_AND_ERROR) if has_result else None
        return Verdict(Outcome.INVALID_ENVELOPE, note=note)
    if has_error:
        return _error_verdict(request_id, answer)
    if "id" not in answer or not same_id(answer["id"], request_id):
        return Verdict(Outcome.INVALID_ENVELOPE)
    return _result_verdict(method, answer["result"], version, task)


def classify_body(
    method: str, request_id: object, status: int | None, body: bytes | None
) -> Verdict:
    """A whole exchange whose answer is one JSON body: the seed article's classifier."""
    if status is None:
        return Verdict(Outcome.NO_RESPONSE)
    if not 200 <= status < 300:
        return http_error(body)
    return classify_answer(method, request_id, try_loads(body) if body else NOT_JSON)


def batch_allowed(version: str | None) -> bool:
    """JSON-RPC batches exist only in 2025-03-26 (and an unknown version may be it)."""
    return version is None or version == "2025-03-26"


def is_modern(version: str | None) -> bool:
    """Does `result.resultType` mean anything? Only from 2026-07-28 on; before, it is an
    unknown member a client ignores. An unknown version is judged by the newest rules."""
    return version is None or version >= "2026-07-28"


def _error_verdict(request_id: object, answer: dict[str, Any]) -> Verdict:
    error = answer["error"]
    code, message = _error_fields(answer)
    if code is None or message is None or not isinstance(error, dict):
        return Verdict(Outcome.INVALID_ENVELOPE)
    answer_id = answer.get("id")
    if answer_id is None:
        # The spec lets an error carry no id (or null) when the server could not read
        # the request's; the code is the useful part, so keep it and say so.
        return Verdict(Outcome.JSONRPC_ERROR, code, message, note=Note(NoteCode.ERROR_WITHOUT_ID))
    if not same_id(answer_id, request_id):
        return Verdict(Outcome.INVALID_ENVELOPE, code, message)
    return Verdict(Outcome.JSONRPC_ERROR, code, message)


def _error_fields(answer: object) -> tuple[int | None, str | None]:
    """`error.code` (an integer) and `error.message` (a string) when well-formed."""
    error = answer.get("error") if isinstance(answer, dict) else None
    if not isinstance(error, dict):
        return None, None
    code = error.get("code")
    if isinstance(code, float) and code.is_integer():
        code = int(code)
    if not isinstance(code, int) or isinstance(code, bool):
        code = None
    message = error.get("message")
    return code, message if isinstance(message, str) else None


#: Members a result of these methods must have, and their JSON types (every version
#: that has the method; the SDK clients refuse a result without them).
REQUIRED_MEMBERS: dict[str, tuple[tuple[str, type], ...]] = {
    "initialize": (("protocolVersion", str), ("capabilities", dict), ("serverInfo", dict)),
    "tools/list": (("tools", list),),
    "prompts/list": (("prompts", list),),
    "prompts/get": (("messages", list),),
    "resources/list": (("resources", list),),
    "resources/templates/list": (("resourceTemplates", list),),
    "resources/read": (("contents", list),),
    "completion/complete": (("completion", dict),),
}

#: 2026-07-28 cacheable results: they also carry caching directives (`ttlMs` ≥ 0,
#: `cacheScope` "public" or "private"), both required on the wire.
CACHEABLE_METHODS = frozenset(
    {
        "tools/list",
        "prompts/list",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "server/discover",
    }
)

#: Content block types of a tool result. Not gated by version: clients read every type
#: whatever the negotiated version (`audio` is 2025-03-26, `resource_link` 2025-06-18).
_CONTENT_TYPES = frozenset({"text", "image", "resource", "audio", "resource_link"})
#: Members each content block type must carry as strings (`resource` an object).
_CONTENT_STRINGS: dict[str, tuple[str, ...]] = {
    "text": ("text",),
    "image": ("data", "mimeType"),
    "audio": ("data", "mimeType"),
    "resource_link": ("uri", "name"),
}
#: A server's content block type is kept in a note at most this long.
_MAX_BLOCK_TYPE_CHARS = 40


def _result_verdict(method: str, result: object, version: str | None, task: bool) -> Verdict:
    tool = method == "tools/call"
    bad = Outcome.INVALID_TOOL_RESULT if tool else Outcome.INVALID_RESULT
    if not isinstance(result, dict):
        return Verdict(bad)
    raw_type = result.get("resultType", "complete")
    result_type = raw_type if isinstance(raw_type, str) else None
    # Before 2026-07-28 `resultType` is no member of any result: judge as if absent.
    judged_type = result_type if is_modern(version) else "complete"
    if judged_type == "input_required":
        if not isinstance(result.get("inputRequests"), dict) and not isinstance(
            result.get("requestState"), str
        ):
            # The spec: at least one of inputRequests / requestState MUST be present.
            why = Note(NoteCode.INPUT_REQUIRED_WITHOUT_REQUESTS)
            return Verdict(bad, result_type=result_type, note=why)
        return Verdict(Outcome.INPUT_REQUIRED, result_type=result_type)
    if not tool:
        missing = _missing_member(method, result, version)
        if missing is not None:
            why = Note(NoteCode.RESULT_MISSING, missing)
            return Verdict(bad, result_type=result_type, note=why)
        return Verdict(Outcome.SUCCESS, result_type=result_type)
    if task and _is_create_task_result(result):
        # 2025-11-25: a task-augmented call is answered with the task, not the content.
        return Verdict(Outcome.SUCCESS, result_type=result_type, note=Note(NoteCode.TASK_CREATED))
    is_error = result.get("isError", False)
    content = result.get("content")
    # `content` not a list at all is the outcome's plain meaning: no note needed.
    fault = _content_fault(content) if isinstance(content, list) else None
    if (
        judged_type not in KNOWN_RESULT_TYPES
        or not isinstance(content, list)
        or fault is not None
        or not isinstance(is_error, bool)
    ):
        return Verdict(
            Outcome.INVALID_TOOL_RESULT,
            result_type=result_type,
            is_error=is_error if isinstance(is_error, bool) else None,
            note=fault,
        )
    outcome = Outcome.TOOL_ERROR if is_error else Outcome.TOOL_SUCCESS
    return Verdict(outcome, result_type=result_type, is_error=is_error)


def _missing_member(method: str, result: dict[str, Any], version: str | None) -> str | None:
    for name, kind in REQUIRED_MEMBERS.get(method, ()):
        if not isinstance(result.get(name), kind):
            return name
    if version is not None and version >= "2026-07-28" and method in CACHEABLE_METHODS:
        ttl = result.get("ttlMs")
        if not isinstance(ttl, int) or isinstance(ttl, bool) or ttl < 0:
            return "ttlMs"
        if result.get("cacheScope") not in ("public", "private"):
            return "cacheScope"
    return None


def _is_create_task_result(result: dict[str, Any]) -> bool:
    task = result.get("task")
    return (
        isinstance(task, dict)
        and isinstance(task.get("taskId"), str)
        and isinstance(task.get("status"), str)
    )


def _content_fault(content: list[Any]) -> Note | None:
    """Why a tool result's `content` list holds a block a client refuses, or None."""
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if not isinstance(block, dict) or not isinstance(kind, str) or kind not in _CONTENT_TYPES:
            return Note(NoteCode.UNKNOWN_CONTENT_BLOCK, str(kind)[:_MAX_BLOCK_TYPE_CHARS])
        strings = _CONTENT_STRINGS.get(kind, ())
        if any(not isinstance(block.get(name), str) for name in strings) or (
            kind == "resource" and not isinstance(block.get("resource"), dict)
        ):
            return Note(NoteCode.MALFORMED_CONTENT_BLOCK, kind)
    return None
