"""Stage: instances.parquet, one row per variant you can read.

For every (model, dataset, prompt, variant) that has deltas (the replay excluded: it is the
noise floor, not a variant): the base prompt and the variant prompt as asked, the base and
variant answers (``answer_text``: after a thinking model's reasoning block), the six
normalised deltas side by side (``d_<axis>``, null with ``reason_<axis>``), the graded
mirroring ``mr_intensity`` (axes/mirroring_intensity.py) and whether each answer is right
per the prompt's reference answers (statistics/correctness.py; null without references or
without an answer, and ``correct_missing_reason`` says why: the prompt's
``reference_missing_reason`` from prompts.parquet, e.g. Alpaca's ``NO_GOLD_ALPACA``, or a
missing answer). A language variant's answer is judged against the gold answers in its own
language (``data/references.language_references``: MKQA's answers in German for a ``de``
variant, and for a machine translation into German, ``mt:de``, too), its base answer
against the base prompt's (English) references; a language with no gold answer for the
question, or a prompt whose dataset carries no translations, leaves ``variant_correct``
null with the reason.
"""

from __future__ import annotations

import polars as pl

from sago_core.artifacts.schemas import conform, instances_schema
from sago_core.axes.language_fidelity import prompt_language
from sago_core.axes.mirroring_intensity import mirroring_intensity
from sago_core.axes.reasoning import with_answers
from sago_core.data.prompt import NO_REASON_RECORDED
from sago_core.data.references import language_references
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
    reasons: tuple[str | None, str | None],
    verdicts: tuple[bool | None, bool | None],
    answers: tuple[str | None, str | None],
) -> str | None:
    """Why a row's base or variant verdict is null (None: both are known): for the first
    side without a verdict, its references' reason for being absent (the base prompt's, or
    for a language variant the reason its language has none), else a missing answer, else
    references without words."""
    for why, verdict, answer in zip(reasons, verdicts, answers, strict=True):
        if verdict is not None:
            continue
        if why is not None:
            return why
        return NO_ANSWER if answer is None else NO_REFERENCE_WORDS
    return None


def _language_references(joined: pl.DataFrame, prompts: pl.DataFrame) -> pl.DataFrame:
    """``joined`` with each row's variant references: a language variant's in its own
    language (``variant_references`` / ``variant_reference_reason``; a machine translation
    into German, ``mt:de``, is judged against the German ones too), else the base's."""
    language = pl.col("family") == LANGUAGE_FAMILY
    joined = joined.with_columns(prompt_language().alias("_language"))
    base = joined.with_columns(
        pl.col("references").alias("variant_references"),
        pl.col("reference_missing_reason").alias("variant_reference_reason"),
    )
    asked = joined.filter(language).select(
        "dataset", "prompt_id", pl.col("_language").alias("language")
    )
    if asked.is_empty():
        return base.drop("_language")
    found = language_references(prompts, asked).select(
        "dataset",
        "prompt_id",
        pl.col("language").alias("_language"),
        pl.lit(LANGUAGE_FAMILY).alias("family"),
        pl.col("references").alias("_language_references"),
        pl.col("reference_missing_reason").alias("_language_reason"),
    )
    key = ["dataset", "prompt_id", "_language", "family"]
    return (
        base.join(found, on=key, how="left")
        .with_columns(
            pl.when(language)
            .then(pl.col("_language_references"))
            .otherwise(pl.col("variant_references"))
            .alias("variant_references"),
            pl.when(language)
            .then(pl.col("_language_reason"))
            .otherwise(pl.col("variant_reference_reason"))
            .alias("variant_reference_reason"),
        )
        .drop("_language", "_language_references", "_language_reason")
    )


def _judged(answers: list[str | None], targets: list[list[str]]) -> list[bool | None]:
    """``is_correct`` of each (answer, references), each distinct pair judged once: a
    prompt's base answer and references recur on every one of its variants' rows."""
    verdicts: dict[tuple[str | None, tuple[str, ...]], bool | None] = {}
    judged = []
    for answer, references in zip(answers, targets, strict=True):
        key = (answer, tuple(references))
        if key not in verdicts:
            verdicts[key] = is_correct(answer, references)
        judged.append(verdicts[key])
    return judged


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
    joined = _language_references(rows.join(refs, on=["dataset", "prompt_id"], how="left"), prompts)
    sides = {}
    for side, answer, references, why in (
        ("base", "base_answer", "references", "reference_missing_reason"),
        ("variant", "variant_answer", "variant_references", "variant_reference_reason"),
    ):
        targets = [r or [] for r in joined[references].to_list()]
        sides[side] = (
            _judged(joined[answer].to_list(), targets),
            [
                None if ref else (reason or NO_REASON_RECORDED)
                for ref, reason in zip(targets, joined[why], strict=True)
            ],
        )
    (base, base_why), (variant, variant_why) = sides["base"], sides["variant"]
    reasons = [
        _missing_verdict((bw, vw), (b, v), (ba, va))
        for bw, vw, b, v, ba, va in zip(
            base_why,
            variant_why,
            base,
            variant,
            joined["base_answer"],
            joined["variant_answer"],
            strict=True,
        )
    ]
    return joined.drop("variant_references", "variant_reference_reason").with_columns(
        pl.Series("base_correct", base, pl.Boolean),
        pl.Series("variant_correct", variant, pl.Boolean),
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
