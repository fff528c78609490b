"""Stage: instances.parquet, one row per variant you can read.

For every (model, dataset, prompt, variant) that has deltas (the replay excluded: it is the
noise floor, not a variant): the base prompt and the variant prompt as asked, the base and
variant answers (``answer_text``: after a thinking model's reasoning block), the six
normalised deltas side by side (``d_<axis>``, null with ``reason_<axis>``), the graded
mirroring ``mr_intensity`` (axes/mirroring_intensity.py) and whether each answer is right
per the prompt's reference answers (statistics/correctness.py; null without references or
without an answer, and ``correct_missing_reason`` says why: the prompt's
``reference_missing_reason`` from prompts.parquet, e.g. Alpaca's ``NO_GOLD_ALPACA``, or a
missing answer). A language variant's answer is not graded: prompts.parquet carries the
English references only, so its ``variant_correct`` is null with ``NO_LANGUAGE_REFERENCES``.
"""

from __future__ import annotations

import polars as pl

from sago_core.artifacts.schemas import conform, instances_schema
from sago_core.axes.mirroring_intensity import mirroring_intensity
from sago_core.axes.reasoning import with_answers
from sago_core.data.prompt import NO_REASON_RECORDED
from sago_core.statistics.correctness import is_correct
from sago_core.vocabulary import (
    AXES,
    BASE_VARIANT_ID,
    LANGUAGE_FAMILY,
    NON_FINITE,
    REPLAY_FAMILY,
)

KEY = ["model", "dataset", "prompt_id", "variant_id"]
PROMPT_KEY = ["model", "dataset", "prompt_id"]
NO_ANSWER = "no answer to judge (a failed request, or a reasoning block that never closed)"
NO_REFERENCE_WORDS = "the reference answers hold no words once normalised"
# prompts.parquet holds the base (English) prompt's references only: a language variant's
# answer is not graded against them (issue 28; per-language references are later work).
NO_LANGUAGE_REFERENCES = "references in the prompt's language are not carried yet"
VARIANT_COLUMNS = ["family", "subtype", "strength", "position"]


def _wide_deltas(deltas: pl.DataFrame) -> pl.DataFrame:
    """One row per variant, ``d_<axis>`` and ``reason_<axis>`` per axis (non-finite -> null)."""
    variants = deltas.filter(pl.col("family") != REPLAY_FAMILY)
    finite = pl.col("delta_norm").is_finite()
    variants = variants.with_columns(
        pl.when(finite).then(pl.col("delta_norm")).alias("delta_norm"),
        pl.when(pl.col("delta_norm").is_not_null() & ~finite)
        .then(pl.lit(NON_FINITE))
        .otherwise(pl.col("missing_reason"))
        .alias("missing_reason"),
    )
    keys = variants.select([*KEY, *VARIANT_COLUMNS]).unique(KEY, keep="first")
    columns = []
    for axis in AXES:
        rows = variants.filter(pl.col("axis") == axis).select(
            *KEY,
            pl.col("delta_norm").alias(f"d_{axis}"),
            pl.col("missing_reason").alias(f"reason_{axis}"),
        )
        columns.append(rows.unique(KEY, keep="first"))
    wide = keys
    for frame in columns:
        wide = wide.join(frame, on=KEY, how="left")
    absent = pl.lit("axis not in deltas.parquet")
    return wide.with_columns(
        pl.when(pl.col(f"d_{axis}").is_null())
        .then(pl.coalesce(pl.col(f"reason_{axis}"), absent))
        .alias(f"reason_{axis}")
        for axis in AXES
    )


