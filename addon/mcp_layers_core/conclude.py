"""Finishing: an exchange's state becomes frozen values, and the books learn from them.

A mixin of `Tracker`. The one place where a finished request updates the retry book
(`RetryBook.finish`) and a finished DELETE the session book, so the order records are
later built in cannot change a verdict: records are built from these values alone.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .classify import Outcome, Verdict, http_error, violation
from .exchanges import Exchange, PendingRequest, StreamState
from .finished import (
    FinishedMessage,
    FinishedRequest,
    FinishedSession,
    FinishedStream,
    Head,
    SseSummary,
)
from .notes import Note
from .record import EndReason
from .records import duration_ms
from .retries import RetryBook, retry_after_ms
from .sessions import Session

if TYPE_CHECKING:
    from .settings import Settings


class Concluding:
    """The finishing half of the tracker."""

    if TYPE_CHECKING:
        _settings: Settings
        retries: RetryBook

        def _take_record_id(self) -> int: ...
        def _stream_verdict(self, x: Exchange, s: StreamState) -> Verdict: ...

    def _head(self, x: Exchange, ts: float) -> Head:
        # Positional: this runs once per record, and keywords cost twice the time.
        return Head(
            x.kind,
            x.started,
            ts,  # ended
            x.server,
            x.session.key,
            x.client,
            x.user_agent,
            x.protocol_version,
            x.post_count,
            x.status,
            x.content_type,
            self._settings.scenario,
            x.injected,
            x.notes.snapshot(),
            x.flow,
            x.header_names,
            x.accept,
        )

    def _conclude_request(
        self, x: Exchange, p: PendingRequest, ts: float, *, answered: bool
    ) -> FinishedRequest:
        verdict = p.verdict if answered and p.verdict is not None else self._unanswered(x, p)
        failed = x.status is not None and not 200 <= x.status < 300
        if failed and verdict.outcome is not Outcome.HTTP_ERROR:
            # The transport decides first: an answer inside an error status is kept only
            # for its JSON-RPC error fields (and why they stand without an id, say).
            verdict = Verdict(
                Outcome.HTTP_ERROR, verdict.error_code, verdict.error_message, note=verdict.note
            )
        elif (
            x.fault is not None
            and x.status is not None  # None: the body broke, the client got no answer
            and not p.via_stream
            and verdict.outcome not in (Outcome.HTTP_ERROR, Outcome.TRANSPORT_VIOLATION)
        ):
            # A stream in a 202's clothes: the client discarded it, whatever it carried.
            verdict = violation(x.fault, verdict)
        retry_after = retry_after_ms(x.retry_after, ts) if failed else None
        statuses = (*p.retry.earlier_statuses, *(() if x.status is None else (x.status,)))
        s = x.stream
        finished = FinishedRequest(  # positional, as in `_head`
            self._head(x, ts),
            p.record_id,
            p.method,
            p.tool,
            p.rpc_id,
            verdict,
            statuses,
            None
            if s is None
            else SseSummary(
                s.events,
                answered,
                s.end or "error",
                p.resumed,
                s.saw_event_id,
                s.retry_ms,
                # When the client had to reconnect for its answer: it came resumed, or
                # never came after this stream ended.
                duration_ms(x.started, s.ended_at) if p.resumed or not answered else None,
            ),
            s is None and p.via_stream and answered,  # answer_on_get_stream
            p.retry,
            retry_after,
            p.safety,
            p.previous_session,
            (p.message, p.answer) if self._settings.record_bodies else None,
            p.prompt,
        )
        if p.attempt is not None:
            self.retries.finish(p.attempt, ts, verdict.outcome, list(statuses), retry_after)
        return finished

    def _unanswered(self, x: Exchange, p: PendingRequest) -> Verdict:
        if x.status is None:
            return Verdict(Outcome.NO_RESPONSE)
        if not 200 <= x.status < 300:
            return p.verdict or http_error(None)
        if x.stream is not None:
            return self._stream_verdict(x, x.stream)
        if p.via_stream:  # parked, and the answer never came
            return Verdict(Outcome.STREAM_INCOMPLETE)
        # Headers arrived and the exchange ended without a body event (shutdown).
        return Verdict(Outcome.NO_RESPONSE)

    def _conclude_message(self, x: Exchange, ts: float) -> FinishedMessage:
        assert x.record_id is not None
        return FinishedMessage(self._head(x, ts), x.record_id, x.method, x.answered, x.had_body)

    def _conclude_stream(self, x: Exchange, ts: float) -> FinishedStream:
        s = x.stream
        resumed = "last-event-id" in x.header_names
        return FinishedStream(
            self._head(x, ts),
            self._take_record_id(),
            None
            if s is None
            else SseSummary(
                s.events, s.answers > 0, s.end or "error", resumed, s.saw_event_id, s.retry_ms
            ),
        )

    def _conclude_delete(self, x: Exchange, ts: float) -> FinishedSession:
        # An unanswered DELETE (the client exits while it is in flight) still ends the
        # session for the client: it will not come back, so no `shutdown` end follows.
        # A DELETE that ends nothing (refused, or the lifeline already ended by a 404,
        # idleness or eviction) is still recorded, with no `endReason`: every session has
        # exactly one `session_end` that names a reason.
        accepted = x.status is None or 200 <= x.status < 300
        already = x.session.ended
        notes = x.notes.snapshot()
        if x.status is None:
            notes += (Note("delete_unanswered"),)
        elif not accepted:
            notes += (Note("not_ended", x.status),)
        if already is not None:
            notes += (Note("already_ended", already),)
        elif accepted:
            x.session.ended = EndReason.DELETE
        reason = EndReason.DELETE if accepted and already is None else None
        return self._conclude_session(x.session, x.status, x.started, ts, x, notes, reason)

    def _conclude_session(
        self,
        session: Session,
        status: int | None,
        start: float,
        ts: float,
        x: Exchange | None,
        delete_notes: tuple[Note, ...] | None = None,
        end_reason: str | None = None,
    ) -> FinishedSession:
        """The `session_end` of `session` (a DELETE's: `delete_notes` and `end_reason`)."""
        return FinishedSession(
            record_id=self._take_record_id(),
            started=start,
            ended=ts,
            server=x.server if x else session.server,
            session=session.key,
            client=session.client,
            user_agent=x.user_agent if x else None,
            # A DELETE's record: the version of its own request (its header), as for a POST.
            protocol_version=x.protocol_version
            if x is not None and x.kind == "session_end"
            else session.protocol_version,
            posts=session.posts,
            status=status,
            scenario=self._settings.scenario,
            injected=x.injected if x else None,
            end_reason=end_reason if delete_notes is not None else session.ended,
            stats=session.stats(),
            delete_notes=delete_notes,
            flow=x.flow if x else None,
            header_names=x.header_names if x and x.kind == "session_end" else (),
            accept=x.accept if x and x.kind == "session_end" else (),
        )
