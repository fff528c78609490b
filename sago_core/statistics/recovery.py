"""Activation-patching recovery: when one variant's recovery is defined, and how the
recoveries of many variants are summed up per layer.

One variant at layer l: ``recovery = (logp_patched - logp_variant) / (logp_base -
logp_variant)``, the share of the change in log p(base answer) (the gap, ``logp_base -
logp_variant``, nats) that the base state at layer l restores. A ratio with a tiny gap as
denominator is a number without meaning: a variant that moves log p by 2e-4 nats and a
patch that moves it by 0.02 give a recovery of 100.

Guard (``recovery_refusal``): a recovery is defined only when
|gap| >= ``MIN_RELATIVE_GAP`` x max(|logp_base|, ``SCALE_FLOOR_NATS``), i.e. when the
variant moves log p(base answer) by at least 1% of that log-probability's own size (and by
at least 0.01 nats when the base answer is near certain). The numerical error of a summed
log-probability (float32 / bf16 rounding, batch composition) grows with its size, so the
gap is measured against it: at the guard, an error of 1e-4 of the scale moves a recovery
by at most 0.01. ``relative_gap`` = |gap| / max(|logp_base|, SCALE_FLOOR_NATS) is kept
beside every per-variant recovery.

Per (model, family, layer), over the variants whose recovery is defined
(``recovery_by_layer``):

- ``ratio_of_sums`` = sum(sign(gap) x (logp_patched - logp_variant)) / sum(|gap|): the share
  of the family's total change that the patch restores, i.e. the mean of the variants'
  recoveries weighted by their |gap|, so a variant with a small gap weighs little;
- ``median`` of the variants' recoveries;
- both with a 95% bootstrap band over prompts (a prompt's variants resampled together;
  both figures pool the variants of every dataset, so prompts are drawn from all of the
  family's prompts in one stratum, ``tails.prompt_weights``, not within each dataset,
  where a dataset of 1 or 2 prompts would add no or half its spread; the expanded
  percentiles of ``intervals.expanded_tail``), drawn from at least ``intervals.MIN_PROMPTS``
  prompts (else null, ``ci_missing_reason``); one draw per (model, family), the same at
  every layer;
- ``missing_reason``: at a layer where no variant has a defined recovery, why both figures
  are null (``NO_CHANGE`` when variants were measured but none passed the guard, the
  patching rows' own reasons, else ``NO_LOGPROB``, when none has finite
  log-probabilities); null where the figures are drawn.

The mean of per-variant ratios is not reported: one variant with a tiny gap moves it
arbitrarily far. Per-variant ratios stay in patching.parquet, with their gap beside them.
"""

from __future__ import annotations

import numpy as np
import polars as pl

from sago_core.statistics.intervals import (
    DEFAULT_RESAMPLES,
    expanded_tail,
    interval_refusal,
    stable_seed,
)
from sago_core.statistics.tails import ALL_FAMILIES, prompt_weights, weighted_quantiles

MIN_RELATIVE_GAP = 0.01
SCALE_FLOOR_NATS = 1.0
LEVEL = 0.95
NO_CHANGE = (
    f"no change to restore: |logp_base - logp_variant| < {MIN_RELATIVE_GAP:g} x "
    f"max(|logp_base|, {SCALE_FLOOR_NATS:g} nat)"
)
NO_LOGPROB = "no variant with finite log-probabilities (base, variant, patched) at this layer"
RECOVERY_COLUMNS = (
    "ratio_of_sums",
    "ci_low",
    "ci_high",
    "median",
    "median_ci_low",
    "median_ci_high",
)


def gap_scale(logp_base: float) -> float:
    """The size a gap is measured against (nats)."""
    return max(abs(logp_base), SCALE_FLOOR_NATS)


def relative_gap(logp_base: float, logp_variant: float) -> float | None:
    """|logp_base - logp_variant| / gap_scale(logp_base); None when either is not finite."""
    if not (np.isfinite(logp_base) and np.isfinite(logp_variant)):
        return None
    return abs(logp_base - logp_variant) / gap_scale(logp_base)


def recovery_refusal(logp_base: float, logp_variant: float) -> str | None:
    """``NO_CHANGE`` when the gap is below the guard (finite inputs), else None."""
    share = relative_gap(logp_base, logp_variant)
    return NO_CHANGE if share is not None and share < MIN_RELATIVE_GAP else None


def _finite() -> pl.Expr:
    return pl.all_horizontal(
        pl.col(c).is_not_null() & pl.col(c).is_finite()
        for c in ("logprob_base", "logprob_variant", "logprob_patched")
    )


def _no_recovery_reason(rows: pl.DataFrame) -> str:
    """Why a layer's rows give no defined recovery (none of them passes ``_defined``)."""
    measured = rows.filter(_finite())
    reasons = [NO_CHANGE] if measured.height else []
    if measured.height < rows.height:
        unmeasured = rows.filter(~_finite())
        recorded = (
            unmeasured["missing_reason"].drop_nulls().unique().sort().to_list()
            if "missing_reason" in rows.columns
            else []
        )
        reasons += [r for r in recorded if r not in reasons] or [NO_LOGPROB]
    return "; ".join(reasons)


