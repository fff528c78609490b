"""Graded mirroring: how much of the variant's surface form the answer copies, in [0, 1].

The binary MR axis (axes/mirroring.py, the method's M) stays as it is; this is a continuous
companion reported as ``mr_intensity`` in instances.parquet. Per family (documented choices):

- Noise: the share of the inserted noise the answer reproduces. Inserted = the variant
  prompt's count minus the base prompt's (extra spaces beyond single ones, marks from the
  noise set, upper-case letters); reproduced = the variant answer's count minus the base
  answer's, floored at 0; intensity = min(1, reproduced / inserted).
- Register: the marker surplus of the answer over the base answer, against the surplus the
  variant prompt has over the base prompt (at least 1). Politer variants count politeness
  markers; ruder ones count bluntness markers plus politeness markers dropped.
  intensity = min(1, surplus_answer / max(1, surplus_prompt)).
- Length: how far the answer's length moved towards the target, in log space:
  r = words(answer) / words(base answer), intensity = clip(log r / log m, 0, 1) (0 = no
  change or a change the other way, 1 = reached or passed m x the base answer's length).
- Mood: binary, as M: 1 when the answer takes the variant's mood and the base answer does
  not, else 0.
- Replay: 0 by construction (an unchanged prompt has nothing to copy).

A missing answer, or a variant whose prompt carries none of the counted property (nothing
inserted), is missing with a reason, never 0.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from sago_core.axes.mirroring import (
    BLUNTNESS_MARKERS,
    POLITENESS_MARKERS,
    extra_spaces,
    in_mood,
    marker_count,
    noise_marks,
    upper_letters,
)
from sago_core.vocabulary import REPLAY_FAMILY

NOISE_COUNTS: dict[str, Callable[[str], int]] = {
    "spacing": extra_spaces,
    "punctuation": noise_marks,
    "capitalization": upper_letters,
}
NO_ANSWER = "no answer to compare (failed or unfinished generation)"
NOTHING_INSERTED = "the variant prompt carries none of the counted noise"


@dataclass(frozen=True)
class Intensity:
    value: float | None
    missing_reason: str | None = None


def _share(reproduced: float, inserted: float) -> float:
    return min(1.0, max(0.0, reproduced) / inserted)


def noise_intensity(
    subtype: str, answer: str, base_answer: str, variant_prompt: str, base_prompt: str
) -> Intensity:
    count = NOISE_COUNTS.get(subtype)
    if count is None:
        return Intensity(None, f"no intensity measure for noise/{subtype}")
    inserted = count(variant_prompt) - count(base_prompt)
    if inserted <= 0:
        return Intensity(None, NOTHING_INSERTED)
    return Intensity(_share(count(answer) - count(base_answer), inserted))


def _register_surplus(strength: float, text: str, base: str) -> int:
    polite = marker_count(text, POLITENESS_MARKERS) - marker_count(base, POLITENESS_MARKERS)
    if strength > 0:
        return polite
    blunt = marker_count(text, BLUNTNESS_MARKERS) - marker_count(base, BLUNTNESS_MARKERS)
    return max(0, blunt) + max(0, -polite)


def register_intensity(
    strength: float, answer: str, base_answer: str, variant_prompt: str, base_prompt: str
) -> Intensity:
    inserted = max(1, _register_surplus(strength, variant_prompt, base_prompt))
    return Intensity(_share(_register_surplus(strength, answer, base_answer), inserted))


def length_intensity(multiplier: float, answer: str, base_answer: str) -> Intensity:
    if multiplier <= 0 or multiplier == 1:
        return Intensity(None, f"length target x{multiplier} asks for no change")
    words, base_words = len(answer.split()), len(base_answer.split())
    if words == 0 or base_words == 0:
        return Intensity(None, "an empty answer has no length ratio")
    moved = math.log(words / base_words) / math.log(multiplier)
    return Intensity(min(1.0, max(0.0, moved)))


def mood_intensity(answer: str, base_answer: str, variant_prompt: str) -> Intensity:
    question = variant_prompt.rstrip().endswith("?")
    return Intensity(float(max(0, in_mood(answer, question) - in_mood(base_answer, question))))


def mirroring_intensity(
    family: str,
    subtype: str,
    strength: float,
    answer: str | None,
    base_answer: str | None,
    variant_prompt: str,
    base_prompt: str,
) -> Intensity:
    """The graded mirroring of one variant's answer, or a reason why there is none."""
    if family == REPLAY_FAMILY:
        return Intensity(0.0)
    if answer is None or base_answer is None:
        return Intensity(None, NO_ANSWER)
    if family == "noise":
        return noise_intensity(subtype, answer, base_answer, variant_prompt, base_prompt)
    if family == "register":
        return register_intensity(strength, answer, base_answer, variant_prompt, base_prompt)
    if family == "structural" and subtype == "length":
        return length_intensity(strength, answer, base_answer)
    if family == "structural" and subtype == "mood":
        return mood_intensity(answer, base_answer, variant_prompt)
    return Intensity(None, f"no intensity measure for {family}/{subtype}")
