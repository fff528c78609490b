"""The Parquet schema of every stage artifact, declared once.

Users query these files with polars or DuckDB: later versions may add columns, never rename
these. Column order here is the order on disk.
"""

from __future__ import annotations

from typing import Any

import polars as pl

# A column name -> polars dtype mapping (dtype classes or instances).
Schema = dict[str, Any]

VARIANT_KEY: Schema = {
    "family": pl.String,
    "subtype": pl.String,
    "strength": pl.Float64,
    "position": pl.String,
}

PROMPTS: Schema = {
    "dataset": pl.String,
    "prompt_id": pl.String,
    "prompt": pl.String,
    "references": pl.List(pl.String),
    "source": pl.String,  # file (or hub id) and row the prompt came from
}

VARIANTS: Schema = {
    "dataset": pl.String,
    "prompt_id": pl.String,
    "variant_id": pl.String,
    **VARIANT_KEY,
    "text": pl.String,
    "seed": pl.Int64,
    "semantic_score": pl.Float64,
    "kept": pl.Boolean,
    "reject_reason": pl.String,
    "word_ratio": pl.Float64,  # words(variant) / words(base prompt)
}

GENERATIONS: Schema = {
    "model": pl.String,
    "dataset": pl.String,
    "prompt_id": pl.String,
    "variant_id": pl.String,
    **VARIANT_KEY,
    "prompt_text": pl.String,
    "response_text": pl.String,  # raw decoded response, reasoning block included
    # the answer compared by BLEU, BERTScore and mirroring: response_text after its reasoning
    # block (axes/reasoning.py); null when that block never closed or the generation failed
    "answer_text": pl.String,
    "response_token_ids": pl.List(pl.Int32),
    "finish_reason": pl.String,
    "failure_reason": pl.String,  # typed reason when no valid answer came back; text is null
    "engine": pl.String,  # JSON: backend, library versions, device, determinism mode
}

ANALYSIS: Schema = {
    "model": pl.String,
    "dataset": pl.String,
    "prompt_id": pl.String,
    "variant_id": pl.String,
    # per-layer cos against the base at the rendered prompt's last token (where the answer
    # starts): the Act axis
    "layer_cosines": pl.List(pl.Float64),
    # the same at the last token of the user's own text (diagnostic); null when the backend
    # gives no such hidden states
    "layer_cosines_user": pl.List(pl.Float64),
    "act_cos_mean": pl.Float64,
    "logprob": pl.Float64,
    "mean_entropy": pl.Float64,
    "n_response_tokens": pl.Int32,
    "missing_reason": pl.String,
}

PAIRS: Schema = {
    "model": pl.String,
    "dataset": pl.String,
    "prompt_id": pl.String,
    "variant_id": pl.String,
    "bleu": pl.Float64,
    "bert_f1": pl.Float64,
}

MIRRORING: Schema = {
    "model": pl.String,
    "dataset": pl.String,
    "prompt_id": pl.String,
    "variant_id": pl.String,
    "m_variant": pl.Int8,
    "m_base": pl.Int8,
    "missing_reason": pl.String,
    "detector": pl.String,  # "rules" or "judge:<identity>" (register rows with a judge)
}

DELTAS: Schema = {
    "model": pl.String,
    "dataset": pl.String,
    "prompt_id": pl.String,
    "variant_id": pl.String,
    **VARIANT_KEY,
    "axis": pl.String,
    "delta": pl.Float64,
    "delta_norm": pl.Float64,
    "missing_reason": pl.String,
}

SCORES: Schema = {
    "model": pl.String,
    "dataset": pl.String,
    "prompt_id": pl.String,
    "axis": pl.String,
    "s": pl.Float64,
    "n_variants": pl.Int32,
    "missing_reason": pl.String,
    "floor": pl.Float64,  # |delta_norm| of this prompt's replay (noise floor); null if none
}

SUMMARY: Schema = {
    "model": pl.String,
    "dataset": pl.String,
    "axis": pl.String,
    "sgs": pl.Float64,
    "n": pl.Int32,
    "t_stat": pl.Float64,
    "p_eps_0_01": pl.Float64,
    "p_eps_0_05": pl.Float64,
    "p_eps_0_10": pl.Float64,
    "missing_reason": pl.String,
    "ci_low": pl.Float64,  # 95% bootstrap interval of sgs (prompts resampled)
    "ci_high": pl.Float64,
    "p_holm": pl.Float64,  # p_reference adjusted over all rows (Holm)
    "p_bh": pl.Float64,  # p_reference adjusted over all rows (Benjamini-Hochberg)
    "mde": pl.Float64,  # smallest excess over eps detectable with 80% power at n
    "floor": pl.Float64,  # mean per-prompt noise floor (replay |delta_norm|)
    "p_floor": pl.Float64,  # one-sided paired t-test of s - floor > 0 over prompts
    "reference": pl.String,  # what p_reference tests against: "eps 0.05" or "noise floor"
    "p_reference": pl.Float64,  # the p-value behind the marks, Holm and BH
}


REFERENCE_LIKELIHOOD: Schema = {
    "model": pl.String,
    "dataset": pl.String,
    "prompt_id": pl.String,
    "n_tokens": pl.Int32,  # tokens of the first reference answer
    "logprob": pl.Float64,  # log p(reference | prompt), summed
    "logprob_per_token": pl.Float64,
    "missing_reason": pl.String,
}

CHECKPOINT_SCORES: Schema = {
    "family": pl.String,
    "position": pl.Int32,  # order of the checkpoint in its family
    "model": pl.String,
    "dataset": pl.String,
    "metric": pl.String,  # accuracy, ref_loglik, sgs_<axis>
    "value": pl.Float64,
    "n": pl.Int32,  # prompts behind the value
    "missing_reason": pl.String,
}

PARTIAL_CORRELATIONS: Schema = {
    "family": pl.String,
    "metric": pl.String,
    "ood_a": pl.String,
    "ood_b": pl.String,
    "r": pl.Float64,  # partial correlation across checkpoints, controlling for the ID score
    "p_value": pl.Float64,
    "n": pl.Int32,  # checkpoints with all three scores
    "missing_reason": pl.String,
}

SIGN_AGREEMENT: Schema = {
    "metric": pl.String,
    "family_a": pl.String,
    "family_b": pl.String,
    "pairs_compared": pl.Int32,  # OOD pairs with a non-zero r in both families
    "agreeing": pl.Int32,
    "share": pl.Float64,
}


def conform(frame: pl.DataFrame, schema: Schema) -> pl.DataFrame:
    """Cast to the declared schema, in declared order; a missing column is an error."""
    missing = [c for c in schema if c not in frame.columns]
    if missing:
        raise ValueError(f"artifact is missing columns {missing}")
    return frame.select([pl.col(c).cast(t) for c, t in schema.items()])


def empty(schema: Schema) -> pl.DataFrame:
    return pl.DataFrame(schema=schema)
