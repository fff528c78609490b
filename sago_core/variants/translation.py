"""Machine-translated variants: the instructions a translator model is sent, and
the cleaning and checks of its answers. Model-free, like ``variants/structural.py``; the
stage that calls the model is ``sago_core/stages/translation.py``.

Two variants come from one translation of a prompt into language xx:

- ``language:mt:xx:100:global``: the translation itself (family ``language``, subtype
  ``mt:xx``: machine-translated, so never pooled with the file's own human translation,
  subtype ``xx``). ``translated_language`` reads the language back from the subtype.
- ``round_trip:xx:100:global``: the translation translated back into English (family
  ``round_trip``, subtype ``xx``, the pivot language). A family of its own, not a subtype
  of ``language``: the prompt is English, so it keeps every English axis (BLEU, BERTScore,
  correctness against the English references, ``lang`` expecting English); and not of
  ``structural``, whose subtypes are the paper's length and mood.

The instruction version is part of every cache key: change the wording, bump it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sago_core.config import TRANSLATION_LANGUAGES
from sago_core.vocabulary import BASE_LANGUAGE, LANGUAGE_FAMILY

INSTRUCTION_VERSION = "translation-v1"
ROUND_TRIP_FAMILY = "round_trip"
MT_PREFIX = "mt:"
TRANSLATION_STRENGTH = 100  # a whole-prompt change, like the parallel language variants
BASE_LANGUAGE_NAME = "English"
_LABEL = re.compile(
    r"^(english|translated|translation|[a-z]+ translation)?\s*(text|version)?\s*:\s*",
    re.IGNORECASE,
)
_QUOTES = "\"'“”«»「」『』„"


@dataclass(frozen=True)
class TranslationTask:
    """One text to translate: from ``source`` into ``target`` (language codes)."""

    source: str
    target: str
    text: str

    @property
    def instruction(self) -> str:
        return translate_instruction(self.text, self.source, self.target)


def language_name(code: str) -> str:
    return BASE_LANGUAGE_NAME if code == BASE_LANGUAGE else TRANSLATION_LANGUAGES[code]


def translate_instruction(text: str, source: str, target: str) -> str:
    return (
        f"Translate the following text from {language_name(source)} into "
        f"{language_name(target)}. Translate it only: do not answer it, explain it or add "
        f"anything. Reply with the {language_name(target)} text only.\n\nText: {text}"
    )


def mt_subtype(code: str) -> str:
    return f"{MT_PREFIX}{code}"


def translated_language(subtype: str) -> str:
    """The language a ``language`` variant is asked in: ``mt:de`` -> ``de``, ``de`` -> ``de``."""
    return subtype.removeprefix(MT_PREFIX)


def translated_variant_id(code: str) -> str:
    return f"{LANGUAGE_FAMILY}:{mt_subtype(code)}:{TRANSLATION_STRENGTH}:global"


def round_trip_variant_id(code: str) -> str:
    return f"{ROUND_TRIP_FAMILY}:{code}:{TRANSLATION_STRENGTH}:global"


def clean_translation(raw: str, source_text: str) -> str:
    """The translation without a leading label or wrapping quotes; the first non-empty line
    only when the text translated was one line (a small model goes on talking)."""
    text = raw.strip()
    if "\n" not in source_text.strip():
        text = next((line.strip() for line in text.splitlines() if line.strip()), "")
    text = _LABEL.sub("", text, count=1).strip()
    if len(text) > 1 and text[0] in _QUOTES and text[-1] in _QUOTES:
        text = text[1:-1].strip()
    return text


def check_translation(source_text: str, translation: str) -> str | None:
    """Why a translation is unusable before any meaning check, or None."""
    if not translation:
        return "translator returned no text"
    if translation.strip() == source_text.strip():
        return "translator returned the text unchanged"
    return None


__all__ = [
    "INSTRUCTION_VERSION",
    "MT_PREFIX",
    "ROUND_TRIP_FAMILY",
    "TRANSLATION_STRENGTH",
    "TranslationTask",
    "check_translation",
    "clean_translation",
    "language_name",
    "mt_subtype",
    "round_trip_variant_id",
    "translate_instruction",
    "translated_language",
    "translated_variant_id",
]
