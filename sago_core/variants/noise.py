"""Surface noise that preserves meaning by construction: extra spaces, marks, upper-casing.

Positions: PREFIX acts on the first half of the prompt's characters, SUFFIX on the second half,
GLOBAL on all of it (the method sets the halves for capitalisation; we use the same split for
every noise subtype so one position means one thing). Insertions go into gaps between words
inside the region (or its edge when the region holds no gap), so words are never split.
"""

from __future__ import annotations

import random

from sago_core.config import Position

PUNCTUATION_MARKS: tuple[str, ...] = (".", ",", "!", "'", "(", ")", "[", "]", ";", ":", "-")


def region(text: str, position: Position) -> tuple[int, int]:
    """[start, end) character span a position acts on."""
    middle = len(text) // 2
    if position == "prefix":
        return 0, middle
    if position == "suffix":
        return middle, len(text)
    return 0, len(text)


def _gaps(text: str, start: int, end: int, position: Position) -> list[int]:
    """Insertion offsets at word ends (a space that follows a non-space) inside [start, end)."""
    gaps = [i for i in range(max(start, 1), end) if text[i] == " " and text[i - 1] != " "]
    if gaps:
        return gaps
    # No word boundary in the region (a one-word half): use the region's outer edge.
    return [0] if position == "prefix" else [len(text)]


def _insert(text: str, offsets: list[int], pieces: list[str]) -> str:
    out = text
    for offset, piece in sorted(zip(offsets, pieces, strict=True), reverse=True):
        out = out[:offset] + piece + out[offset:]
    return out


def add_spaces(text: str, count: int, position: Position, rng: random.Random) -> str:
    """Insert exactly ``count`` extra spaces at word boundaries in the region."""
    gaps = _gaps(text, *region(text, position), position)
    offsets = [rng.choice(gaps) for _ in range(count)]
    return _insert(text, offsets, [" "] * count)


def add_punctuation(text: str, count: int, position: Position, rng: random.Random) -> str:
    """Insert exactly ``count`` marks (never '?') right after words in the region."""
    gaps = _gaps(text, *region(text, position), position)
    offsets = [rng.choice(gaps) for _ in range(count)]
    marks = [rng.choice(PUNCTUATION_MARKS) for _ in range(count)]
    return _insert(text, offsets, marks)


def capitalize_share(text: str, percent: int, position: Position, rng: random.Random) -> str:
    """Upper-case round(percent% of the region's letters), chosen at random."""
    start, end = region(text, position)
    letters = [i for i in range(start, end) if text[i].isalpha()]
    chosen = set(rng.sample(letters, round(len(letters) * percent / 100)))
    return "".join(ch.upper() if i in chosen else ch for i, ch in enumerate(text))
