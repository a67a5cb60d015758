"""What the adapter may tune in the core: caps, the scenario label, privacy switches."""

from __future__ import annotations

from dataclasses import dataclass

from . import limits


@dataclass(slots=True)
class Settings:
    scenario: str | None = None
    raw_session_ids: bool = False
    max_body_bytes: int = limits.MAX_BODY_BYTES
    max_event_bytes: int = limits.MAX_EVENT_BYTES
    max_buffered_bytes: int = limits.MAX_BUFFERED_BYTES
    max_pending: int = limits.MAX_PENDING_EXCHANGES
    max_sessions: int = limits.MAX_SESSIONS
    session_idle_s: float = limits.SESSION_IDLE_S
    max_parked: int = limits.MAX_PARKED
    resume_window_s: float = limits.RESUME_WINDOW_S
    #: Opt-in: keep redacted request and answer messages in the records.
    record_bodies: bool = False