def _texts(generations: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    generations = with_answers(generations)
    base = generations.filter(pl.col("variant_id") == BASE_VARIANT_ID).select(
        *PROMPT_KEY,
        pl.col("prompt_text").alias("base_prompt"),
        pl.col("answer_text").alias("base_answer"),
    )
    variant = generations.filter(pl.col("variant_id") != BASE_VARIANT_ID).select(
        *KEY,
        pl.col("prompt_text").alias("variant_prompt"),
        pl.col("answer_text").alias("variant_answer"),
    )
    return base.unique(PROMPT_KEY, keep="first"), variant.unique(KEY, keep="first")


def _with_intensity(rows: pl.DataFrame) -> pl.DataFrame:
    values, reasons = [], []
    for r in rows.iter_rows(named=True):
        graded = mirroring_intensity(
            r["family"],
            r["subtype"],
            r["strength"],
            r["variant_answer"],
            r["base_answer"],
            r["variant_prompt"] or "",
            r["base_prompt"] or "",
        )
        values.append(graded.value)
        reasons.append(graded.missing_reason)
    return rows.with_columns(
        pl.Series("mr_intensity", values, pl.Float64),
        pl.Series("mr_intensity_reason", reasons, pl.String),
    )


def _missing_verdict(
    no_references: str | None,
    base: bool | None,
    variant: bool | None,
    answers: tuple[str | None, str | None],
    language: bool = False,
) -> str | None:
    """Why a row's base or variant verdict is null (None: both are known): the prompt's
    reason for having no references, else a missing answer, else (a language variant) no
    references in its language, else references without words."""
    if base is not None and variant is not None:
        return None
    if no_references is not None:
        return no_references
    if any(answer is None for answer in answers):
        return NO_ANSWER
    if language and base is not None:
        return NO_LANGUAGE_REFERENCES
    return NO_REFERENCE_WORDS


def _with_correctness(rows: pl.DataFrame, prompts: pl.DataFrame) -> pl.DataFrame:
    # runs written before prompts.parquet held ``reference_missing_reason`` read as unknown
    reason = (
        pl.col("reference_missing_reason")
        if "reference_missing_reason" in prompts.columns
        else pl.lit(None, pl.String)
    )
    refs = prompts.select(
        "dataset", "prompt_id", "references", reason.alias("reference_missing_reason")
    ).unique(["dataset", "prompt_id"], keep="first")
    joined = rows.join(refs, on=["dataset", "prompt_id"], how="left")
    references = [r or [] for r in joined["references"].to_list()]
    verdicts = {
        name: [is_correct(a, ref) for a, ref in zip(joined[col], references, strict=True)]
        for name, col in (("base_correct", "base_answer"), ("variant_correct", "variant_answer"))
    }
    language = (joined["family"] == LANGUAGE_FAMILY).fill_null(False).to_list()
    verdicts["variant_correct"] = [
        None if is_language else verdict
        for verdict, is_language in zip(verdicts["variant_correct"], language, strict=True)
    ]
    no_references = [
        None if refs else (why or NO_REASON_RECORDED)
        for refs, why in zip(references, joined["reference_missing_reason"], strict=True)
    ]
    reasons = [
        _missing_verdict(why, base, variant, (base_answer, variant_answer), is_language)
        for why, base, variant, base_answer, variant_answer, is_language in zip(
            no_references,
            verdicts["base_correct"],
            verdicts["variant_correct"],
            joined["base_answer"],
            joined["variant_answer"],
            language,
            strict=True,
        )
    ]
    return joined.with_columns(
        *(pl.Series(name, values, pl.Boolean) for name, values in verdicts.items()),
        pl.Series("correct_missing_reason", reasons, pl.String),
    )


def build_instances(
    deltas: pl.DataFrame, generations: pl.DataFrame, prompts: pl.DataFrame
) -> pl.DataFrame:
    """One row per scored variant: ids, texts, the six delta_norm, mr_intensity, verdicts."""
    base, variant = _texts(generations)
    rows = (
        _wide_deltas(deltas).join(variant, on=KEY, how="left").join(base, on=PROMPT_KEY, how="left")
    )
    rows = _with_correctness(_with_intensity(rows), prompts)
    return conform(rows, instances_schema()).sort(KEY)
