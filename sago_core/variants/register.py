"""Social register ladders: politer (+) or ruder (-) wording, cumulative in intensity.

Wording is this project's own. Level k = |strength| / 2 (1..5) uses the first k pieces of its
ladder, so a stronger level always contains every marker of a weaker one. Pieces are whole
sentences with ASCII apostrophes and single spaces, so tokenisation differs only by the
added words. PREFIX puts pieces before the prompt, SUFFIX after it; GLOBAL rewrites the
sentence around the prompt: an aside inside the question after its first word, plus pieces
on both sides (ceil(k/2) before, floor(k/2) after).
"""

from __future__ import annotations

from sago_core.config import Position

POLITE_PREFIX = (
    "Please help me with this.",
    "I would really appreciate it.",
    "Thank you kindly for your time.",
    "I hope you are having a lovely day.",
    "I am truly grateful for your patience and generosity.",
)
POLITE_SUFFIX = (
    "Thank you.",
    "I would be grateful for your answer.",
    "Thanks so much in advance.",
    "Have a wonderful day.",
    "I truly appreciate your kind help and patience.",
)
RUDE_PREFIX = (
    "Just answer this.",
    "Don't waste my time.",
    "I don't care about pleasantries.",
    "Get it right for once.",
    "Honestly, this should be obvious even to you.",
)
RUDE_SUFFIX = (
    "Quickly.",
    "No excuses.",
    "Keep it short, I'm busy.",
    "Don't ramble.",
    "And don't mess it up this time.",
)
POLITE_ASIDE = ", if I may kindly ask,"
RUDE_ASIDE = ", for crying out loud,"


def _level(strength: int) -> int:
    if strength == 0 or strength % 2 or abs(strength) > 10:
        raise ValueError(f"register strength {strength} is not one of -10..-2, 2..10 (even)")
    return abs(strength) // 2


def _with_aside(prompt: str, aside: str) -> str:
    """Insert the aside after the prompt's first word (before it for a one-word prompt)."""
    head, sep, rest = prompt.partition(" ")
    if not sep:
        return f"{aside.strip(', ').capitalize()}: {prompt}"
    return f"{head.rstrip(',;:')}{aside} {rest}"


def apply_register(prompt: str, strength: int, position: Position) -> str:
    """The prompt in the register of ``strength`` at ``position``."""
    k = _level(strength)
    polite = strength > 0
    before = POLITE_PREFIX if polite else RUDE_PREFIX
    after = POLITE_SUFFIX if polite else RUDE_SUFFIX
    if position == "prefix":
        return " ".join((*before[:k], prompt))
    if position == "suffix":
        return " ".join((prompt, *after[:k]))
    body = _with_aside(prompt, POLITE_ASIDE if polite else RUDE_ASIDE)
    return " ".join((*before[: (k + 1) // 2], body, *after[: k // 2]))
