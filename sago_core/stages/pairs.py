"""Stages: pair scores (BLEU, BERTScore of y^v against y) and mirroring verdicts.

Both compare answers, ``answer_text`` (the response after a thinking model's reasoning block,
axes/reasoning.py), never the raw ``response_text``. A generations frame without that column
(written before it existed) gets it derived from ``response_text`` here. A pair whose answer
is still inside its reasoning block has no BLEU/BERTScore (null; deltas.py gives the reason)
and no mirroring verdict (missing with that reason). Which base answer a variant is compared
with is axes/base_pairing.py's to say.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import polars as pl

from sago_core.artifacts.schemas import MIRRORING, PAIRS, conform
from sago_core.axes.base_pairing import beside_base
from sago_core.axes.judge import JudgeRequest, RegisterJudge
from sago_core.axes.mirroring import Mirroring, detect_mirroring
from sago_core.axes.reasoning import UNCLOSED_REASONING
from sago_core.axes.text_similarity import sentence_bleu
from sago_core.vocabulary import ROW_KEY

F1Fn = Callable[[Sequence[str], Sequence[str]], list[float]]
NO_ANSWER = "no answer to compare (generation failed)"


def score_pairs(generations: pl.DataFrame, f1: F1Fn) -> pl.DataFrame:
    """BLEU and BERTScore per pair of answers; a pair whose variant or base answer failed,
    or is still inside its reasoning block, is null."""
    rows = beside_base(generations)
    answered = rows.filter(
        pl.col("answer_text").is_not_null() & pl.col("base_answer").is_not_null()
    )
    hyps, refs = answered["answer_text"].to_list(), answered["base_answer"].to_list()
    scored = answered.select(ROW_KEY).with_columns(
        pl.Series(
            "bleu", [sentence_bleu(h, r) for h, r in zip(hyps, refs, strict=True)], pl.Float64
        ),
        pl.Series("bert_f1", f1(hyps, refs) if hyps else [], dtype=pl.Float64),
    )
    return conform(rows.select(ROW_KEY).join(scored, on=ROW_KEY, how="left"), PAIRS)


def _gap(row: dict) -> str | None:
    """Why a pair has no two answers to compare, or None when it has them."""
    if row["response_text"] is None or row["base_response"] is None:
        return NO_ANSWER
    if row["answer_text"] is None or row["base_answer"] is None:
        return UNCLOSED_REASONING
    return None


def detect_mirroring_frame(
    generations: pl.DataFrame, judge: RegisterJudge | None = None
) -> pl.DataFrame:
    """Rule detectors for every family; register pairs go to the judge when one is given."""
    rows = beside_base(generations)
    named = list(rows.iter_rows(named=True))
    gaps = [_gap(r) for r in named]
    verdicts = [
        detect_mirroring(
            r["family"],
            r["subtype"],
            r["strength"],
            r["answer_text"],
            r["base_answer"],
            r["prompt_text"],
        )
        if gap is None
        else Mirroring(None, None, gap)
        for r, gap in zip(named, gaps, strict=True)
    ]
    detectors = ["rules"] * len(verdicts)
    if judge is not None:
        judged = [
            i
            for i, (r, gap) in enumerate(zip(named, gaps, strict=True))
            if r["family"] == "register" and gap is None
        ]
        requests = [
            JudgeRequest(named[i]["strength"], named[i]["answer_text"], named[i]["base_answer"])
            for i in judged
        ]
        for i, verdict in zip(judged, judge.judge(requests), strict=True):
            verdicts[i], detectors[i] = verdict, f"judge:{judge.identity}"
    frame = rows.select(ROW_KEY).with_columns(
        pl.Series("m_variant", [v.m_variant for v in verdicts], dtype=pl.Int8),
        pl.Series("m_base", [v.m_base for v in verdicts], dtype=pl.Int8),
        pl.Series("missing_reason", [v.missing_reason for v in verdicts], dtype=pl.String),
        pl.Series("detector", detectors, dtype=pl.String),
    )
    return conform(frame, MIRRORING)
