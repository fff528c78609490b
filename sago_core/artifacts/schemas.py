"""The Parquet schema of every stage artifact, declared once.

Users query these files with polars or DuckDB: later versions may add columns, never rename
these. Column order here is the order on disk.
"""

from __future__ import annotations

from typing import Any

import polars as pl

from sago_core.vocabulary import AXES

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
    # why the prompt has no reference answers (null: it has some); data/prompt.py
    "reference_missing_reason": pl.String,
}


def prompts_schema(frame: pl.DataFrame) -> Schema:
    """prompts.parquet's schema for ``frame``: ``PROMPTS``, plus, for safety datasets
    (data/safety.py), each prompt's ``kind`` (harmful / harmless; null where its dataset
    says none) and its set's own ``category``, carried only when a prompt has a kind, so
    every other run's prompts.parquet is what it was."""
    if "kind" not in frame.columns:
        return PROMPTS
    return {**PROMPTS, "kind": pl.String, "category": pl.String}


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
    # JSON: backend, library versions, device, determinism mode; for an API answer also
    # what the provider says answered it (served_model, system_fingerprint, served_headers)
    "engine": pl.String,
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

# Sampling, generation.samples K > 1: every prompt text (base, variants, replay)
# answered K times; one row per sample, sample 0 being the row of generations.parquet.
# ``seed``: the sample's own seed (sample_seeds.sample_seed).
SAMPLES: Schema = {**GENERATIONS, "sample": pl.Int32, "seed": pl.Int64}

# Teacher forcing at K > 1: base sample ``sample``'s answer scored under each prompt text of
# its prompt (the base and every variant); sample 0 is the row of analysis.parquet.
SAMPLE_ANALYSIS: Schema = {
    "model": pl.String,
    "dataset": pl.String,
    "prompt_id": pl.String,
    "variant_id": pl.String,
    "sample": pl.Int32,  # which base sample's answer was scored
    "logprob": pl.Float64,
    "mean_entropy": pl.Float64,
    "n_response_tokens": pl.Int32,
    "missing_reason": pl.String,
}

# POSIX's full matrix (``RunConfig.posix_matrix``, off by default; stages/posix_matrix.py):
# one row per (instance, prompt text x_i, answer y_j) over the instance's prompt texts
# (capped): log P(y_j | x_i), y_j being the answer the model gave to prompt text j.
POSIX_MATRIX: Schema = {
    "model": pl.String,
    "dataset": pl.String,
    "prompt_id": pl.String,
    "prompt_variant_id": pl.String,  # x_i: the prompt text the answer is scored under
    "prompt_family": pl.String,
    "answer_variant_id": pl.String,  # y_j: whose answer is scored
    "answer_family": pl.String,
    "logprob": pl.Float64,  # log P(y_j | x_i), summed over y_j's tokens
    "n_response_tokens": pl.Int32,  # L_{y_j}
    "n_prompts": pl.Int32,  # the instance's prompt texts with an answer, before the cap
    "missing_reason": pl.String,
}

