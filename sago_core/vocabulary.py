"""sago's shared vocabulary: the six axes and their fixed scales R_X (spec section 4), the
tolerances of the tests, and the ids of the base prompt, its replay and the pooled row.
One home for these words; every other module asks here."""

from __future__ import annotations

AXES: tuple[str, ...] = ("act", "bleu", "bert", "prob", "ent", "mr")
SCALES: dict[str, float] = {
    "act": 2.0,
    "bleu": 100.0,
    "bert": 1.0,
    "prob": 250.0,
    "ent": 10.0,
    "mr": 1.0,
}
EPSILONS: tuple[float, ...] = (0.01, 0.05, 0.10)
MAIN_EPSILON = 0.05
BASE_VARIANT_ID = "base"
POOLED = "__pooled__"
# The base prompt asked again: its deltas are the noise floor, never part of a score.
REPLAY_FAMILY = "replay"
REPLAY_VARIANT_ID = "replay:base:0:global"
# A NaN or inf measurement is missing with this reason, never a number in a score.
NON_FINITE = "non-finite measurement"


def normalise(axis: str, delta: float) -> float:
    """delta / R_axis (zero stays zero)."""
    return delta / SCALES[axis]
