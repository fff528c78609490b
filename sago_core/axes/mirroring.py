"""Response mirroring: does the response copy the variant prompt's surface form?

M(y, v) is 1 when response y shows the variant's property clearly more than the base
response y_base does, else 0; the MR delta is M(y^v, v) - M(y_base, v). The base response
compared with itself shows no increase, so M(y_base, v) = 0 for the noise and register
detectors; for length it is evaluated honestly (ratio 1).

Our documented choices (the method fixes the shape of M, not its thresholds):
- Noise: an absolute increase in the noise count AND an increase in its rate per 100
  characters, both thresholds growing with strength:
  spacing (extra spaces beyond single ones): abs >= max(1, ceil(s/10)), rate >= 0.5 x abs;
  punctuation (marks from the noise set): abs >= max(2, ceil(s/4)), rate >= 0.5 x abs;
  capitalization (upper-case letters; s in %): abs >= max(3, ceil(s/10)),
  rate >= max(2, s/10) more upper-case letters per 100 characters.
- Register (offline detector): counts of politeness and bluntness markers (lexicon below).
  Politer (s > 0): mirroring when politeness markers increase by >= 1 and their rate per
  100 words increases. Ruder (s < 0): mirroring when bluntness markers increase by >= 1, or
  politeness markers drop by >= 1 while the response shrinks below 75% of the base words.
- Length: |y^v| / |y| in words within m x (1 +- 0.25).
- Mood: M(y, v) = 1 when the response's first sentence has the variant prompt's mood: a
  question (ends with '?') for a question variant; an imperative (its first word is a
  command verb from the list below) for an imperative variant. M(y_base, v) applies the
  same test to the base response, so a model that always answers in one mood scores 0.
- Replay (the noise floor's row: the base prompt asked again unchanged): the prompt has no
  surface form beyond the base's own, so there is nothing to mirror. M(y_replay, v) =
  M(y_base, v) = 0 by construction and the MR floor is exactly 0, whatever the replay's
  answer; this is a measurement (MR cannot vary on an unchanged prompt), not a gap, so a run
  testing against the floor can mark MR.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

import polars as pl

from sago_core.variants.noise import PUNCTUATION_MARKS
from sago_core.vocabulary import REPLAY_FAMILY

POLITENESS_MARKERS = (
    "please",
    "thank you",
    "thanks",
    "appreciate",
    "grateful",
    "kindly",
    "happy to help",
    "glad to help",
    "my pleasure",
    "i hope this helps",
    "hope this helps",
    "you're welcome",
    "great question",
    "wonderful",
    "delighted",
    "i apologize",
    "sorry",
    "have a lovely day",
    "have a wonderful day",
)
BLUNTNESS_MARKERS = (
    "obviously",
    "whatever",
    "just ",
    "simply",
    "no excuses",
    "i'm busy",
    "don't waste",
    "duh",
    "seriously",
    "for crying out loud",
    "get it right",
    "stop ",
)


COMMAND_VERBS = frozenset(
    [
        "list",
        "name",
        "tell",
        "give",
        "explain",
        "describe",
        "state",
        "identify",
        "provide",
        "write",
        "find",
        "consider",
        "note",
        "remember",
        "imagine",
        "let",
        "try",
        "use",
        "make",
        "take",
        "check",
        "see",
        "look",
        "think",
        "answer",
        "define",
        "compare",
        "calculate",
        "convert",
        "count",
        "choose",
        "pick",
        "read",
        "add",
        "start",
        "keep",
        "avoid",
        "follow",
        "ask",
    ]
)


@dataclass(frozen=True)
class Mirroring:
    m_variant: int | None
    m_base: int | None
    missing_reason: str | None = None


def _per_100(count: int, length: int) -> float:
    return 100.0 * count / max(length, 1)


def extra_spaces(text: str) -> int:
    return sum(len(run) - 1 for run in re.findall(r" {2,}", text))


def noise_marks(text: str) -> int:
    return sum(text.count(mark) for mark in PUNCTUATION_MARKS)


def upper_letters(text: str) -> int:
    return sum(1 for ch in text if ch.isupper())


def _noise_increase(
    response: str, base: str, count: int, base_count: int, abs_min: float, rate_min: float
) -> int:
    grew = count - base_count >= abs_min
    rate_grew = _per_100(count, len(response)) - _per_100(base_count, len(base)) >= rate_min
    return int(grew and rate_grew)


def noise_mirroring(subtype: str, strength: float, response: str, base: str) -> int:
    if subtype == "spacing":
        abs_min = max(1, math.ceil(strength / 10))
        return _noise_increase(
            response, base, extra_spaces(response), extra_spaces(base), abs_min, 0.5 * abs_min
        )
    if subtype == "punctuation":
        abs_min = max(2, math.ceil(strength / 4))
        return _noise_increase(
            response, base, noise_marks(response), noise_marks(base), abs_min, 0.5 * abs_min
        )
    if subtype == "capitalization":
        return _noise_increase(
            response,
            base,
            upper_letters(response),
            upper_letters(base),
            max(3, math.ceil(strength / 10)),
            max(2.0, strength / 10),
        )
    raise ValueError(f"unknown noise subtype {subtype!r}")


def marker_count(text: str, markers: tuple[str, ...]) -> int:
    lowered = f" {text.lower()} "
    return sum(lowered.count(marker) for marker in markers)


def _words(text: str) -> int:
    return len(text.split())


def register_mirroring(strength: float, response: str, base: str) -> int:
    """Offline register detector: 1 when the response is clearly politer/blunter than base."""
    polite, polite_base = (marker_count(t, POLITENESS_MARKERS) for t in (response, base))
    if strength > 0:
        rate = _per_100(polite, _words(response)) - _per_100(polite_base, _words(base))
        return int(polite - polite_base >= 1 and rate > 0)
    blunt, blunt_base = (marker_count(t, BLUNTNESS_MARKERS) for t in (response, base))
    curt = polite_base - polite >= 1 and _words(response) < 0.75 * _words(base)
    return int(blunt - blunt_base >= 1 or curt)


def length_mirroring(multiplier: float, response: str, base: str) -> int:
    ratio = _words(response) / max(_words(base), 1)
    return int(multiplier * 0.75 <= ratio <= multiplier * 1.25)


def _first_sentence(text: str) -> str:
    match = re.match(r"\s*(.+?[.!?])(\s|$)", text, flags=re.DOTALL)
    return (match.group(1) if match else text).strip()


def in_mood(text: str, question: bool) -> int:
    sentence = _first_sentence(text)
    if question:
        return int(sentence.endswith("?"))
    first = re.sub(r"[^a-z]", "", sentence.split()[0].lower()) if sentence.split() else ""
    return int(first in COMMAND_VERBS)


def detect_mirroring(
    family: str, subtype: str, strength: float, response: str, base: str, variant_prompt: str
) -> Mirroring:
    """M(y^v, v) and M(y_base, v) for one variant, or a reason why no detector applies."""
    if family == REPLAY_FAMILY:
        return Mirroring(0, 0)  # an unchanged prompt: no surface form to mirror
    if family == "noise":
        return Mirroring(noise_mirroring(subtype, strength, response, base), 0)
    if family == "register":
        return Mirroring(register_mirroring(strength, response, base), 0)
    if family == "structural" and subtype == "length":
        return Mirroring(
            length_mirroring(strength, response, base), length_mirroring(strength, base, base)
        )
    if family == "structural" and subtype == "mood":
        question = variant_prompt.rstrip().endswith("?")
        return Mirroring(in_mood(response, question), in_mood(base, question))
    return Mirroring(None, None, f"no mirroring detector for {family}/{subtype}")


def mr_delta_rule() -> tuple[pl.Expr, pl.Expr]:
    """The MR axis (registry/axes.py): M(y^v, v) - M(y_base, v) from the mirroring stage."""
    value = (pl.col("m_variant") - pl.col("m_base")).cast(pl.Float64)
    return value, pl.coalesce(pl.col("reason_mr"), pl.lit("no mirroring verdict"))
