"""Language identification for the ``lang`` axis: does an answer come in the
language its prompt was asked in?

``py3langid`` (a maintained fork of langid.py: a naive Bayes model over byte n-grams, 140
labels, shipped inside the wheel, so nothing is downloaded) names the answer's language.
Codes are compared by their primary subtag (MKQA's ``zh_cn`` and ``zh_tw`` are ``zh``;
``pt-BR`` is ``pt``). Too little text to tell is missing with a reason, never a guess: an
empty answer, one with fewer than ``MIN_LETTERS`` letters (a bare name or number such as
"Paris" or "2017" carries no language; a CJK character, Han, kana or Hangul, counts as
``CJK_WEIGHT`` letters, since one such character carries about as much text as a short
alphabetic word's worth of letters), and one the model calls ``zxx`` (no linguistic
content). Closely related languages (Danish and Norwegian, Malay and Indonesian) are the
model's weak spot: on short answers, read a mismatch between them with care.
"""

from __future__ import annotations

import unicodedata
from dataclasses import dataclass

from sago_core.variants.rewrite_checks import language_identifier

MIN_LETTERS = 8
CJK_WEIGHT = 3  # letters one Han, Hiragana, Katakana or Hangul character counts as
_CJK_SCRIPTS = ("CJK", "HIRAGANA", "KATAKANA", "HANGUL")
NO_LANGUAGE = "zxx"
# Members of an ISO 639-3 macrolanguage, mapped to it: the labels py3langid emits for
# varieties of a written standard a prompt is tagged with (Wu and Cantonese -> Chinese,
# Egyptian and Moroccan Arabic -> Arabic, Nynorsk -> Norwegian, Southern Uzbek -> Uzbek,
# Southern Kurdish -> Kurdish), and Bokmal, a prompt's usual Norwegian tag. Eight entries:
# a language-tag library would add a dependency for them.
MACROLANGUAGE = {
    "wuu": "zh",
    "yue": "zh",
    "arz": "ar",
    "ary": "ar",
    "nn": "no",
    "nb": "no",
    "uzs": "uz",
    "sdh": "ku",
}


@dataclass(frozen=True)
class LanguageMatch:
    """The answer's language and whether it is the prompt's (1) or not (0); both None
    with a reason when the answer cannot be told."""

    detected: str | None
    matches: int | None
    confidence: float | None = None  # py3langid's normalised probability of ``detected``
    reason: str | None = None


def primary_code(code: str) -> str:
    """``zh_cn`` -> ``zh``, ``pt-BR`` -> ``pt``, ``yue`` -> ``zh`` (its macrolanguage)."""
    primary = code.strip().lower().replace("-", "_").split("_")[0]
    return MACROLANGUAGE.get(primary, primary)


def _letter_weight(ch: str) -> int:
    return CJK_WEIGHT if unicodedata.name(ch, "?").startswith(_CJK_SCRIPTS) else 1


def identify_language(
    answer: str | None, prompt_language: str, *, min_letters: int = MIN_LETTERS
) -> LanguageMatch:
    """The answer's language and whether it matches ``prompt_language`` (any code whose
    primary subtag py3langid uses: ``de``, ``ja``, ``zh_cn``, ``pt-BR``, ...)."""
    if answer is None or not answer.strip():
        return LanguageMatch(None, None, reason="empty answer: no language to identify")
    letters = sum(_letter_weight(ch) for ch in answer if ch.isalpha())
    if letters < min_letters:
        return LanguageMatch(
            None,
            None,
            reason=f"answer too short to identify its language ({letters} letters, fewer "
            f"than {min_letters})",
        )
    label, confidence = language_identifier().classify(answer)
    if label == NO_LANGUAGE:
        return LanguageMatch(
            None, None, reason="no linguistic content in the answer (py3langid: zxx)"
        )
    detected = primary_code(str(label))
    matches = int(detected == primary_code(prompt_language))
    return LanguageMatch(detected, matches, round(float(confidence), 6))
