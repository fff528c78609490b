"""The script family's surface transforms: the same words typed in other characters.

Each takes the share ``percent`` of the eligible characters in the position's region (the
noise module's halves) and changes exactly round(eligible x percent / 100) of them, chosen
by the variant's seeded generator, like ``capitalize_share``:

- ``to_fullwidth``: printable ASCII -> its full-width form (what an East Asian IME types);
- ``to_homoglyphs``: a Latin letter -> a Cyrillic or Greek letter that looks the same;
- ``add_diacritics``: an ASCII letter -> one of its accented forms (é, ü, ñ, ...);
- ``strip_diacritics``: an accented Latin letter -> its base letter (what a user without
  the right keyboard types).

Every mapping is read from a library's table (``unicodedata``, the Unicode confusables
data that ``confusable_homoglyphs`` ships), never written out here. Spaces are never
touched, so words are never split or joined.
"""

from __future__ import annotations

import random
import string
import unicodedata
from functools import cache

from sago_core.config import Position
from sago_core.variants.noise import region

# Unicode's Halfwidth and Fullwidth Forms block: U+FF01..U+FF5E are ASCII 0x21..0x7E.
_FULLWIDTH_BLOCK = range(0xFF01, 0xFF5F)
# Latin-1 Supplement and Latin Extended-A: the accented letters of Europe's orthographies
# (ISO 8859-1/-2/-3/-4/-9/-10/-13/-15). Later blocks hold phonetic and rarer letters.
_ACCENTED_BLOCKS = range(0x00C0, 0x0180)
# Homoglyph scripts, in order of preference: Cyrillic first (the classic homograph).
_HOMOGLYPH_SCRIPTS = ("CYRILLIC", "GREEK")


@cache
def fullwidth_forms() -> dict[str, str]:
    """ASCII character -> full-width form, from each form's compatibility decomposition."""
    forms = (chr(cp) for cp in _FULLWIDTH_BLOCK)
    return {unicodedata.normalize("NFKC", form): form for form in forms}


def _is_letter_of(char: str, script: str) -> bool:
    name = unicodedata.name(char, "")
    return name.startswith((f"{script} SMALL LETTER ", f"{script} CAPITAL LETTER "))


@cache
def homoglyph_map() -> dict[str, str]:
    """Latin letter -> its look-alike letter, per Unicode's confusables (the data file
    ``confusable_homoglyphs`` ships). Only true letters of the Cyrillic and Greek
    alphabets are taken (not symbols or phonetic small capitals); Cyrillic first, then
    the lowest code point, so the map is fixed. Letters without one are left out."""
    from confusable_homoglyphs import confusables

    out: dict[str, str] = {}
    for letter in string.ascii_letters:
        found = confusables.is_confusable(letter, preferred_aliases=[], greedy=True) or []
        glyphs = {h["c"] for entry in found for h in entry["homoglyphs"] if len(h["c"]) == 1}
        for script in _HOMOGLYPH_SCRIPTS:
            letters = sorted(g for g in glyphs if _is_letter_of(g, script))
            if letters:
                out[letter] = letters[0]
                break
    return out


@cache
def accented_forms() -> dict[str, tuple[str, ...]]:
    """ASCII letter -> its precomposed accented forms (one base letter plus one mark)."""
    out: dict[str, list[str]] = {}
    for cp in _ACCENTED_BLOCKS:
        decomposed = unicodedata.normalize("NFD", chr(cp))
        if len(decomposed) == 2 and decomposed[0] in string.ascii_letters:
            out.setdefault(decomposed[0], []).append(chr(cp))
    return {letter: tuple(forms) for letter, forms in out.items()}


def base_letter(char: str) -> str:
    """An accented Latin letter's base letter(s) without marks; other characters as they
    are (Cyrillic й or Japanese が keep their marks: there they spell another letter)."""
    if not unicodedata.name(char, "").startswith("LATIN "):
        return char
    decomposed = unicodedata.normalize("NFD", char)
    bare = "".join(c for c in decomposed if not unicodedata.combining(c))
    return unicodedata.normalize("NFC", bare) if bare and bare != decomposed else char


def _followed_by_mark(text: str, index: int) -> bool:
    return index + 1 < len(text) and unicodedata.combining(text[index + 1]) != 0


def _choose(eligible: list[int], percent: int, rng: random.Random) -> list[int]:
    return sorted(rng.sample(eligible, round(len(eligible) * percent / 100)))


def _replace(text: str, chosen: dict[int, str]) -> str:
    return "".join(chosen.get(i, ch) for i, ch in enumerate(text))


def to_fullwidth(text: str, percent: int, position: Position, rng: random.Random) -> str:
    """Turn round(percent% of the region's printable ASCII characters) full-width."""
    forms = fullwidth_forms()
    start, end = region(text, position)
    eligible = [i for i in range(start, end) if text[i] in forms]
    return _replace(text, {i: forms[text[i]] for i in _choose(eligible, percent, rng)})


def to_homoglyphs(text: str, percent: int, position: Position, rng: random.Random) -> str:
    """Replace round(percent% of the region's Latin letters that have a look-alike)."""
    glyphs = homoglyph_map()
    start, end = region(text, position)
    eligible = [i for i in range(start, end) if text[i] in glyphs]
    return _replace(text, {i: glyphs[text[i]] for i in _choose(eligible, percent, rng)})


def add_diacritics(text: str, percent: int, position: Position, rng: random.Random) -> str:
    """Accent round(percent% of the region's ASCII letters that have accented forms; a
    letter already followed by a combining mark is left alone); each form drawn at random."""
    forms = accented_forms()
    start, end = region(text, position)
    eligible = [i for i in range(start, end) if text[i] in forms and not _followed_by_mark(text, i)]
    chosen = _choose(eligible, percent, rng)
    return _replace(text, {i: rng.choice(forms[text[i]]) for i in chosen})


def strip_diacritics(text: str, percent: int, position: Position, rng: random.Random) -> str:
    """Strip the marks of round(percent% of the region's accented Latin letters)."""
    start, end = region(text, position)
    eligible = [i for i in range(start, end) if base_letter(text[i]) != text[i]]
    return _replace(text, {i: base_letter(text[i]) for i in _choose(eligible, percent, rng)})
