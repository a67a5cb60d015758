"""Notes: what an exchange's record says beyond its fields, kept as values until the end.

A note is a code and maybe a detail (`batch` and 3). The tracker only ever adds notes;
nothing reads them back to decide anything (flags on the exchange do that), and the
record builder renders them to their strings (`batch:3`) in `records.py`.
"""

from __future__ import annotations

from dataclasses import dataclass


class _NoDetail:
    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_DETAIL"


#: A note that is its code alone (`None` is a detail: a server's null id, say).
NO_DETAIL = _NoDetail()


@dataclass(frozen=True, slots=True)
class Note:
    code: str
    detail: object = NO_DETAIL


class NoteLog:
    """The notes of one exchange, in the order they happened."""

    __slots__ = ("_items", "_repeats")

    def __init__(self) -> None:
        self._items: list[Note] = []
        #: code -> (occurrences, index of its `_more` note or -1), for repeatable notes.
        self._repeats: dict[str, tuple[int, int]] | None = None

    def __len__(self) -> int:
        return len(self._items)

    def add(self, code: str, detail: object = NO_DETAIL) -> None:
        self._items.append(Note(code, detail))

    def add_note(self, note: Note) -> None:
        self._items.append(note)

    def add_once(self, code: str, detail: object = NO_DETAIL) -> None:
        """A note an exchange carries at most once, however often its cause recurs."""
        if all(n.code != code for n in self._items):
            self._items.append(Note(code, detail))

    def repeat(self, code: str, detail: object) -> None:
        """A note that every event of a stream may cause (an event over the cap, say).

        The first occurrence is noted with its detail (`sse_event_over_cap:<bytes>`);
        later ones are only counted, in one `<code>_more:<n>` note updated in place, so
        a long stream cannot grow the notes (and the record) without bound.
        """
        repeats = self._repeats if self._repeats is not None else {}
        self._repeats = repeats
        n, at = repeats.get(code, (0, -1))
        if n == 0:
            self._items.append(Note(code, detail))
        elif at < 0:
            at = len(self._items)
            self._items.append(Note(f"{code}_more", n))
        else:
            self._items[at] = Note(f"{code}_more", n)
        repeats[code] = (n + 1, at)

    def snapshot(self) -> tuple[Note, ...]:
        return tuple(self._items)
