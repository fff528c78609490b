"""``variance_components.parquet`` (``schemas.VARIANCE_COMPONENTS``): per (model, dataset
incl. ``__pooled__``, axis) the nested prompt / variant / sample decomposition of a per-sample
score (``variance.decompose``) and the prompt-induced share with its bootstrap interval.

The per-sample score (``sampling_tests``' ``sample_scores``): for a text axis, a sample's mean
distance d to the held-out reference half of its prompt's base samples (the base's cell is
its other half; ``axis_tests.cell_scores``); for ``mr``, the share of those reference
samples against which the detector flags it. The cells of a
prompt are its base and its variants (the replay, a noise floor, is left out, as from the
scores), so s2_variant is the spread the wording adds between a prompt's texts and s2_sample
the spread of resampling one text: with every text drawn from the base's distribution the
share is 0 in expectation.

``prob`` and ``ent`` are NA (``CROSSED``): their samples are the base's answers scored under
every prompt text, so the sample is crossed with the text, not nested in it; ``act`` has no
sampling at all (``NO_SAMPLES``); an axis without an excess rule (``lang``) neither. A
pair whose row is NA (a lost sample) leaves its cell out.
"""

from __future__ import annotations

from dataclasses import asdict
from typing import Any

import polars as pl

from sago_core.artifacts.rows import from_rows
from sago_core.artifacts.schemas import VARIANCE_COMPONENTS
from sago_core.registry.axes import axes_for
from sago_core.sampling.axis_tests import TEACHER_FORCED
from sago_core.sampling.excess_deltas import KEPT_AXES, NO_RULE
from sago_core.sampling.variance import COMPONENTS, decompose
from sago_core.statistics.intervals import DEFAULT_RESAMPLES, stable_seed
from sago_core.vocabulary import BASE_VARIANT_ID, POOLED, REPLAY_FAMILY

DECOMPOSED = ("bleu", "bert", "mr")
CROSSED = (
    "teacher-forced: every base sample is scored under every prompt text, so the sample is "
    "crossed with the text, not nested in it"
)
NO_SAMPLES = "not a sampled measurement: the prompt's hidden states do not vary with sampling"


def _long(tests: pl.DataFrame) -> pl.DataFrame:
    """One row per sample: (dataset, prompt_id, cell, score)."""
    kept = tests.filter(
        pl.col("missing_reason").is_null()
        & pl.col("sample_scores").is_not_null()
        & (pl.col("family") != REPLAY_FAMILY)
    )
    variants = kept.select(
        "dataset", "prompt_id", pl.col("variant_id").alias("cell"), "sample_scores"
    )
    base = (
        kept.filter(pl.col("base_sample_scores").is_not_null())
        .group_by("dataset", "prompt_id", maintain_order=True)
        .agg(pl.col("base_sample_scores").first().alias("sample_scores"))
        .with_columns(pl.lit(BASE_VARIANT_ID).alias("cell"))
        .select("dataset", "prompt_id", "cell", "sample_scores")
    )
    return (
        pl.concat([base, variants])
        .explode("sample_scores")
        .rename({"sample_scores": "score"})
        .drop_nulls("score")
    )


def _row(model: str, dataset: str, axis: str, frame: pl.DataFrame, resamples: int) -> dict:
    row: dict[str, Any] = {"model": model, "dataset": dataset, "axis": axis}
    if frame.is_empty():
        return {**row, "missing_reason": "no sampled pair with every sample answered"}
    prompt = (frame["dataset"] + "\x1f" + frame["prompt_id"]).to_list()
    cell = (frame["dataset"] + "\x1f" + frame["prompt_id"] + "\x1f" + frame["cell"]).to_list()
    found = decompose(
        prompt, cell, frame["score"].to_numpy(), stable_seed(model, dataset, axis), resamples
    )
    row.update(asdict(found), truncated=",".join(found.truncated) or None)
    del row["component_ci"]  # not a column: each component's interval is two, set below
    for name in COMPONENTS:
        low, high = found.component_ci.get(name, (None, None))
        row[f"s2_{name}_ci_low"], row[f"s2_{name}_ci_high"] = low, high
    return row


def variance_components(tests: pl.DataFrame, resamples: int = DEFAULT_RESAMPLES) -> pl.DataFrame:
    """The table of every model in ``tests`` (sampling_tests), per dataset and pooled."""
    rows: list[dict[str, Any]] = []
    for model in sorted(tests["model"].unique().to_list()):
        mine = tests.filter(pl.col("model") == model)
        datasets = sorted(mine["dataset"].unique().to_list())
        for axis in axes_for(mine["family"].unique().to_list()):
            name = axis.name
            for dataset in [*datasets, POOLED]:
                base = {"model": model, "dataset": dataset, "axis": name}
                if name not in DECOMPOSED:
                    reason = (
                        CROSSED
                        if name in TEACHER_FORCED
                        else NO_SAMPLES
                        if name in KEPT_AXES
                        else NO_RULE
                    )
                    rows.append({**base, "missing_reason": reason})
                    continue
                part = mine.filter(pl.col("axis") == name)
                if dataset != POOLED:
                    part = part.filter(pl.col("dataset") == dataset)
                rows.append(_row(model, dataset, name, _long(part), resamples))
    return from_rows(rows, VARIANCE_COMPONENTS).sort(["model", "dataset", "axis"])
