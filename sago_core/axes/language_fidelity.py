"""The ``lang`` axis: does the answer come in the language its prompt was asked in?

Per variant: the prompt's language is the language variant's code (its subtype; ``de`` for
the file's own translation and for a machine translation, ``mt:de``) and the base language
(English) for every other family; ``language_id.identify_language`` names
the answer's language. ``lang_match`` is 1 when it is the prompt's, 0 when not; the delta
is ``lang_match - 1`` (0: the answer keeps the prompt's language; -1: it does not), scale 1.
An answer too short to tell (a name, a year), empty, or without linguistic content is
missing with the identifier's reason, as is one still inside a reasoning block.

The axis is declared in ``registry/axes.py`` for the ``language`` family only
(``AxisSpec.family``): a run without language variants gets no ``lang`` rows. Its delta rule
reads the variant's ``answer_text`` and ``subtype`` in the delta join's row; the detected
language of each answer is ``lang_measurements`` over ``generations.parquet`` (what a
report's per-language table reads, from the artifacts alone).
"""

from __future__ import annotations

from functools import lru_cache

import polars as pl

from sago_core.axes.language_id import identify_language
from sago_core.axes.reasoning import unanswered
from sago_core.variants.translation import MT_PREFIX
from sago_core.vocabulary import BASE_LANGUAGE, LANGUAGE_FAMILY, ROW_KEY

VERDICT = pl.Struct(
    {
        "detected": pl.String,
        "match": pl.Int8,
        "confidence": pl.Float64,
        "reason": pl.String,
    }
)


def prompt_language() -> pl.Expr:
    """The language a variant's prompt is in: its code for a language variant (a machine
    translation's ``mt:de`` is ``de``: ``variants.translation.translated_language``), else
    the base language."""
    return (
        pl.when(pl.col("family") == LANGUAGE_FAMILY)
        .then(pl.col("subtype").str.strip_prefix(MT_PREFIX))
        .otherwise(pl.lit(BASE_LANGUAGE))
    )


@lru_cache(maxsize=65536)
def _verdict(answer: str | None, language: str) -> dict[str, object]:
    found = identify_language(answer, language)
    return {
        "detected": found.detected,
        "match": found.matches,
        "confidence": found.confidence,
        "reason": found.reason,
    }


def _verdicts(answer: pl.Expr, language: pl.Expr) -> pl.Expr:
    return pl.struct(answer.alias("a"), language.alias("l")).map_elements(
        lambda row: _verdict(row["a"], row["l"]), return_dtype=VERDICT
    )


def lang_measurements(generations: pl.DataFrame) -> pl.DataFrame:
    """Per generated row (base and variants): the prompt's language, the answer's detected
    language, ``lang_match`` (0/1), py3langid's confidence, and why any is missing."""
    if "answer_text" not in generations.columns:
        raise ValueError("generations need their answer_text (reasoning.with_answers)")
    rows = generations.with_columns(prompt_language().alias("prompt_language"))
    verdict = _verdicts(pl.col("answer_text"), pl.col("prompt_language"))
    failed = pl.when(pl.col("answer_text").is_null()).then(
        pl.lit("no answer (generation failed or still reasoning)")
    )
    return rows.select(
        *ROW_KEY,
        "family",
        "prompt_language",
        verdict.struct.field("detected").alias("detected_language"),
        verdict.struct.field("match").alias("lang_match"),
        verdict.struct.field("confidence").alias("lang_confidence"),
        pl.coalesce(failed, verdict.struct.field("reason")).alias("missing_reason"),
    )


def lang_delta_rule() -> tuple[pl.Expr, pl.Expr]:
    """The ``lang`` axis: the variant's answer in its prompt's language (1) or not (0),
    minus 1; the identifier's reason when it cannot tell."""
    verdict = _verdicts(pl.col("answer_text"), prompt_language())
    value = verdict.struct.field("match").cast(pl.Float64) - 1.0
    reason = pl.coalesce(
        unanswered(), verdict.struct.field("reason"), pl.lit("no language for this answer")
    )
    return value, reason
