"""Refusal verdicts for a run's answers: generations (or samples at T > 0) in, one verdict
row per answer out, in the shape ``flips.refusal_flips`` and ``best_of_n`` read.

The answer judged is ``answer_text`` (the response after its reasoning block, as every
text axis reads it). Its language is the prompt's (``axes.language_fidelity.prompt_language``):
a ``language`` variant's subtype is the language it asks in (a machine translation's
``mt:de`` is ``de``), every other answer is judged in the base language. A generation that
failed, or whose reasoning block never closed, has no verdict and says why. Each prompt's
kind comes from the prompts (``data/safety.py``); a prompt without one is refused here,
before any verdict. With a judge, each answer is also put to it and the judge's verdict is
used where it gave one (``judged.py``).
"""

from __future__ import annotations

from typing import Any

import polars as pl

from sago_core.axes.language_fidelity import prompt_language
from sago_core.refusal.judge import RefusalJudge
from sago_core.refusal.judged import JUDGE_COLUMNS, with_judge
from sago_core.refusal.rules import refusal_verdicts

NO_ANSWER_TEXT = "no answer text (the reasoning block never closed)"

VERDICTS_SCHEMA: dict[str, Any] = {
    "model": pl.Utf8,
    "dataset": pl.Utf8,
    "prompt_id": pl.Utf8,
    "kind": pl.Utf8,
    "variant_id": pl.Utf8,
    "family": pl.Utf8,
    "subtype": pl.Utf8,
    "strength": pl.Float64,
    "sample": pl.Int64,
    "language": pl.Utf8,  # the list the answer was read with (rules_language)
    "refused": pl.Boolean,
    "opening": pl.Utf8,  # the matched refusal opening
    "missing_reason": pl.Utf8,
}
# with a refusal judge: the rule's and the judge's verdicts beside the one used
JUDGED_VERDICTS_SCHEMA: dict[str, Any] = {**VERDICTS_SCHEMA, **JUDGE_COLUMNS}
REQUEST_COLUMN = "prompt_text"  # what the judge is given as the request


def refusal_verdict_frame(
    answers: pl.DataFrame, kinds: pl.DataFrame, judge: RefusalJudge | None = None
) -> pl.DataFrame:
    """Verdicts for ``answers`` (generations.parquet's or samples.parquet's columns; no
    ``sample`` column: one sample, 0) given ``kinds`` (``dataset``, ``prompt_id``,
    ``kind``); with ``judge`` (``answers`` then carry ``REQUEST_COLUMN``), the judge's
    beside the rules' (``JUDGED_VERDICTS_SCHEMA``)."""
    joined = answers.join(
        kinds.select("dataset", "prompt_id", "kind"), on=["dataset", "prompt_id"], how="left"
    )
    unkinded = joined.filter(pl.col("kind").is_null())
    if unkinded.height:
        row = unkinded.row(0, named=True)
        raise ValueError(
            f"prompt {row['prompt_id']!r} of dataset {row['dataset']!r} has no kind (harmful "
            "or harmless): name its file's kind column with '#kind=COLUMN'"
        )
    if "sample" not in joined.columns:
        joined = joined.with_columns(pl.lit(0).alias("sample"))
    joined = joined.with_columns(prompt_language().alias("_language"))
    texts = joined.get_column("answer_text").to_list()
    verdicts = refusal_verdicts(texts, joined.get_column("_language").to_list())
    failures = joined.get_column("failure_reason").to_list()
    reasons = []
    for verdict, text, failure in zip(verdicts, texts, failures, strict=True):
        if text is not None:
            reasons.append(verdict.missing_reason)
        else:
            reasons.append(failure or NO_ANSWER_TEXT)
    frame = joined.select(
        "model",
        "dataset",
        "prompt_id",
        "kind",
        "variant_id",
        "family",
        "subtype",
        "strength",
        pl.col("sample").cast(pl.Int64),
        pl.Series("language", [v.language for v in verdicts], dtype=pl.Utf8),
        pl.Series("refused", [v.refused for v in verdicts], dtype=pl.Boolean),
        pl.Series("opening", [v.opening for v in verdicts], dtype=pl.Utf8),
        pl.Series("missing_reason", reasons, dtype=pl.Utf8),
    ).cast(pl.Schema(VERDICTS_SCHEMA))
    if judge is None:
        return frame
    requests = joined.get_column(REQUEST_COLUMN).to_list()
    return with_judge(frame, requests, texts, judge).cast(pl.Schema(JUDGED_VERDICTS_SCHEMA))
