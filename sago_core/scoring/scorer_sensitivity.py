"""How much of a measured BERT instability is the scorer's: the same run's SGS on the ``bert``
axis under two BERTScore encoders, and how well the two agree on what is less stable.

Encoder A is the run's own (its ``deltas.parquet``); encoder B rescoring the same pairs
(each variant's answer against its base answer, the replay's too, as ``score-pairs`` does).
Both go through sago's own scoring (``score_prompts``, ``summarize``), so the two columns
differ only by the encoder. Agreement is read at three grains, each with Spearman's rho
(and Kendall's tau for the cells):

- **cells**: the (model, dataset) SGS, datasets not pooled; what a leaderboard ranks;
- **prompts**: every prompt's s, per model; which prompts look unstable;
- the ratio of the two SGS (B / A) per cell: a constant ratio means the encoders differ only
  in scale (rescaling with a baseline is exactly that: ``sago audit bertscore-baseline``).

A grain with fewer than three values has no rank agreement (NA with the count). Only
single-answer runs (K = 1): at K > 1 the bert deltas are excesses over K samples, which this
does not rescore.
"""

from __future__ import annotations

from dataclasses import dataclass

import polars as pl

from sago_core import markdown
from sago_core.baselines.bertscore import F1Fn
from sago_core.scoring.encoder import BERT_AXIS
from sago_core.scoring.prompt_scores import score_prompts
from sago_core.scoring.summary import summarize
from sago_core.vocabulary import BASE_VARIANT_ID, MODEL_PROMPT_KEY, POOLED, ROW_KEY

FEW = "fewer than 3 {what} with an SGS under both encoders ({n}): no rank agreement"
NO_ANSWER = "no answer to compare: the variant's or the base's answer is missing"


@dataclass(frozen=True)
class Agreement:
    grain: str  # "cells" or "prompts"
    n: int
    spearman: float | None
    kendall: float | None
    missing_reason: str | None = None


@dataclass(frozen=True)
class Sensitivity:
    cells: pl.DataFrame  # model, dataset (incl. __pooled__), sgs_a, sgs_b, ratio
    agreements: list[Agreement]


def rescored_deltas(deltas: pl.DataFrame, generations: pl.DataFrame, f1: F1Fn) -> pl.DataFrame:
    """The run's ``bert`` rows with F1 from ``f1`` (candidates: the variant's answers,
    references: the base's): delta = F1 - 1 = delta_norm (the axis' range is 1). A row the
    run left without a value (cross-language, no answer) stays without one, with its reason."""
    bert = deltas.filter(pl.col("axis") == BERT_AXIS)
    answers = generations.select(*ROW_KEY, "answer_text")
    base = answers.filter(pl.col("variant_id") == BASE_VARIANT_ID).select(
        *MODEL_PROMPT_KEY, pl.col("answer_text").alias("_base")
    )
    rows = bert.join(answers, on=ROW_KEY, how="left").join(base, on=MODEL_PROMPT_KEY, how="left")
    scorable = (
        pl.col("delta").is_not_null()
        & pl.col("answer_text").is_not_null()
        & pl.col("_base").is_not_null()
    )
    todo = rows.filter(scorable)
    values = f1(todo["answer_text"].to_list(), todo["_base"].to_list())
    scored = todo.with_columns(pl.Series("_f1", values, pl.Float64)).select(*ROW_KEY, "_f1")
    out = rows.join(scored, on=ROW_KEY, how="left").with_columns(
        (pl.col("_f1") - 1.0).alias("delta"),
        (pl.col("_f1") - 1.0).alias("delta_norm"),
        pl.when(pl.col("_f1").is_null())
        .then(pl.coalesce(pl.col("missing_reason"), pl.lit(NO_ANSWER)))
        .alias("missing_reason"),
    )
    return out.select(bert.columns)


def _sgs(deltas: pl.DataFrame) -> tuple[pl.DataFrame, pl.DataFrame]:
    """(summary rows of the bert axis, per-prompt s) from ``deltas``' bert rows."""
    scores = score_prompts(deltas.filter(pl.col("axis") == BERT_AXIS))
    return summarize(scores).filter(pl.col("axis") == BERT_AXIS), scores


def _agreement(grain: str, a: list[float], b: list[float], what: str) -> Agreement:
    from scipy import stats  # lazy: only when computed

    if len(a) < 3:
        return Agreement(grain, len(a), None, None, FEW.format(what=what, n=len(a)))
    rho = float(stats.spearmanr(a, b).statistic)
    tau = float(stats.kendalltau(a, b).statistic)
    nan = rho != rho or tau != tau
    reason = "constant SGS under one encoder: ranks undefined" if nan else None
    return Agreement(grain, len(a), None if nan else rho, None if nan else tau, reason)


def scorer_sensitivity(deltas: pl.DataFrame, generations: pl.DataFrame, f1_b: F1Fn) -> Sensitivity:
    """The run's SGS-BERT (its own encoder, A) beside encoder B's (``f1_b``) and their rank
    agreement over cells and over prompts."""
    summary_a, scores_a = _sgs(deltas)
    summary_b, scores_b = _sgs(rescored_deltas(deltas, generations, f1_b))
    cells = (
        summary_a.select("model", "dataset", pl.col("sgs").alias("sgs_a"))
        .join(
            summary_b.select("model", "dataset", pl.col("sgs").alias("sgs_b")),
            on=["model", "dataset"],
            how="full",
            coalesce=True,
        )
        .with_columns((pl.col("sgs_b") / pl.col("sgs_a")).alias("ratio"))
        .sort("model", "dataset")
    )
    both = cells.filter(
        (pl.col("dataset") != POOLED)
        & pl.col("sgs_a").is_not_null()
        & pl.col("sgs_b").is_not_null()
    )
    prompts = (
        scores_a.select(*MODEL_PROMPT_KEY, pl.col("s").alias("a"))
        .join(scores_b.select(*MODEL_PROMPT_KEY, pl.col("s").alias("b")), on=MODEL_PROMPT_KEY)
        .drop_nulls(["a", "b"])
    )
    return Sensitivity(
        cells=cells,
        agreements=[
            _agreement(
                "cells", both["sgs_a"].to_list(), both["sgs_b"].to_list(), "(model, dataset)s"
            ),
            _agreement("prompts", prompts["a"].to_list(), prompts["b"].to_list(), "prompts"),
        ],
    )


def render_sensitivity(found: Sensitivity, encoder_a: str, encoder_b: str) -> str:
    """The table as Markdown: what a user reads to see how much is the scorer's."""

    num = markdown.plain
    cells = [
        [r["model"], r["dataset"], *(num(r[c]) for c in ("sgs_a", "sgs_b", "ratio"))]
        for r in found.cells.iter_rows(named=True)
    ]
    agreements = [
        [a.grain, a.n, num(a.spearman), num(a.kendall), a.missing_reason or ""]
        for a in found.agreements
    ]
    lines = [
        "# Scorer sensitivity of SGS-BERT",
        "",
        f"A: {encoder_a} (the run's). B: {encoder_b}.",
        "",
        *markdown.table(["model", "dataset", "SGS-BERT A", "SGS-BERT B", "B / A"], cells),
        "",
        *markdown.table(
            ["rank agreement over", "n", "Spearman rho", "Kendall tau", "note"], agreements
        ),
    ]
    return "\n".join(lines) + "\n"
