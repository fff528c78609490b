"""From validated external rows to the artifacts ``sago run`` writes: prompts, variants (all
kept: another tool chose them), per-model generations, and, without a model, an analysis
table whose Act/Prob/Ent are missing with ``NO_MODEL``."""

from __future__ import annotations

import json
from collections.abc import Callable

import polars as pl

from sago_core.artifacts.schemas import (
    ANALYSIS,
    EXTERNAL_ROWS,
    PAIRED_BASE,
    PROMPTS,
    VARIANTS,
    conform,
    paired_generations_schema,
)
from sago_core.axes.reasoning import answer_text
from sago_core.external.schema import ExternalRow
from sago_core.vocabulary import BASE_VARIANT_ID, VARIANT_COLUMNS

NO_MODEL = "external generations: no model given"
EncodeFn = Callable[[str], tuple[int, ...] | None]


def rows_frame(rows: list[ExternalRow], file_name: str, file_sha256: str) -> pl.DataFrame:
    """The validated rows in the generations schema (+ references, source)."""
    records = []
    for r in rows:
        v = r.variant
        engine = {
            "backend": "external",
            "file": file_name,
            "sha256": file_sha256,
            "token_ids": "given" if r.response_token_ids is not None else "none",
        }
        records.append(
            {
                "model": r.model,
                "dataset": r.dataset,
                "prompt_id": r.prompt_id,
                "variant_id": r.variant_id,
                **{c: getattr(v, c) if v else None for c in VARIANT_COLUMNS},
                "prompt_text": r.prompt_text,
                "response_text": r.response_text,
                "answer_text": answer_text(r.response_text)
                if r.response_text is not None
                else None,
                "response_token_ids": list(r.response_token_ids)
                if r.response_token_ids is not None
                else None,
                "finish_reason": None,
                "failure_reason": r.failure_reason,
                "engine": json.dumps(engine, sort_keys=True),
                "references": list(r.references),
                "source": r.source,
                PAIRED_BASE: r.paired_base,
            }
        )
    schema = {
        k: (pl.List(pl.Int32) if k == "response_token_ids" else t) for k, t in EXTERNAL_ROWS.items()
    }
    return conform(pl.DataFrame(records, schema=schema), EXTERNAL_ROWS)


NO_EXTERNAL_REFERENCES = "the external file gives no reference answers for this prompt"


def prompts_frame(table: pl.DataFrame) -> pl.DataFrame:
    """One row per (dataset, prompt): the base prompt, the references any of its rows gave."""
    base = table.filter(pl.col("variant_id") == BASE_VARIANT_ID)
    refs = (
        table.explode("references")
        .drop_nulls("references")
        .group_by("dataset", "prompt_id", maintain_order=True)
        .agg(pl.col("references").unique(maintain_order=True))
    )
    frame = (
        base.unique(["dataset", "prompt_id"], keep="first", maintain_order=True)
        .select("dataset", "prompt_id", pl.col("prompt_text").alias("prompt"), "source")
        .join(refs, on=["dataset", "prompt_id"], how="left")
        .with_columns(pl.col("references").fill_null(pl.lit([], dtype=pl.List(pl.String))))
        .with_columns(
            pl.when(pl.col("references").list.len() == 0)
            .then(pl.lit(NO_EXTERNAL_REFERENCES))
            .alias("reference_missing_reason")
        )
        .sort("dataset", "prompt_id")
    )
    return conform(frame, PROMPTS)


def variants_frame(table: pl.DataFrame) -> pl.DataFrame:
    """Every variant the file holds (kept: the other tool chose them), one per id."""
    base = (
        table.filter(pl.col("variant_id") == BASE_VARIANT_ID)
        .select("dataset", "prompt_id", pl.col("prompt_text").alias("base_text"))
        .unique(["dataset", "prompt_id"], keep="first")
    )
    words = pl.col("text").str.split(" ").list.len()
    frame = (
        table.filter(pl.col("variant_id") != BASE_VARIANT_ID)
        .unique(["dataset", "prompt_id", "variant_id"], keep="first", maintain_order=True)
        .join(base, on=["dataset", "prompt_id"], how="left")
        .rename({"prompt_text": "text"})
        .with_columns(
            pl.lit(None, pl.Int64).alias("seed"),
            pl.lit(None, pl.Float64).alias("semantic_score"),
            pl.lit(True).alias("kept"),
            pl.lit(None, pl.String).alias("reject_reason"),
            (words / pl.col("base_text").str.split(" ").list.len()).alias("word_ratio"),
        )
        .sort("dataset", "prompt_id", "variant_id")
    )
    return conform(frame, VARIANTS)


def model_generations(
    table: pl.DataFrame, model: str, encode: EncodeFn | None, who: str | None
) -> pl.DataFrame:
    """One model's rows as generations; with ``encode``, a base response without token ids
    is tokenised once (recorded in ``engine`` as ``tokenised by <who>``)."""
    frame = table.filter(pl.col("model") == model)
    if encode is not None:
        ids, engines = [], []
        for row in frame.iter_rows(named=True):
            engine = json.loads(row["engine"])
            token_ids = row["response_token_ids"]
            if (
                token_ids is None
                and row["variant_id"] == BASE_VARIANT_ID
                and row["response_text"] is not None
            ):
                token_ids = list(encode(row["response_text"]) or []) or None
                engine["token_ids"] = f"tokenised by {who}"
            ids.append(token_ids)
            engines.append(json.dumps(engine, sort_keys=True))
        frame = frame.with_columns(
            pl.Series("response_token_ids", ids, dtype=pl.List(pl.Int32)),
            pl.Series("engine", engines, dtype=pl.String),
        )
    # in the file's order (pair batches as the source had them), each variant's paired base kept
    return conform(frame, paired_generations_schema())


def unmeasured_analysis(generations: pl.DataFrame, reason: str = NO_MODEL) -> pl.DataFrame:
    """The analysis table of generations no model scored: every measurement null, with
    ``reason`` (deltas give Act, Prob and Ent that reason)."""
    frame = generations.select("model", "dataset", "prompt_id", "variant_id").with_columns(
        pl.lit(None, pl.List(pl.Float64)).alias("layer_cosines"),
        pl.lit(None, pl.List(pl.Float64)).alias("layer_cosines_user"),
        pl.lit(None, pl.Float64).alias("act_cos_mean"),
        pl.lit(None, pl.Float64).alias("logprob"),
        pl.lit(None, pl.Float64).alias("mean_entropy"),
        pl.lit(0, pl.Int32).alias("n_response_tokens"),
        pl.lit(reason).alias("missing_reason"),
    )
    return conform(frame, ANALYSIS)
