"""Stage: instances.parquet, one row per variant you can read.

For every (model, dataset, prompt, variant) that has deltas (the replay excluded: it is the
noise floor, not a variant): the base prompt and the variant prompt as asked, the base and
variant answers (``answer_text``: after a thinking model's reasoning block; the base one the
variant was scored against, a scored file's ``paired_base`` included), the six
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

At K > 1 samples per prompt text (``build_instances(..., sampling_tests=...)``) the texts and
``base_correct``/``variant_correct`` are sample 0's (one readable example), and every sample
enters through ``SAMPLED_COLUMNS``, copied from sampling_tests.parquet (sampling/flips.py):
each side's share of right samples, the variant's flip rates beyond the base's self-flip
rate (``flip_*_excess``, null with ``flip_missing_reason``) and the replay's share of right
samples (the base asked again: what resampling alone moves). ``mr_intensity`` is null with
``MR_INTENSITY_AT_K``: it grades one answer, and the mirroring excess ``d_mr`` is over all
samples. At K = 1 (no sampling_tests) the frame is unchanged.
"""

from __future__ import annotations

import polars as pl

from sago_core.artifacts.schemas import Schema, conform, instances_schema
from sago_core.axes.base_pairing import beside_base
from sago_core.axes.language_fidelity import prompt_language
from sago_core.axes.mirroring_intensity import mirroring_intensity
from sago_core.data.prompt import NO_REASON_RECORDED
from sago_core.data.references import language_references
from sago_core.scoring.prompt_scores import finite_deltas
from sago_core.statistics.correctness import is_correct
from sago_core.vocabulary import (
    AXES,
    LANGUAGE_FAMILY,
    MODEL_PROMPT_KEY,
    REPLAY_FAMILY,
    ROW_KEY,
    VARIANT_COLUMNS,
)

NO_ANSWER = "no answer to judge (a failed request, or a reasoning block that never closed)"
NO_REFERENCE_WORDS = "the reference answers hold no words once normalised"
MR_INTENSITY_AT_K = (
    "not defined at K > 1: graded on one sampled answer; d_mr is the mirroring excess over "
    "all samples"
)
NO_SAMPLING_ROW = "no sampling_tests row for this variant"
# at K > 1: per variant, from sampling_tests.parquet (every sample, sampling/flips.py)
SAMPLED_COLUMNS: Schema = {
    "k_base": pl.Int32,
    "k_variant": pl.Int32,
    "share_right_base": pl.Float64,  # share of the base samples right per the references
    "share_right_variant": pl.Float64,
    "share_right_replay": pl.Float64,  # the replay's (the base asked again): noise alone
    "self_flip": pl.Float64,  # base sample i right, base sample j != i wrong
    "flip_right_to_wrong_excess": pl.Float64,  # variant flip rate minus the self-flip rate
    "flip_wrong_to_right_excess": pl.Float64,
    "flip_missing_reason": pl.String,  # why the shares and flip excesses are null
}


def sampled_instances_schema() -> Schema:
    """instances.parquet at K > 1: ``instances_schema()`` and ``SAMPLED_COLUMNS``."""
    return {**instances_schema(), **SAMPLED_COLUMNS}


def _wide_deltas(deltas: pl.DataFrame) -> pl.DataFrame:
    """One row per variant, ``d_<axis>`` and ``reason_<axis>`` per axis (non-finite -> null)."""
    variants = finite_deltas(deltas.filter(pl.col("family") != REPLAY_FAMILY))
    keys = variants.select([*ROW_KEY, *VARIANT_COLUMNS]).unique(ROW_KEY, keep="first")
    columns = []
    for axis in AXES:
        rows = variants.filter(pl.col("axis") == axis).select(
            *ROW_KEY,
            pl.col("delta_norm").alias(f"d_{axis}"),
            pl.col("missing_reason").alias(f"reason_{axis}"),
        )
        columns.append(rows.unique(ROW_KEY, keep="first"))
    wide = keys
    for frame in columns:
        wide = wide.join(frame, on=ROW_KEY, how="left")
    absent = pl.lit("axis not in deltas.parquet")
    return wide.with_columns(
        pl.when(pl.col(f"d_{axis}").is_null())
        .then(pl.coalesce(pl.col(f"reason_{axis}"), absent))
        .alias(f"reason_{axis}")
        for axis in AXES
    )


def _texts(generations: pl.DataFrame) -> pl.DataFrame:
    """Each variant's prompt and answer beside the base it was scored against (a scored
    file's ``paired_base`` included: axes/base_pairing.py), so the base answer shown, its
    verdict and ``mr_intensity`` are the ones the deltas compared."""
    rows = beside_base(generations).select(
        *ROW_KEY,
        "base_prompt",
        "base_answer",
        pl.col("prompt_text").alias("variant_prompt"),
        pl.col("answer_text").alias("variant_answer"),
    )
    return rows.unique(ROW_KEY, keep="first")


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


def _with_samples(rows: pl.DataFrame, tests: pl.DataFrame) -> pl.DataFrame:
    """``rows`` with ``SAMPLED_COLUMNS`` from sampling_tests (one value per variant, the
    same on each of its axis rows) and mr_intensity null with its K > 1 reason."""
    per_variant = [c for c in SAMPLED_COLUMNS if c != "share_right_replay"]
    tests = tests.unique(ROW_KEY, keep="first", maintain_order=True)
    variants = tests.filter(pl.col("family") != REPLAY_FAMILY).select(*ROW_KEY, *per_variant)
    replay = tests.filter(pl.col("family") == REPLAY_FAMILY).select(
        *MODEL_PROMPT_KEY, pl.col("share_right_variant").alias("share_right_replay")
    )
    joined = rows.join(variants, on=ROW_KEY, how="left").join(
        replay.unique(MODEL_PROMPT_KEY, keep="first"), on=MODEL_PROMPT_KEY, how="left"
    )
    return joined.with_columns(
        pl.lit(None, pl.Float64).alias("mr_intensity"),
        pl.lit(MR_INTENSITY_AT_K).alias("mr_intensity_reason"),
        pl.when(pl.col("k_base").is_null())
        .then(pl.lit(NO_SAMPLING_ROW))
        .otherwise(pl.col("flip_missing_reason"))
        .alias("flip_missing_reason"),
    )


def build_instances(
    deltas: pl.DataFrame,
    generations: pl.DataFrame,
    prompts: pl.DataFrame,
    sampling_tests: pl.DataFrame | None = None,
) -> pl.DataFrame:
    """One row per scored variant: ids, texts, the six delta_norm, mr_intensity, verdicts;
    with ``sampling_tests`` (K > 1) also ``SAMPLED_COLUMNS`` over every sample."""
    rows = _wide_deltas(deltas).join(_texts(generations), on=ROW_KEY, how="left")
    if sampling_tests is None:
        rows = _with_correctness(_with_intensity(rows), prompts)
        return conform(rows, instances_schema()).sort(ROW_KEY)
    rows = _with_samples(_with_correctness(rows, prompts), sampling_tests)
    return conform(rows, sampled_instances_schema()).sort(ROW_KEY)
