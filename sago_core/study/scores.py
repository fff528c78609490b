"""One table of scores per (checkpoint, dataset, metric): accuracy, reference likelihood, SGS.

- ``accuracy``: share of base answers judged correct by the documented normalised match
  (``sago_core.statistics.correctness``), over prompts that have references.
- ``ref_loglik``: mean over prompts of the per-token log-likelihood of the first reference.
- ``sgs_<axis>``: the dataset's SGS on that axis from the evaluation summary.

A value that cannot be computed is null with a reason, never 0.
"""

from __future__ import annotations

import polars as pl

from sago_core.artifacts.schemas import CHECKPOINT_SCORES, conform
from sago_core.axes.reasoning import with_answers
from sago_core.statistics.correctness import is_correct
from sago_core.vocabulary import AXES, BASE_VARIANT_ID, POOLED

Checkpoint = tuple[str, int, str]  # series, position, model spec
# Study columns renamed for one meaning per word (a family is a variant family), old=new.
RENAMED_COLUMNS = dict(
    family="series", family_a="series_a", family_b="series_b", pairs_compared="dataset_pairs"
)


def current_columns(frame: pl.DataFrame) -> pl.DataFrame:
    """A study artifact under today's column names (a saved one may hold the old ones)."""
    return frame.rename({old: new for old, new in RENAMED_COLUMNS.items() if old in frame.columns})


def _row(
    series: str,
    position: int,
    model: str,
    dataset: str,
    metric: str,
    value: float | None,
    n: int,
    reason: str | None = None,
) -> dict:
    return {
        "series": series,
        "position": position,
        "model": model,
        "dataset": dataset,
        "metric": metric,
        "value": value,
        "n": n,
        "missing_reason": reason if value is None else None,
    }


def accuracy_rows(
    checkpoints: list[Checkpoint], prompts: pl.DataFrame, generations: pl.DataFrame
) -> list[dict]:
    base = (
        with_answers(generations)
        .filter(pl.col("variant_id") == BASE_VARIANT_ID)
        .join(prompts.select("dataset", "prompt_id", "references"), on=["dataset", "prompt_id"])
    )
    rows = []
    for series, position, model in checkpoints:
        answers = base.filter(pl.col("model") == model)
        for dataset in sorted(prompts["dataset"].unique().to_list()):
            chosen = answers.filter(pl.col("dataset") == dataset)
            verdicts = [
                is_correct(text, refs or [])
                for text, refs in chosen.select("answer_text", "references").iter_rows()
            ]
            known = [v for v in verdicts if v is not None]
            value = sum(known) / len(known) if known else None
            reason = None if known else "no prompt with a reference answer"
            rows.append(
                _row(series, position, model, dataset, "accuracy", value, len(known), reason)
            )
    return rows


def likelihood_rows(checkpoints: list[Checkpoint], likelihood: pl.DataFrame) -> list[dict]:
    rows = []
    for series, position, model in checkpoints:
        mine = likelihood.filter(pl.col("model") == model)
        for dataset in sorted(mine["dataset"].unique().to_list()):
            values = mine.filter(pl.col("dataset") == dataset)["logprob_per_token"].drop_nulls()
            value = float(values.mean()) if len(values) else None  # type: ignore[arg-type]
            reason = "no scored reference answer" if value is None else None
            rows.append(
                _row(series, position, model, dataset, "ref_loglik", value, len(values), reason)
            )
    return rows


def sgs_rows(checkpoints: list[Checkpoint], summary: pl.DataFrame) -> list[dict]:
    rows = []
    per_dataset = summary.filter(pl.col("dataset") != POOLED)
    for series, position, model in checkpoints:
        mine = per_dataset.filter(pl.col("model") == model)
        for r in mine.iter_rows(named=True):
            if r["axis"] in AXES:
                rows.append(
                    _row(
                        series,
                        position,
                        model,
                        r["dataset"],
                        f"sgs_{r['axis']}",
                        r["sgs"],
                        r["n"],
                        r["missing_reason"],
                    )
                )
    return rows


def checkpoint_scores(
    checkpoints: list[Checkpoint],
    prompts: pl.DataFrame,
    generations: pl.DataFrame,
    summary: pl.DataFrame,
    likelihood: pl.DataFrame,
) -> pl.DataFrame:
    rows = (
        accuracy_rows(checkpoints, prompts, generations)
        + likelihood_rows(checkpoints, likelihood)
        + sgs_rows(checkpoints, summary)
    )
    frame = pl.DataFrame(rows, schema=CHECKPOINT_SCORES)
    return conform(frame, CHECKPOINT_SCORES).sort(["series", "position", "dataset", "metric"])
