"""The script family's whole-prompt transforms: romanisation and Chinese character sets.

The text's own characters decide which library applies (a prompt carries no language tag):

- kana present: Japanese -> Hepburn romaji (``cutlet`` over MeCab with UniDic-lite; loan
  words are romanised as written, never replaced by their English spelling, which would
  leak the English original back in);
- Han characters, no kana: Chinese -> toneless pinyin (``pypinyin``, which reads
  polyphonic characters from its phrase dictionary);
- a word (two letters in a row) of another script (Arabic, Cyrillic, Greek, Hangul,
  Hebrew, Thai, ...): ``anyascii``'s transliteration;
- Latin only, or Latin with lone letters of other scripts (an English prompt's "2π r",
  "5 µm", "1º"): nothing to romanise.

Each line is romanised on its own, so a prompt keeps its line breaks (a multiple-choice
prompt's "A) ...", "B) ..." lines stay lines).

What is left that is not ASCII after pinyin or romaji (full-width punctuation) goes through
``anyascii`` too, so a romanised prompt is plain ASCII. Simplified <-> Traditional uses
OpenCC's character and phrase tables (``s2t``, ``t2s``) in the direction that changes more
characters. Each result names its method in its subtype, which the variant records.

``unidecode`` and ``pykakasi`` would also fit, but both are GPL; sago is Apache-2.0, so the
ISC ``anyascii`` and the MIT ``cutlet`` stand in for them.
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

_KANA = ("HIRAGANA", "KATAKANA")


@dataclass(frozen=True)
class Rewritten:
    """A whole-prompt transform's text and its subtype, which names the method used."""

    subtype: str
    text: str


def _scripts(text: str) -> set[str]:
    """First word of each letter's Unicode name (LATIN, CJK, HIRAGANA, ARABIC, ...)."""
    return {unicodedata.name(c, "?").split()[0] for c in text if c.isalpha()}


def _ascii(text: str) -> str:
    """ASCII transliteration; runs of spaces within a line collapse, line breaks stay."""
    from anyascii import anyascii

    return "\n".join(" ".join(str(anyascii(line)).split()) for line in text.split("\n"))


def _by_line(romanise: Callable[[str], str], text: str) -> str:
    """``romanise`` applied line by line (the libraries' own output may drop line breaks)."""
    return "\n".join(_ascii(romanise(line)) if line.strip() else "" for line in text.split("\n"))


def _non_latin_word(text: str) -> bool:
    """Two or more non-Latin letters in a row: a word of another script. A lone letter in a
    Latin prompt (an English "2π r", "5 µm", "1º") is a symbol, not a language; code-mixed
    queries (MKQA's "help me help you מתי יצא השיר") still romanise. A script's own vowel
    signs (Khmer, Thai, Devanagari: marks, not letters, to Unicode) count as its letters."""
    run = 0
    for c in text:
        script = unicodedata.name(c, "?").split()[0]
        letter = c.isalpha() or (unicodedata.category(c).startswith("M") and script != "COMBINING")
        run = run + 1 if letter and script != "LATIN" else 0
        if run >= 2:
            return True
    return False


@cache
def _cutlet() -> Any:
    import cutlet

    return cutlet.Cutlet(system="hepburn", use_foreign_spelling=False)


def _pinyin(text: str) -> str:
    from pypinyin import Style, lazy_pinyin

    return " ".join(lazy_pinyin(text, style=Style.NORMAL))


def romanize(text: str) -> Rewritten | None:
    """The prompt in Latin letters, or None when it holds no non-Latin letter (outside
    Chinese and Japanese: no two non-Latin letters in a row)."""
    scripts = _scripts(text)
    if scripts & set(_KANA):
        return Rewritten("romanize_hepburn", _by_line(_cutlet().romaji, text))
    if "CJK" in scripts:
        return Rewritten("romanize_pinyin", _by_line(_pinyin, text))
    if scripts - {"LATIN"} and _non_latin_word(text):
        return Rewritten("romanize_anyascii", _ascii(text))
    return None


@cache
def _opencc(config: str) -> Any:
    import opencc

    return opencc.OpenCC(config)


def _changed(before: str, after: str) -> int:
    """Characters changed (a phrase table may change the length: the difference counts)."""
    differ = sum(a != b for a, b in zip(before, after, strict=False))
    return differ + abs(len(before) - len(after))


def convert_han(text: str) -> Rewritten | None:
    """Simplified -> Traditional or Traditional -> Simplified, whichever changes more
    characters; None for a prompt without Han characters or with kana (Japanese kanji
    are neither set) or when neither direction changes it."""
    scripts = _scripts(text)
    if "CJK" not in scripts or scripts & set(_KANA):
        return None
    to_traditional = _opencc("s2t").convert(text)
    to_simplified = _opencc("t2s").convert(text)
    forward, backward = _changed(text, to_traditional), _changed(text, to_simplified)
    if forward == backward == 0:
        return None
    if forward >= backward:
        return Rewritten("hans_to_hant", to_traditional)
    return Rewritten("hant_to_hans", to_simplified)