def _defined(frame: pl.DataFrame) -> pl.DataFrame:
    """Rows with a layer, finite log-probabilities and a gap that passes the guard; with
    the signed change restored (``restored``) and |gap| (``weight``)."""
    finite = _finite()
    gap = pl.col("logprob_base") - pl.col("logprob_variant")
    scale = pl.max_horizontal(pl.col("logprob_base").abs(), pl.lit(SCALE_FLOOR_NATS))
    return (
        frame.filter(pl.col("layer").is_not_null() & finite)
        .filter(gap.abs() >= MIN_RELATIVE_GAP * scale)
        .with_columns(
            (gap.sign() * (pl.col("logprob_patched") - pl.col("logprob_variant"))).alias(
                "restored"
            ),
            gap.abs().alias("weight"),
            ((pl.col("logprob_patched") - pl.col("logprob_variant")) / gap).alias("ratio"),
        )
    )


def _bands(
    part: pl.DataFrame, owner: np.ndarray, weights: np.ndarray, count: int
) -> dict[str, float | None]:
    """The bootstrap bands of one layer's ratio of sums and median (prompt weights over
    the family's ``count`` prompts)."""
    restored = part["restored"].to_numpy()
    weight = part["weight"].to_numpy()
    ratios = part["ratio"].to_numpy()
    tail = expanded_tail(len(np.unique(owner)), LEVEL)
    with np.errstate(invalid="ignore", divide="ignore"):
        sums = (weights @ np.bincount(owner, restored, minlength=count)) / (
            weights @ np.bincount(owner, weight, minlength=count)
        )
    order = np.argsort(ratios, kind="stable")
    medians = weighted_quantiles(ratios[order], weights[:, owner[order]], [0.5])[:, 0]
    out: dict[str, float | None] = {}
    for name, draws in (("ci", sums), ("median_ci", medians)):
        finite = draws[np.isfinite(draws)]  # a resample without this layer's prompts
        low, high = np.percentile(finite, [tail, 100 - tail]) if len(finite) else (None, None)
        out[f"{name}_low"] = None if low is None else float(low)
        out[f"{name}_high"] = None if high is None else float(high)
    return out


def _layer_row(part: pl.DataFrame, weights: np.ndarray | None, index: dict) -> dict:
    owner = np.array([index[k] for k in part.select("dataset", "prompt_id").iter_rows()])
    prompts = len(np.unique(owner))
    refusal = interval_refusal(prompts)
    row: dict[str, object] = {
        "ratio_of_sums": float(part["restored"].to_numpy().sum() / part["weight"].to_numpy().sum()),
        "median": float(np.median(part["ratio"].to_numpy())),
        "n_variants": part.height,
        "n_prompts": prompts,
        "ci_missing_reason": refusal,
        "missing_reason": None,
    }
    if weights is not None and refusal is None:
        row.update(_bands(part, owner, weights, len(index)))
    return row


def recovery_by_layer(patching: pl.DataFrame, resamples: int = DEFAULT_RESAMPLES) -> pl.DataFrame:
    """One row per (model, family incl. ``ALL_FAMILIES``, layer) of patching.parquet rows
    (recomputed from the log-probabilities, so a run patched under an older guard is read
    under this one). Columns: model, family, layer, RECOVERY_COLUMNS, n_variants (defined
    recoveries), n_prompts, n_left_out (rows of that layer without one), ci_missing_reason,
    missing_reason (why a layer without a defined recovery has no figures)."""
    rows: list[dict[str, object]] = []
    patched = patching.filter(pl.col("layer").is_not_null())
    for (model,), by_model in patched.group_by(["model"], maintain_order=True):
        families = sorted(by_model["family"].unique().to_list())
        for family in [*families, ALL_FAMILIES]:
            chosen = (
                by_model if family == ALL_FAMILIES else by_model.filter(pl.col("family") == family)
            )
            defined = _defined(chosen)
            keys = defined.select("dataset", "prompt_id").unique().sort("dataset", "prompt_id")
            index = {k: i for i, k in enumerate(keys.iter_rows())}
            refusal = interval_refusal(len(index))
            weights = (  # one stratum: both figures pool every dataset's variants
                prompt_weights([len(index)], stable_seed(str(model), family, "recovery"), resamples)
                if refusal is None
                else None
            )
            for layer in sorted(chosen["layer"].unique().to_list()):
                part = defined.filter(pl.col("layer") == layer)
                at_layer = chosen.filter(pl.col("layer") == layer)
                total = at_layer.height
                stats = (
                    _layer_row(part, weights, index)
                    if part.height
                    else {
                        "n_variants": 0,
                        "n_prompts": 0,
                        "ci_missing_reason": interval_refusal(0),
                        "missing_reason": _no_recovery_reason(at_layer),
                    }
                )
                rows.append(
                    {
                        "model": model,
                        "family": family,
                        "layer": layer,
                        **stats,
                        "n_left_out": total - part.height,
                    }
                )
    schema = {
        "model": pl.String,
        "family": pl.String,
        "layer": pl.Int32,
        **{c: pl.Float64 for c in RECOVERY_COLUMNS},
        "n_variants": pl.Int32,
        "n_prompts": pl.Int32,
        "n_left_out": pl.Int32,
        "ci_missing_reason": pl.String,
        "missing_reason": pl.String,
    }
    full = [{c: r.get(c) for c in schema} for r in rows]
    return pl.DataFrame(full, schema=schema)
