"""The answer of a thinking model: what follows its reasoning block.

A reasoning model writes ``<think>...</think>`` (or ``<thinking>``, ``<reasoning>``; any
case) before its answer. BLEU, BERTScore and mirroring compare answers, so they read
``answer_text``: the text after the last closing tag, stripped. Qwen3's chat template opens
the block itself when thinking is on, so a response may hold a closing tag without an
opening one; that is still a reasoning block. A block that never closes (max_new_tokens ran
out while the model was thinking, or it opened a new block after the last closing tag) has
no answer: None, and the axes comparing answers are missing with ``UNCLOSED_REASONING``.

A response without any tag is returned unchanged (not stripped), so non-thinking models'
scores are exactly what they were before this module existed. Known limit: when a template
opened the block and the budget ran out before any closing tag, the response carries no tag
at all and reads as an answer; the run's ``chat_template_kwargs`` (thinking off, the
default) is what avoids that case.
"""

from __future__ import annotations

import re

import polars as pl

UNCLOSED_REASONING = "answer still inside a reasoning block (max_new_tokens reached while thinking)"

_TAGS = r"(?:think|thinking|reasoning)"
_OPEN = re.compile(rf"<\s*{_TAGS}\s*>", re.IGNORECASE)
_CLOSE = re.compile(rf"<\s*/\s*{_TAGS}\s*>", re.IGNORECASE)


def answer_text(response: str | None) -> str | None:
    """The answer part of ``response``; None when there is none (no response, or the
    reasoning block is still open)."""
    if response is None:
        return None
    closes = list(_CLOSE.finditer(response))
    if not closes:
        return None if _OPEN.search(response) else response
    after = response[closes[-1].end() :]
    if _OPEN.search(after):
        return None  # a new block opened after the last one closed, and never closed
    return after.strip()


def with_answers(generations: pl.DataFrame) -> pl.DataFrame:
    """``generations`` with its ``answer_text`` column (derived when absent: older files),
    and ``thinking``: an answer that came back but is still inside its reasoning block."""
    if "answer_text" not in generations.columns:
        answers = [answer_text(r) for r in generations["response_text"].to_list()]
        generations = generations.with_columns(pl.Series("answer_text", answers, pl.String))
    return generations.with_columns(
        (pl.col("response_text").is_not_null() & pl.col("answer_text").is_null()).alias("thinking")
    )


def unanswered() -> pl.Expr:
    """Why an axis comparing answers has none for a row of the delta join: the variant's or
    the base's answer is still inside a reasoning block (null: both answered)."""
    variant = pl.when(pl.col("thinking")).then(pl.lit(f"variant {UNCLOSED_REASONING}"))
    base = pl.when(pl.col("base_thinking")).then(pl.lit(f"base {UNCLOSED_REASONING}"))
    return pl.coalesce(variant, base)
