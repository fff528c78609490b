"""Structural variants: length scaling and question <-> imperative, GLOBAL only.

A rewriter model produces them (greedy, T=0) from the instructions below; this module only
builds the instructions and cleans and checks the answers, so it stays model-free. The
instruction version is part of the rewrite cache key: change the wording, bump it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from sago_core.variants.rewrite_checks import only_surface_change, rewrite_problem, sentence_form

INSTRUCTION_VERSION = "structural-v2"  # v2: a question without "?" is a question
NO_POLITENESS = (
    "Do not add greetings, thanks, 'please' or any other politeness, and do not answer it."
)
_LABEL = re.compile(
    r"^(rewritten|rephrased|new|shortened|lengthened)?\s*(question|instruction|"
    r"version|request|prompt|text)?\s*:\s*",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class RewriteTask:
    """One structural variant to produce: subtype 'length' (strength = m) or 'mood' (1)."""

    subtype: str
    strength: float
    instruction: str


def word_count(text: str) -> int:
    return len(text.split())


def target_words(prompt: str, multiplier: float) -> int:
    return max(1, round(word_count(prompt) * multiplier))


def is_question(prompt: str) -> bool:
    """Ends with "?", or opens like an English question ("who wrote hamlet", as NQ-open
    asks): such a prompt's mood variant is a command, and a rewrite that only adds the "?"
    is no change of mood."""
    return prompt.rstrip().endswith("?") or sentence_form(prompt) == "question"


def length_task(prompt: str, multiplier: float) -> RewriteTask:
    goal = target_words(prompt, multiplier)
    direction = "Shorten" if multiplier < 1 else "Lengthen"
    instruction = (
        f"{direction} the following text to about {goal} words. Keep exactly the same meaning, "
        f"the same request and the same form. {NO_POLITENESS} Reply with the rewritten text "
        f"only.\n\nText: {prompt}"
    )
    return RewriteTask("length", multiplier, instruction)


def mood_task(prompt: str) -> RewriteTask:
    if is_question(prompt):
        change = "Rewrite the following question as a command (an imperative sentence, no '?')."
    else:
        change = "Rewrite the following instruction as a direct question ending with '?'."
    instruction = (
        f"{change} Keep exactly the same meaning. {NO_POLITENESS} Reply with the rewritten "
        f"text only.\n\nText: {prompt}"
    )
    return RewriteTask("mood", 1.0, instruction)


def clean_rewrite(raw: str) -> str:
    """First non-empty line, without a leading label or wrapping quotes."""
    for line in raw.strip().splitlines():
        text = _LABEL.sub("", line.strip()).strip().strip('"“”').strip()
        if text:
            return text
    return ""


def check_rewrite(
    prompt: str, rewrite: str, task: RewriteTask, references: tuple[str, ...] = ()
) -> str | None:
    """Why a rewrite is unusable, or None: no text, no change, not the asked change, or
    not a variant of the prompt beyond similarity (``rewrite_checks``: a change of casing
    and punctuation only, an answer, a lost request). Meaning is judged later by the
    semantic filter."""
    if not rewrite:
        return "rewriter returned no text"
    if rewrite.strip() == prompt.strip():
        return "rewriter returned the prompt unchanged"
    if only_surface_change(prompt, rewrite):  # the most telling reason first
        return rewrite_problem(prompt, rewrite, task.subtype, is_question(prompt), references)
    if task.subtype == "mood" and is_question(rewrite) == is_question(prompt):
        return "rewrite did not change the mood"
    if task.subtype == "length":
        ratio = word_count(rewrite) / max(word_count(prompt), 1)
        if (task.strength < 1) != (ratio < 1) or ratio == 1:
            return f"rewrite did not change the length in the asked direction (ratio {ratio:.2f})"
    return rewrite_problem(prompt, rewrite, task.subtype, is_question(prompt), references)
