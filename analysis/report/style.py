"""How an outcome is drawn: its CSS class and the words that go with the colour.

Derived from the record's vocabularies: a successful outcome, an input-required turn, or a
failure at the layer `LAYER_OF` gives it. Adding an outcome or a layer to the record needs
no edit here (a new layer's colour falls back to grey until `report.css` names it).
"""

from __future__ import annotations

from typing import Final

from mcp_layers_core.record import LAYER_OF, NOT_FAILED, SUCCESSFUL, Layer, Outcome

OK: Final = "o-ok"
TURN: Final = "o-turn"
UNKNOWN: Final = "o-unknown"

#: Layers some failed outcome belongs to, in the record's order.
FAILURE_LAYERS: Final = tuple(
    layer for layer in Layer if any(LAYER_OF[o] is layer for o in Outcome if o not in NOT_FAILED)
)


def failure_class(layer: str) -> str:
    return f"o-{layer}"


def outcome_class(outcome: str | None) -> str:
    """The class of a request's outcome (an unknown or missing outcome: grey)."""
    try:
        o = Outcome(outcome or "")
    except ValueError:
        return UNKNOWN
    if o in SUCCESSFUL:
        return OK
    if o not in NOT_FAILED:
        return failure_class(LAYER_OF[o].value)
    return TURN


def outcome_words(outcome: str | None) -> str:
    """What the colour of an outcome says, in words."""
    cls = outcome_class(outcome)
    if cls == OK:
        return "succeeded"
    if cls == TURN:
        return "input required (a turn)"
    if cls == UNKNOWN:
        return "no outcome"
    return f"failed at {cls.removeprefix('o-')}"


#: The legend: (class, words), successes, turns, then failures layer by layer.
LEGEND: Final = (
    (OK, "succeeded"),
    (TURN, "input required (a turn, no failure)"),
    *((failure_class(layer.value), f"failed at {layer.value}") for layer in FAILURE_LAYERS),
)
