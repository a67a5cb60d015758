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
from .record import LAYER_OF, SUCCESSFUL, Layer, Outcome

__all__ = [
    "KNOWN_RESULT_TYPES",
    "LAYER_OF",
    "SUCCESSFUL",
    "Layer",
    "Outcome",
    "Verdict",
    "classify_answer",
    "classify_body",
    "http_error",
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
    note: str | None = None

    @property
    def layer(self) -> Layer:
        return LAYER_OF[self.outcome]


def http_error(body: bytes | None) -> Verdict:
    """A non-2xx status. The body cannot change the verdict, but a JSON-RPC error in it
    (a 400 with -32022 during version negotiation, say) is worth keeping."""
    code, message = _error_fields(try_loads(body) if body else NOT_JSON)
    return Verdict(Outcome.HTTP_ERROR, error_code=code, error_message=message)


def classify_answer(method: str, request_id: object, answer: Any) -> Verdict:
    """Judge the decoded answer (`NOT_JSON` if it did not decode) to one request."""
    if answer is NOT_JSON:
        return Verdict(Outcome.MALFORMED_JSON)
    if not isinstance(answer, dict) or answer.get("jsonrpc") != "2.0":
        return Verdict(Outcome.INVALID_ENVELOPE)
    has_result, has_error = "result" in answer, "error" in answer
    if has_result == has_error:
        return Verdict(Outcome.INVALID_ENVELOPE, note="result_and_error" if has_result else None)
    if has_error:
        return _error_verdict(request_id, answer)
    if "id" not in answer or not same_id(answer["id"], request_id):
        return Verdict(Outcome.INVALID_ENVELOPE)
    return _result_verdict(method, answer["result"])


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
        return Verdict(Outcome.JSONRPC_ERROR, code, message, note="error_without_id")
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


def _result_verdict(method: str, result: object) -> Verdict:
    if not isinstance(result, dict):
        bad = Outcome.INVALID_TOOL_RESULT if method == "tools/call" else Outcome.INVALID_RESULT
        return Verdict(bad)
    raw_type = result.get("resultType", "complete")
    result_type = raw_type if isinstance(raw_type, str) else None
    if result_type == "input_required":
        return Verdict(Outcome.INPUT_REQUIRED, result_type=result_type)
    if method != "tools/call":
        return Verdict(Outcome.SUCCESS, result_type=result_type)
    is_error = result.get("isError", False)
    if (
        result_type not in KNOWN_RESULT_TYPES
        or not isinstance(result.get("content"), list)
        or not isinstance(is_error, bool)
    ):
        return Verdict(
            Outcome.INVALID_TOOL_RESULT,
            result_type=result_type,
            is_error=is_error if isinstance(is_error, bool) else None,
        )
    outcome = Outcome.TOOL_ERROR if is_error else Outcome.TOOL_SUCCESS
    return Verdict(outcome, result_type=result_type, is_error=is_error)
