"""Which answer each request of a POST gets, and the verdict on it: pure functions.

The rules are one for every carrier (a JSON body, an SSE event, a GET stream), so the
carrier never changes a verdict: where batches do not exist (every version but
2025-03-26) an array answers no request, whatever it holds; where they do, each answer
finds its request by id, and an error without an id answers every request no answer
named (JSON-RPC 2.0 §6: a batch the server cannot take as a whole gets one error
object, id null).
"""

from __future__ import annotations

from typing import Any

from .classify import Verdict, classify_answer
from .exchanges import Exchange, PendingRequest
from .jsonrpc import NOT_JSON, id_key, is_response
from .streams import Carrier, is_unnamed_error
from .versions import batch_allowed


def pair_body(x: Exchange, answer: object) -> list[tuple[PendingRequest, object]]:
    """The answer each request of `x` without a verdict gets from a whole JSON body."""
    if isinstance(answer, list) and not batch_allowed(x.protocol_version):
        return unsettled(x, answer)  # INVALID_ENVELOPE, `batch_answer:<version>`
    if len(x.requests) == 1 and not isinstance(answer, list):
        return [(x.requests[0], answer)]
    pairs: list[tuple[PendingRequest, object]] = []
    named: set[int] = set()
    unnamed: dict[str, Any] | None = None
    for msg in answer if isinstance(answer, list) else [answer]:
        if not is_response(msg) or not isinstance(msg, dict):
            continue
        asked = x.by_id.get(id_key(msg.get("id")))
        if asked is not None and asked.verdict is None and id(asked) not in named:
            named.add(id(asked))
            pairs.append((asked, msg))
        elif unnamed is None and is_unnamed_error(msg):
            unnamed = msg
    rest = unnamed or (answer if answer is NOT_JSON else None)
    return pairs + [(p, rest) for p in x.requests if p.verdict is None and id(p) not in named]


def unsettled(x: Exchange, answer: object) -> list[tuple[PendingRequest, object]]:
    """`answer` for every request of `x` still without a verdict."""
    return [(p, answer) for p in x.requests if p.verdict is None]


def judge(x: Exchange, p: PendingRequest, answer: object) -> Verdict:
    """The verdict on `answer` to `p`, by the rules of the exchange's version."""
    return classify_answer(p.method, p.rpc_id, answer, version=x.protocol_version, task=p.task)


def judge_carried(x: Exchange, p: PendingRequest, msg: dict[str, Any], c: Carrier) -> Verdict:
    """Where batches do not exist (`x`'s version), an answer that came in an array is
    judged as the array: the client could not read it (`batch_answer`)."""
    if c.batch is not None and not batch_allowed(x.protocol_version):
        return judge(x, p, c.batch)
    return judge(x, p, msg)


def readable(x: Exchange, c: Carrier) -> bool:
    """Does a client read an answer to a request of `x` carried so (`sse.final`)?"""
    return c.hidden is None and (c.batch is None or batch_allowed(x.protocol_version))
