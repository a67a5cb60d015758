"""What waits beyond its own flow: parked requests, unclaimed answers, held records,
and server requests awaiting the client's answer. Each is bounded, oldest out first.

Keys are (session key, `id_key(rpc id)`); held records wait per client (address, user
agent). Each entry carries its own phase (`lifecycle.py`), moved by the table when it
leaves, so an entry that leaves twice, or for a cause its phase does not allow, raises.
This module only keeps and hands back; the tracker decides what a departure means.
"""

from __future__ import annotations

from collections import Counter, OrderedDict
from dataclasses import dataclass, field
from typing import Any

from .exchanges import Parked
from .finished import Finished
from .lifecycle import Cause, Phase, Trigger, step
from .settings import Settings
from .streams import Carrier

Key = tuple[str, tuple[str, object]]
Agent = tuple[str, str | None]


@dataclass(slots=True)
class Unclaimed:
    """An answer a GET stream carried before its request was parked (the POST's `202`
    comes later): the message, how it travelled, and when it was seen."""

    msg: dict[str, Any]
    carrier: Carrier
    seen: float
    phase: Phase = Phase.UNCLAIMED


@dataclass(slots=True)
class Held:
    """A rejected probe's records, until its client's next POST says what they were."""

    finished: list[Finished] = field(default_factory=list)
    phase: Phase = Phase.HELD


def _leave(entry: Parked | Unclaimed | Held, why: Trigger) -> None:
    entry.phase = step(entry.phase, why)


class WaitingRoom:
    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.parked: OrderedDict[Key, Parked] = OrderedDict()
        self.unclaimed: OrderedDict[Key, Unclaimed] = OrderedDict()
        self.held: dict[Agent, Held] = {}
        self.server_requests: OrderedDict[Key, tuple[str, float]] = OrderedDict()

    def phases(self) -> Counter[Phase]:
        """How many entries wait in each phase."""
        counts = Counter(e.phase for e in self.parked.values())
        counts.update(e.phase for e in self.unclaimed.values())
        counts.update(e.phase for e in self.held.values())
        return counts

    # -- parked requests and unclaimed answers -----------------------------------------

    def park(self, key: Key, parked: Parked) -> tuple[Unclaimed | None, Parked | None]:
        """Park a request: (its answer if it came already, the oldest parked if the cap
        evicted it)."""
        early = self.unclaimed.pop(key, None)
        if early is not None:
            _leave(early, Cause.CLAIMED)
            return early, None
        self.parked[key] = parked
        if len(self.parked) > self.settings.max_parked:
            _, oldest = self.parked.popitem(last=False)
            _leave(oldest, Cause.EVICTED)
            return None, oldest
        return None, None

    def claim(self, key: Key) -> Parked | None:
        """The request parked for this answer, if any (it leaves the room)."""
        parked = self.parked.pop(key, None)
        if parked is not None:
            _leave(parked, Cause.ANSWERED)
        return parked

    def has_unclaimed(self, key: Key) -> bool:
        return key in self.unclaimed

    def keep_unclaimed(self, key: Key, answer: Unclaimed) -> None:
        """An answer on a GET stream no parked request wants yet: its POST may be late."""
        self.unclaimed[key] = answer
        if len(self.unclaimed) > self.settings.max_parked:
            _leave(self.unclaimed.popitem(last=False)[1], Cause.EVICTED)

    def expire(self, now: float) -> list[Parked]:
        """Drop what waited past `resume_window_s`; return the parked requests that did."""
        window = self.settings.resume_window_s
        while self.unclaimed:
            key, oldest_answer = next(iter(self.unclaimed.items()))
            if now - oldest_answer.seen < window:
                break
            del self.unclaimed[key]
            _leave(oldest_answer, Cause.EXPIRED)
        expired: list[Parked] = []
        while self.parked:
            key, oldest = next(iter(self.parked.items()))
            if now - oldest.since < window:
                break
            del self.parked[key]
            _leave(oldest, Cause.EXPIRED)
            expired.append(oldest)
        return expired

    def stream_gone(self, session: str) -> list[Parked]:
        """The GET stream that was to carry 2024-11-05 answers of `session` ended."""
        gone = [k for k, p in self.parked.items() if k[0] == session and not p.resumable]
        left = [self.parked.pop(key) for key in gone]
        for parked in left:
            _leave(parked, Cause.STREAM_GONE)
        return left

    def drain(self, why: Trigger) -> list[Parked]:
        """The proxy stops: every parked request leaves, oldest first."""
        parked, self.parked = list(self.parked.values()), OrderedDict()
        for entry in parked:
            _leave(entry, why)
        return parked

    def drop_unclaimed(self, why: Trigger) -> None:
        """The proxy stopped: no request is left to claim these answers."""
        for answer in self.unclaimed.values():
            _leave(answer, why)
        self.unclaimed.clear()

    # -- held records -------------------------------------------------------------------

    def hold(self, agent: Agent, finished: list[Finished]) -> Agent | None:
        """Hold a rejected probe's records; past the cap, name the client to release."""
        held = self.held.get(agent)
        if held is None:
            held = self.held[agent] = Held()
        held.finished.extend(finished)
        if len(self.held) > self.settings.max_sessions:
            return next(iter(self.held))
        return None

    def release(self, agent: Agent, why: Trigger) -> list[Finished]:
        held = self.held.pop(agent, None)
        if held is None:
            return []
        _leave(held, why)
        return held.finished

    # -- server-to-client requests ------------------------------------------------------

    def asked(self, key: Key, method: str, ts: float) -> None:
        self.server_requests[key] = (method, ts)
        if len(self.server_requests) > self.settings.max_parked:
            self.server_requests.popitem(last=False)

    def answered(self, key: Key) -> tuple[str, float] | None:
        return self.server_requests.pop(key, None)
