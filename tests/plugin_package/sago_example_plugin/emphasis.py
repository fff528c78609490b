"""The ``emphasis`` family: ``strength`` words of the prompt's region stressed, upper-cased
(``upper``) or between asterisks (``stars``), the words chosen by the variant's seeded rng."""

from __future__ import annotations

import random


def emphasise(text: str, subtype: str, strength: float, position: str, rng: random.Random) -> str:
    words = text.split(" ")
    half = len(words) // 2
    region = {"prefix": range(half), "suffix": range(half, len(words))}.get(
        position, range(len(words))
    )
    candidates = [i for i in region if any(c.isalpha() for c in words[i])]
    for i in rng.sample(candidates, min(int(strength), len(candidates))):
        words[i] = words[i].upper() if subtype == "upper" else f"*{words[i]}*"
    return " ".join(words)
