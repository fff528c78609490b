"""Stages: pair scores (BLEU, BERTScore of y^v against y) and mirroring verdicts."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import polars as pl

from sago_core.artifacts.schemas import MIRRORING, PAIRS, conform
from sago_core.axes.judge import JudgeRequest, RegisterJudge
from sago_core.axes.mirroring import Mirroring, detect_mirroring
from sago_core.axes.text_similarity import sentence_bleu
from sago_core.scoring.axes import BASE_VARIANT_ID

KEY = ["model", "dataset", "prompt_id", "variant_id"]
F1Fn = Callable[[Sequence[str], Sequence[str]], list[float]]


def _with_base_response(generations: pl.DataFrame) -> pl.DataFrame:
    base = generations.filter(pl.col("variant_id") == BASE_VARIANT_ID).select(
        "model", "dataset", "prompt_id", pl.col("response_text").alias("base_response")
    )
    return generations.filter(pl.col("variant_id") != BASE_VARIANT_ID).join(
        base, on=["model", "dataset", "prompt_id"], how="left"
    )


def score_pairs(generations: pl.DataFrame, f1: F1Fn) -> pl.DataFrame:
    """BLEU and BERTScore per pair; a pair whose variant or base answer failed is null."""
    rows = _with_base_response(generations)
    answered = rows.filter(
        pl.col("response_text").is_not_null() & pl.col("base_response").is_not_null()
    )
    hyps, refs = answered["response_text"].to_list(), answered["base_response"].to_list()
    scored = answered.select(KEY).with_columns(
        pl.Series(
            "bleu", [sentence_bleu(h, r) for h, r in zip(hyps, refs, strict=True)], pl.Float64
        ),
        pl.Series("bert_f1", f1(hyps, refs) if hyps else [], dtype=pl.Float64),
    )
    return conform(rows.select(KEY).join(scored, on=KEY, how="left"), PAIRS)


def detect_mirroring_frame(
    generations: pl.DataFrame, judge: RegisterJudge | None = None
) -> pl.DataFrame:
    """Rule detectors for every family; register pairs go to the judge when one is given."""
    rows = _with_base_response(generations)
    verdicts = [
        detect_mirroring(
            r["family"],
            r["subtype"],
            r["strength"],
            r["response_text"],
            r["base_response"],
            r["prompt_text"],
        )
        if r["response_text"] is not None and r["base_response"] is not None
        else Mirroring(None, None, "no answer to compare (generation failed)")
        for r in rows.iter_rows(named=True)
    ]
    detectors = ["rules"] * len(verdicts)
    if judge is not None:
        judged = [
            i
            for i, r in enumerate(rows.iter_rows(named=True))
            if r["family"] == "register"
            and r["response_text"] is not None
            and r["base_response"] is not None
        ]
        requests = [
            JudgeRequest(rows["strength"][i], rows["response_text"][i], rows["base_response"][i])
            for i in judged
        ]
        for i, verdict in zip(judged, judge.judge(requests), strict=True):
            verdicts[i], detectors[i] = verdict, f"judge:{judge.identity}"
    frame = rows.select(KEY).with_columns(
        pl.Series("m_variant", [v.m_variant for v in verdicts], dtype=pl.Int8),
        pl.Series("m_base", [v.m_base for v in verdicts], dtype=pl.Int8),
        pl.Series("missing_reason", [v.missing_reason for v in verdicts], dtype=pl.String),
        pl.Series("detector", detectors, dtype=pl.String),
    )
    return conform(frame, MIRRORING)
