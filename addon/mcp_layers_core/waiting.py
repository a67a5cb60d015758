"""What waits beyond its own flow: parked requests, unclaimed answers, held records,
and server requests awaiting the client's answer. Each is bounded, oldest out first.

Keys are (session key, `id_key(rpc id)`); held records wait per client (address, user
agent). This module only keeps and hands back; the tracker decides what a departure
means (`lifecycle.py` names every move, and `step` checks it).
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from .exchanges import Parked
from .finished import Finished
from .lifecycle import Cause, Phase, step
from .settings import Settings

Key = tuple[str, tuple[str, object]]
Agent = tuple[str, str | None]


class WaitingRoom:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.parked: OrderedDict[Key, Parked] = OrderedDict()
        self.unclaimed: OrderedDict[Key, tuple[dict[str, Any], float]] = OrderedDict()
        self.held: dict[Agent, list[Finished]] = {}
        self.server_requests: OrderedDict[Key, tuple[str, float]] = OrderedDict()

    # -- parked requests and unclaimed answers -----------------------------------------

    def park(
        self, key: Key, parked: Parked
    ) -> tuple[tuple[dict[str, Any], float] | None, Parked | None]:
        """Park a request: ((its answer, when seen) if it came already, the oldest parked
        if the cap evicted it)."""
        early = self.unclaimed.pop(key, None)
        if early is not None:
            step(Phase.UNCLAIMED, Cause.CLAIMED)
            return early, None
        self.parked[key] = parked
        if len(self.parked) > self.settings.max_parked:
            _, oldest = self.parked.popitem(last=False)
            step(Phase.PARKED, Cause.EVICTED)
            return None, oldest
        return None, None

    def claim(self, key: Key) -> Parked | None:
        """The request parked for this answer, if any (it leaves the room)."""
        parked = self.parked.pop(key, None)
        if parked is not None:
            step(Phase.PARKED, Cause.ANSWERED)
        return parked

    def keep_unclaimed(self, key: Key, msg: dict[str, Any], ts: float) -> None:
        """An answer on a GET stream no parked request wants yet: its POST may be late."""
        self.unclaimed[key] = (msg, ts)
        if len(self.unclaimed) > self.settings.max_parked:
            self.unclaimed.popitem(last=False)
            step(Phase.UNCLAIMED, Cause.EVICTED)

    def expire(self, now: float) -> list[Parked]:
        """Drop what waited past `resume_window_s`; return the parked requests that did."""
        window = self.settings.resume_window_s
        while self.unclaimed:
            key, (_, seen) = next(iter(self.unclaimed.items()))
            if now - seen < window:
                break
            del self.unclaimed[key]
            step(Phase.UNCLAIMED, Cause.EXPIRED)
        expired: list[Parked] = []
        while self.parked:
            key, oldest = next(iter(self.parked.items()))
            if now - oldest.since < window:
                break
            del self.parked[key]
            expired.append(oldest)
            step(Phase.PARKED, Cause.EXPIRED)
        return expired

    def stream_gone(self, session: str) -> list[Parked]:
        """The GET stream that was to carry 2024-11-05 answers of `session` ended."""
        gone = [k for k, p in self.parked.items() if k[0] == session and not p.resumable]
        if gone:
            step(Phase.PARKED, Cause.STREAM_GONE)
        return [self.parked.pop(key) for key in gone]

    def drain_parked(self) -> list[Parked]:
        """The proxy stops: every parked request leaves, oldest first."""
        parked, self.parked = list(self.parked.values()), OrderedDict()
        return parked

    # -- held records -------------------------------------------------------------------

    def hold(self, agent: Agent, finished: list[Finished]) -> Agent | None:
        """Hold a rejected probe's records; past the cap, name the client to release."""
        self.held.setdefault(agent, []).extend(finished)
        if len(self.held) > self.settings.max_sessions:
            return next(iter(self.held))
        return None

    def release(self, agent: Agent, why: Cause | type) -> list[Finished]:
        held = self.held.pop(agent, [])
        if held:
            step(Phase.HELD, why)
        return held

    # -- server-to-client requests ------------------------------------------------------

    def asked(self, key: Key, method: str, ts: float) -> None:
        self.server_requests[key] = (method, ts)
        if len(self.server_requests) > self.settings.max_parked:
            self.server_requests.popitem(last=False)

    def answered(self, key: Key) -> tuple[str, float] | None:
        return self.server_requests.pop(key, None)