# Sampling at K > 1: one row per (model, prompt, variant, axis) of the sampled
# axes (sampling/axis_tests.py). ``excess`` is in the axis's normalised units (delta_norm's):
# text axes E = D - (W_base + W_variant) / 2 of d = 1 - similarity / R; mr the share of
# (variant sample, base sample) pairs the detector flags minus the share of ordered pairs of
# distinct base samples; prob and ent the mean over base samples under the variant prompt
# minus under the base prompt, over R. The flip and spread columns describe the pair, the
# same on each of its axis rows.
SAMPLING_TESTS: Schema = {
    "model": pl.String,
    "dataset": pl.String,
    "prompt_id": pl.String,
    "variant_id": pl.String,
    **VARIANT_KEY,
    "axis": pl.String,
    "k_variant": pl.Int32,  # samples of the variant with an answer (text, mr) or value
    "k_base": pl.Int32,
    "cross": pl.Float64,  # D: mean d(variant sample, base sample) over the K x K pairs
    "within_base": pl.Float64,  # W_base: mean d over ordered pairs of distinct base samples
    "within_variant": pl.Float64,  # W_variant
    "mean_variant": pl.Float64,  # mr: flagged share of cross pairs; prob/ent: raw mean
    "mean_base": pl.Float64,  # mr: flagged share of base pairs; prob/ent: raw mean
    "excess": pl.Float64,
    "missing_reason": pl.String,  # why excess is null
    "p_value": pl.Float64,  # permutation test (sampling/permutation.py)
    "p_method": pl.String,  # exact, monte_carlo (E, pooled relabelling) or sign_flip_*
    "min_p": pl.Float64,  # the smallest p these samples could give
    "p_missing_reason": pl.String,
    # per variant sample: its mean d (text axes) or flagged share (mr) against the held-out
    # reference half of the base samples (the last K - K // 2); per base sample of the first
    # half: the same against that reference (axis_tests.cell_scores; variance.py reads both)
    "sample_scores": pl.List(pl.Float64),
    "base_sample_scores": pl.List(pl.Float64),
    "share_right_variant": pl.Float64,  # share of variant samples right per the references
    "share_right_base": pl.Float64,
    "flip_right_to_wrong": pl.Float64,  # over (base sample, variant sample) pairs
    "flip_wrong_to_right": pl.Float64,
    "self_flip": pl.Float64,  # base sample i right, base sample j != i wrong (either way)
    "flip_right_to_wrong_excess": pl.Float64,  # variant rate minus the base's self-flip rate
    "flip_wrong_to_right_excess": pl.Float64,
    "flip_missing_reason": pl.String,
    "clusters_base": pl.Int32,  # distinct meanings among the base samples (sampling/spread.py)
    "clusters_variant": pl.Int32,
    "entropy_base": pl.Float64,  # of the cluster sizes, nats
    "entropy_variant": pl.Float64,
    "spread_missing_reason": pl.String,
}

