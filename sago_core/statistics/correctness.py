"""Answer correctness against reference answers, with a documented normalised match.

Normalisation (as in SQuAD's evaluation): lower-case, drop punctuation, drop the articles
a/an/the, collapse whitespace. A response is correct when any normalised reference occurs
in the normalised response as a whole-word sequence. Prompts without references are
unknown (None), never counted as wrong.
"""

from __future__ import annotations

import re
import string
from collections.abc import Sequence

_PUNCTUATION = re.compile(f"[{re.escape(string.punctuation)}]")
_ARTICLES = re.compile(r"\b(a|an|the)\b")


def normalise_answer(text: str) -> str:
    text = _PUNCTUATION.sub(" ", text.lower())
    return " ".join(_ARTICLES.sub(" ", text).split())


def is_correct(response: str | None, references: Sequence[str]) -> bool | None:
    """None (unknown) without references or without an answer (a failed request, or a
    reasoning block that never closed)."""
    targets = [normalise_answer(r) for r in references if normalise_answer(r)]
    if not targets or response is None:
        return None
    padded = f" {normalise_answer(response)} "
    return any(f" {target} " in padded for target in targets)
