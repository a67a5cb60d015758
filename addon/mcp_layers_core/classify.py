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
from .shapes import INPUT_REQUIRED, ShapeFault, content_block_types, result_fault
from .versions import batch_allowed, has_result_type

__all__ = [
    "KNOWN_RESULT_TYPES",
    "LAYER_OF",
    "SUCCESSFUL",
    "Layer",
    "Outcome",
    "Verdict",
    "answer_form_fault",
    "classify_answer",
    "classify_body",
    "event_type_ok",
    "http_error",
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


#: A content block's `type` is kept in a note at most this long.
_MAX_BLOCK_TYPE_CHARS = 40


def _result_verdict(method: str, result: object, version: str | None, task: bool) -> Verdict:
    tool = method == "tools/call"
    bad = Outcome.INVALID_TOOL_RESULT if tool else Outcome.INVALID_RESULT
    if not isinstance(result, dict):
        return Verdict(bad)
    raw_type = result.get("resultType", "complete")
    result_type = raw_type if isinstance(raw_type, str) else None
    # Before 2026-07-28 `resultType` is no member of any result: judge as if absent.
    judged_type = result_type if has_result_type(version) else "complete"
    if judged_type == "input_required":
        return _input_required_verdict(bad, result, result_type, version)
    if judged_type not in KNOWN_RESULT_TYPES:
        # 2026-07-28 basic: "A `resultType` of any value unrecognized by the client
        # MUST be considered invalid."
        why = Note(NoteCode.RESULT_SHAPE, f"resultType: unknown {str(raw_type)[:40]!r}")
        return Verdict(bad, result_type=result_type, note=why)
    if tool and task and _is_create_task_result(result):
        # 2025-11-25: a task-augmented call is answered with the task, not the content.
        return Verdict(Outcome.SUCCESS, result_type=result_type, note=Note(NoteCode.TASK_CREATED))
    is_error = result.get("isError", False) if tool else None
    fault = result_fault(method, version, result)
    if fault is not None:
        return Verdict(
            bad,
            result_type=result_type,
            is_error=is_error if isinstance(is_error, bool) else None,
            note=_shape_note(fault, result, version, tool),
        )
    if not tool:
        return Verdict(Outcome.SUCCESS, result_type=result_type)
    outcome = Outcome.TOOL_ERROR if is_error else Outcome.TOOL_SUCCESS
    return Verdict(outcome, result_type=result_type, is_error=bool(is_error))


def _input_required_verdict(
    bad: Outcome, result: dict[str, Any], result_type: str | None, version: str | None
) -> Verdict:
    if not isinstance(result.get("inputRequests"), dict) and not isinstance(
        result.get("requestState"), str
    ):
        # The spec: at least one of inputRequests / requestState MUST be present.
        why = Note(NoteCode.INPUT_REQUIRED_WITHOUT_REQUESTS)
        return Verdict(bad, result_type=result_type, note=why)
    fault = result_fault(INPUT_REQUIRED, version, result)
    if fault is not None:
        return Verdict(
            bad, result_type=result_type, note=Note(NoteCode.RESULT_SHAPE, fault.detail())
        )
    return Verdict(Outcome.INPUT_REQUIRED, result_type=result_type)


def _shape_note(
    fault: ShapeFault, result: dict[str, Any], version: str | None, tool: bool
) -> Note | None:
    """The note that says where a result departs from its shape.

    A member of the result itself missing or of the wrong type keeps its short form
    (`result_missing:<member>`; for a tool result, `content` not an array or `isError`
    not a boolean is the outcome's plain meaning: no note); a content block says its
    type; anything deeper says its path (`result_shape:tools/0/inputSchema: missing`).
    """
    path = fault.path
    if len(path) == 1:
        if tool and path[0] in ("content", "isError"):
            return None
        if not tool or fault.reason == "missing":
            return Note(NoteCode.RESULT_MISSING, str(path[0]))
    if tool and len(path) >= 2 and path[0] == "content" and isinstance(path[1], int):
        block = result["content"][path[1]]
        kind = block.get("type") if isinstance(block, dict) else None
        if isinstance(kind, str) and kind in content_block_types(version):
            return Note(NoteCode.MALFORMED_CONTENT_BLOCK, kind)
        return Note(NoteCode.UNKNOWN_CONTENT_BLOCK, str(kind)[:_MAX_BLOCK_TYPE_CHARS])
    return Note(NoteCode.RESULT_SHAPE, fault.detail())


def _is_create_task_result(result: dict[str, Any]) -> bool:
    task = result.get("task")
    return (
        isinstance(task, dict)
        and isinstance(task.get("taskId"), str)
        and isinstance(task.get("status"), str)
    )