# Per (model, dataset incl. __pooled__, axis): the nested prompt / variant / sample
# decomposition of the per-sample scores (sampling/variance.py) and the prompt-induced share
# s2_variant / (s2_variant + s2_sample) with its bootstrap interval over prompts.
VARIANCE_COMPONENTS: Schema = {
    "model": pl.String,
    "dataset": pl.String,
    "axis": pl.String,
    "n_prompts": pl.Int32,
    "n_variants": pl.Int32,  # (prompt, prompt text) cells, the base's included
    "n_samples": pl.Int32,
    "s2_prompt": pl.Float64,
    "s2_variant": pl.Float64,
    "s2_sample": pl.Float64,
    "share": pl.Float64,
    "share_ci_low": pl.Float64,
    "share_ci_high": pl.Float64,
    **{
        f"s2_{component}_ci_{side}": pl.Float64
        for component in ("prompt", "variant", "sample")
        for side in ("low", "high")
    },
    "truncated": pl.String,  # components whose negative estimate was set to 0, comma-separated
    "missing_reason": pl.String,
    "ci_missing_reason": pl.String,
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

# A budgeted run (sago_core/budget/): every cell of the grid, whether and in which round it
# was asked, and its inclusion probability under the final counts (0 when not asked).
BUDGET_CELLS: Schema = {
    "dataset": pl.String,
    "prompt_id": pl.String,
    "variant_id": pl.String,
    "asked": pl.Boolean,
    "round": pl.Int32,  # the round that first asked it; null when never asked
    "inclusion_probability": pl.Float64,
}

# Per (model, prompt, axis): the design-based mean square and the corrected root (``s``, the
# score scores.parquet carries in a budgeted run) with their design variances.
BUDGET_PROMPTS: Schema = {
    "model": pl.String,
    "dataset": pl.String,
    "prompt_id": pl.String,
    "axis": pl.String,
    "s": pl.Float64,
    "s_var": pl.Float64,
    "root": pl.Float64,
    "ms": pl.Float64,
    "ms_var": pl.Float64,
}

# Per (model, dataset or pooled, axis): the estimate of the full grid's SGS, its design
# variance and 95% half-width; the target half-width where one was set.
BUDGET_ESTIMATES: Schema = {
    "model": pl.String,
    "dataset": pl.String,
    "axis": pl.String,
    "sgs": pl.Float64,
    "variance": pl.Float64,
    "half_width": pl.Float64,
    "prompts": pl.Int32,
    "target": pl.Float64,
    "shared_variance": pl.Float64,
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
    "p_reference": pl.Float64,  # the p-value Holm and BH adjust (the marks read p_holm)
    "ci_missing_reason": pl.String,  # why ci_low/ci_high are null (too few prompts)
}

# A temperature sweep's table, in the sweep's own folder: per (model, temperature,
# axis, family incl. __all__), datasets pooled (report/sweep/page.py).
SWEEP: Schema = {
    "model": pl.String,
    "temperature": pl.Float64,
    "samples": pl.Int32,  # K of the arm (1 at T = 0)
    "run_id": pl.String,  # the arm's own run folder
    "axis": pl.String,
    "family": pl.String,  # __all__ = every variant family
    "measure": pl.String,  # "sgs_excess" at T > 0 with K > 1, else "sgs"
    "sgs": pl.Float64,
    "ci_low": pl.Float64,  # 95% bootstrap interval over prompts (scoring.summary)
    "ci_high": pl.Float64,
    "n": pl.Int32,  # prompts with a score
    "missing_reason": pl.String,
    "ci_missing_reason": pl.String,
    "prompt_share": pl.Float64,  # s2_variant / (s2_variant + s2_sample)
    "prompt_share_ci_low": pl.Float64,
    "prompt_share_ci_high": pl.Float64,
    "prompt_share_missing_reason": pl.String,
    "prompt_share_ci_missing_reason": pl.String,
}

# sago compare A B --paired (statistics/paired.py): per (dataset incl. __pooled__, axis), on
# the prompts both runs share; differences are b minus a, on s.
PAIRED: Schema = {
    "model_a": pl.String,
    "model_b": pl.String,
    "dataset": pl.String,
    "axis": pl.String,
    "n": pl.Int32,  # prompts with s on both sides
    "mean_diff": pl.Float64,  # mean of s_b - s_a over all shared prompts: what the tests test
    "p_paired_t": pl.Float64,  # two-sided paired t-test
    "p_wilcoxon": pl.Float64,  # two-sided Wilcoxon signed-rank test
    "ci_low": pl.Float64,  # 95% paired bootstrap interval of mean_diff (prompts resampled)
    "ci_high": pl.Float64,
    "margin": pl.Float64,  # equivalence margin, SGS units
    "p_tost": pl.Float64,  # two one-sided tests of H0: |E[s_b - s_a]| >= margin
    "verdict": pl.String,  # equivalent, b_worse, b_better, inconclusive (from Holm p-values)
    "p_holm": pl.Float64,  # p_paired_t adjusted (Holm) within the row's correction family
    "p_bh": pl.Float64,  # p_paired_t adjusted (Benjamini-Hochberg) within that family
    "p_tost_holm": pl.Float64,  # p_tost adjusted (Holm) within that family
    "correction_family": pl.String,  # "datasets" (per-dataset rows) or "pooled"
    "run_a": pl.String,
    "run_b": pl.String,
    "missing_reason": pl.String,  # why there is no test (fewer than two shared prompts)
    # pooled row: the equal-weight mean over datasets of their mean s_b - s_a (the
    # difference of pooled SGS); shown beside mean_diff, labelled; equals it per dataset
    "mean_diff_datasets": pl.Float64,
    "ci_missing_reason": pl.String,  # why ci_low/ci_high are null (too few prompts)
    "design": pl.String,  # full grid, or the budgeted cells each side asked (paired_design)
    "alpha": pl.Float64,  # the level the verdict is read at (0.05; a watch's rung: its share)
}

# A scored file that asks the base again beside each variant pairs them itself: the base
# sample (``base`` or a replay id of the same prompt) a variant's answer is compared with;
# null: the base row. Only the generations of `sago score` carry it (stages/pairs.py).
PAIRED_BASE = "paired_base"


def paired_generations_schema() -> Schema:
    """A scored run's ``generations.parquet``: the generations schema plus ``paired_base``
    (a function, not a constant: the file is ``generations.parquet``, documented once)."""
    return {**GENERATIONS, PAIRED_BASE: pl.String}


# `sago score`: the external file's rows, validated (stages/external_rows.parquet)
EXTERNAL_ROWS: Schema = {
    **paired_generations_schema(),
    "references": pl.List(pl.String),
    "source": pl.String,  # file and row the response came from
}


# Per-layer profiles of the scoring pass' cosines (statistics/layer_profiles.py): one row per
# (model, family, subtype, strength, read_position, layer). subtype "__pooled__" with a null
# strength: the family's profile over all its subtypes and strengths.
LAYER_PROFILES: Schema = {
    "model": pl.String,
    "family": pl.String,
    "subtype": pl.String,
    "strength": pl.Float64,
    "read_position": pl.String,  # generation_start (the Act axis) or prompt_end (user text)
    "layer": pl.Int32,  # 1..L
    "mean_one_minus_cos": pl.Float64,
    "ci_low": pl.Float64,  # 95% bootstrap interval (variants resampled, seeded)
    "ci_high": pl.Float64,
    "n": pl.Int32,  # variants behind the mean
    "onset_layer": pl.Int32,  # first layer >= ONSET_FRACTION x the profile's maximum
    "missing_reason": pl.String,  # why onset_layer (or the interval) is null
}

# Activation patching (stages/patching.py): one row per (sampled variant, patched layer).
PATCHING: Schema = {
    "model": pl.String,
    "dataset": pl.String,
    "prompt_id": pl.String,
    "variant_id": pl.String,
    "family": pl.String,
    "subtype": pl.String,
    "strength": pl.Float64,
    "layer": pl.Int32,  # 1..L: the layer whose output at the last prompt token was replaced
    # (logp_patched - logp_variant) / (logp_base - logp_variant) of the base answer
    "recovery": pl.Float64,
    # KL(base || patched) of the first answer token's next-token distribution (nats)
    "kl_first_token": pl.Float64,
    "kl_variant": pl.Float64,  # the same for the unpatched variant (what patching can undo)
    "logprob_base": pl.Float64,
    "logprob_variant": pl.Float64,
    "logprob_patched": pl.Float64,
    "missing_reason": pl.String,
    "gap": pl.Float64,  # logprob_base - logprob_variant (nats): the recovery's denominator
    "relative_gap": pl.Float64,  # |gap| / max(|logprob_base|, 1): the guard's measure
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
    "series": pl.String,
    "position": pl.Int32,  # order of the checkpoint in its series
    "model": pl.String,
    "dataset": pl.String,
    "metric": pl.String,  # accuracy, ref_loglik, sgs_<axis>
    "value": pl.Float64,
    "n": pl.Int32,  # prompts behind the value
    "missing_reason": pl.String,
}

PARTIAL_CORRELATIONS: Schema = {
    "series": pl.String,
    "metric": pl.String,
    "method": pl.String,  # ID adjustment: linear or spline
    "ood_a": pl.String,
    "ood_b": pl.String,
    "r": pl.Float64,  # partial correlation across checkpoints, controlling for the ID score
    "p_value": pl.Float64,  # two-sided t-test with df degrees of freedom
    "df": pl.Int32,
    "p_perm": pl.Float64,  # block permutation in checkpoint order
    "perm_reason": pl.String,  # why p_perm is NA
    "p_holm": pl.Float64,  # corrected over the pairs of one series, metric and method
    "p_bh": pl.Float64,
    "significant": pl.Boolean,  # p_holm <= alpha
    "n": pl.Int32,  # checkpoints with all three scores
    "missing_reason": pl.String,
}

SIGN_AGREEMENT: Schema = {
    "metric": pl.String,
    "method": pl.String,
    "series_a": pl.String,
    "series_b": pl.String,
    "dataset_pairs": pl.Int32,  # OOD dataset pairs with a non-zero r in both series
    "agreeing": pl.Int32,
    "share": pl.Float64,
    "significant_pairs": pl.Int32,  # of those, significant (Holm) in both series
    "significant_agreeing": pl.Int32,
    "significant_share": pl.Float64,
}

# Beyond the mean: instances, tails, axis structure.


def instances_schema() -> Schema:
    """``instances.parquet``: one row per variant (the replay excluded): texts and every
    registered axis' delta_norm side by side (``d_<axis>``, ``reason_<axis>``, in the axis
    registry's order), graded mirroring, and whether each answer is right per the reference
    answers (null: no references or no answer)."""
    return {
        "model": pl.String,
        "dataset": pl.String,
        "prompt_id": pl.String,
        "variant_id": pl.String,
        **VARIANT_KEY,
        "base_prompt": pl.String,
        "variant_prompt": pl.String,
        "base_answer": pl.String,
        "variant_answer": pl.String,
        **{f"d_{axis}": pl.Float64 for axis in AXES},
        "mr_intensity": pl.Float64,  # graded mirroring in [0, 1] (axes/mirroring_intensity.py)
        **{f"reason_{axis}": pl.String for axis in AXES},  # why d_<axis> is null
        "mr_intensity_reason": pl.String,
        "base_correct": pl.Boolean,
        "variant_correct": pl.Boolean,
        "correct_missing_reason": pl.String,  # why base_ or variant_correct is null
    }


def __getattr__(name: str) -> Schema:
    """``INSTANCES``: ``instances_schema()`` as the axes registered at the time of asking."""
    if name == "INSTANCES":
        return instances_schema()
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


TAIL_QUANTILES: tuple[str, ...] = ("q50", "q90", "q99")
FLIPS: tuple[str, ...] = ("flip_right_to_wrong", "flip_wrong_to_right")
TAILS: Schema = {
    "model": pl.String,
    "dataset": pl.String,  # __pooled__ = all prompts
    "axis": pl.String,
    "family": pl.String,  # __all__ = every family
    "n": pl.Int32,  # kept variants with a measured delta_norm (replay excluded)
    **{q: pl.Float64 for q in TAIL_QUANTILES},
    "max": pl.Float64,
    "share_over_0_01": pl.Float64,
    "share_over_0_05": pl.Float64,
    "share_over_0_10": pl.Float64,
    # share of judged variants (at K > 1: the mean flip beyond the base's self-flip rate,
    # which can be negative); null: no references
    **{flip: pl.Float64 for flip in FLIPS},
    **{
        f"ci_{side}_{stat}": pl.Float64
        for stat in (*TAIL_QUANTILES, *FLIPS)
        for side in ("low", "high")
    },
    "n_prompts": pl.Int32,
    "n_judged": pl.Int32,  # variants whose base and variant answers both have a verdict
    "missing_reason": pl.String,  # why the quantiles and shares are null
    "flip_missing_reason": pl.String,  # why the flip rates are null
    "ci_missing_reason": pl.String,  # why the intervals are null
}

AXIS_STRUCTURE: Schema = {
    "model": pl.String,
    "axis_a": pl.String,
    "axis_b": pl.String,
    "spearman_rho": pl.Float64,  # per-prompt s, pooled over datasets
    "p_value": pl.Float64,
    "n": pl.Int32,  # prompts with both scores
    "redundant": pl.Boolean,  # |rho| > REDUNDANT_RHO and p < 0.05
    "missing_reason": pl.String,
}

AXIS_PCA: Schema = {
    "model": pl.String,
    "pca_component": pl.Int32,  # 1 = largest variance
    "pca_variance_explained": pl.Float64,  # share of the total (standardised) variance
    "axis": pl.String,
    "pca_loading": pl.Float64,  # the axis's weight in this component (unit-norm eigenvector)
    "n": pl.Int32,  # prompts with every axis scored
    "missing_reason": pl.String,
}


# Peers' prompt-sensitivity indices from the run's own artifacts (sago_core/peer_metrics/):
# one row per (model, dataset incl. __pooled__, family incl. __all__, index).
PEER_METRICS: Schema = {
    "model": pl.String,
    "dataset": pl.String,  # __pooled__ = every dataset's instances together
    "family": pl.String,  # __all__ = every variant family; else the base and that family
    # pss_correct, pss_bert_to_base (ProSA's PSS formula on BERTScore F1 to the base answer:
    # not ProSA's PSS; "pss_bertscore" in older runs), posix, pdr, max_p, avg_p, cps
    "index": pl.String,
    "value": pl.Float64,  # null: not computable, missing_reason says why
    "n": pl.Int32,  # instances (PSS, POSIX) or prompt templates (PDR, MaxP, AvgP, CPS) behind it
    "coverage": pl.String,  # null: the peer's definition in full; else which part was computed
    "source": pl.String,  # the paper defining the index
    "missing_reason": pl.String,
}


def conform(frame: pl.DataFrame, schema: Schema) -> pl.DataFrame:
    """Cast to the declared schema, in declared order; a missing column is an error."""
    missing = [c for c in schema if c not in frame.columns]
    if missing:
        raise ValueError(f"artifact is missing columns {missing}")
    return frame.select([pl.col(c).cast(t) for c, t in schema.items()])


def empty(schema: Schema) -> pl.DataFrame:
    return pl.DataFrame(schema=schema)
