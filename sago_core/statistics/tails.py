"""Tail statistics of |delta_norm| and answer-flip rates, with bootstrap intervals.

Per (model, dataset, axis, family), from instances.parquet; dataset ``__pooled__`` takes
every prompt of the model, family ``__all__`` every family. The replay never enters
(instances.parquet holds no replay rows).

- ``q50``/``q90``/``q99``/``max``: numpy's default (linear) quantile of |delta_norm| over
  the variants with a measured delta on that axis; ``n`` counts them.
- ``share_over_0_01``/``_0_05``/``_0_10``: the share of those variants with
  |delta_norm| > eps.
- ``flip_right_to_wrong``: the share of judged variants (base and variant answers both have
  a verdict against the reference answers, statistics/correctness.py) whose base answer is
  right and whose answer is wrong; ``flip_wrong_to_right`` the reverse. Both have the judged
  variants (``n_judged``) as denominator. They describe the answers, not an axis, so every
  axis row of a (model, dataset, family) carries the same values. At K > 1 samples they
  are the mean over judged variants of the flip beyond the base's own self-flip rate
  (``sampling/flips.py``), which can be negative. Null, with
  ``flip_missing_reason``, when no variant could be judged: the instances' most common
  ``correct_missing_reason`` (the dataset's reason for having no reference answers).
- ``ci_low_*``/``ci_high_*``: 95% percentile bootstrap over prompts (a prompt is resampled
  with all its variants), 2000 resamples, seeded by the row's identity
  (``stable_seed(model, dataset, axis, family)``; the flip intervals use ``FLIP_SEED`` for
  the axis, so every axis row carries the same ones). The pooled row's quantile is a
  quantile of all its variants together (a dataset with more prompts weighs more), so its
  prompts are drawn together, not within each dataset: a draw within datasets of two
  prompts each redraws too little spread (at 6 datasets x 2 prompts x 4 variants its 95%
  band of q50 covered the true pooled median 0.81 of the time with alike datasets and 0.76
  with dataset means 0.3 sd apart, 400 simulated runs; drawing all prompts together: 0.94
  and 0.97). Draws: one ``rng.integers(0, P, size=(resamples, P))`` over the subset's P
  prompts in (dataset, ``prompt_id``) order. A resample whose prompts hold no value is left
  out of the percentiles. Each interval is drawn only from at least
  ``intervals.MIN_PROMPTS`` prompts with a value: for the quantiles, prompts with a
  measured delta on the axis; for the flips, prompts with a judged variant (a prompt of the
  subset without one does not count). Below that the interval is null and
  ``ci_missing_reason`` says which and why.

At K > 1 samples per prompt text the run's deltas are the excesses (sampling/excess_deltas.py),
so the quantiles are tails of |excess| per variant, and instances carry every sample's flips
(``stages/instances.SAMPLED_COLUMNS``): ``flip_right_to_wrong`` is then the mean over the
judged variants of the variant's flip rate beyond the base's self-flip rate
(``flip_right_to_wrong_excess``; 0 in expectation when the wording leaves the share of right
answers unchanged, and it can be negative), ``n_judged`` the variants with an excess, and
the intervals resample prompts as a ratio of the sums as at K = 1. Sample 0's verdicts are
not read.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from sago_core.artifacts.schemas import FLIPS, TAIL_QUANTILES, TAILS, conform
from sago_core.statistics.intervals import DEFAULT_RESAMPLES, interval_refusal, stable_seed
from sago_core.vocabulary import AXES, EPSILONS, POOLED

ALL_FAMILIES = "__all__"
QUANTILES: tuple[float, ...] = (0.5, 0.9, 0.99)
LEVEL = 0.95
NO_VERDICT = "no variant judged against reference answers (no references, or no answers)"
FLIP_SEED = "flips"  # stands in for the axis in the flip intervals' seed
# instances' columns at K > 1 (stages/instances.SAMPLED_COLUMNS), in FLIPS' order
SAMPLED_FLIPS: tuple[str, ...] = ("flip_right_to_wrong_excess", "flip_wrong_to_right_excess")
_CHUNK = 256  # resamples per block of the weighted quantile (bounds memory)
_BLOCK_CELLS = 1 << 21  # at most this many (resample, value) cells per block


def eps_column(eps: float) -> str:
    return f"share_over_{eps:.2f}".replace(".", "_")


@dataclass(frozen=True)
class Prompts:
    """One subset's variants, indexed by prompt; prompts grouped in dataset strata."""

    strata: list[int]  # number of prompts per dataset, in sorted dataset order
    values: np.ndarray  # finite |delta_norm| of the variants
    owner: np.ndarray  # each value's prompt (0-based, in dataset then prompt_id order)
    judged: np.ndarray  # per prompt: variants with both verdicts
    flips: dict[str, np.ndarray]  # per prompt and direction: flipped variants


def prompt_weights(strata: Sequence[int], seed: int, resamples: int) -> np.ndarray:
    """(resamples x prompts) counts: how often each prompt is drawn in each resample."""
    rng = np.random.default_rng(seed)
    blocks = []
    for size in strata:
        picks = rng.integers(0, size, size=(resamples, size))
        cells = (np.arange(resamples)[:, None] * size + picks).ravel()
        counts = np.bincount(cells, minlength=resamples * size).reshape(resamples, size)
        blocks.append(counts.astype(np.int64, copy=False))
    return np.hstack(blocks)


def _lerp(a: np.ndarray, b: np.ndarray, t: np.ndarray) -> np.ndarray:
    """numpy's own linear interpolation (np.quantile's _lerp), for identical values."""
    diff = b - a
    return np.where(t >= 0.5, b - diff * (1 - t), a + diff * t)


def _value_at(ordered: np.ndarray, flat: np.ndarray, k: np.ndarray, stride: int) -> np.ndarray:
    """The k-th value (0-based) of each resample's repeated sorted sample; ``flat`` holds
    each resample's cumulative weights offset by ``row x stride`` so one search finds all.
    ``k`` holds whole numbers: searched as integers (a float key would make numpy convert
    the whole of ``flat`` at every search)."""
    rows = np.arange(len(k))
    found = np.searchsorted(flat, k.astype(np.int64) + rows * stride, side="right")
    return ordered[np.clip(found - rows * len(ordered), 0, len(ordered) - 1)]


def _chunk(values: int) -> int:
    """Resamples per block: ``_CHUNK``, fewer when a block of values would exceed
    ``_BLOCK_CELLS`` (the block's arrays stay in cache; the result does not depend on it)."""
    return max(1, min(_CHUNK, _BLOCK_CELLS // max(values, 1)))


def weighted_quantiles(
    ordered: np.ndarray,
    weights: np.ndarray,
    qs: Sequence[float],
    owner: np.ndarray | None = None,
) -> np.ndarray:
    """np.quantile of each resample, the sorted values repeated by integer ``weights``
    (resamples x values), without building the repeated arrays: (resamples x len(qs)),
    NaN where a resample holds no value. With ``owner`` (each sorted value's prompt),
    ``weights`` are per prompt (resamples x prompts) and each value's weight is its
    prompt's: taken a block of resamples at a time, so no resamples x values matrix is built
    (at the paper's size it was 125 MB per axis and subset)."""
    out = np.full((weights.shape[0], len(qs)), np.nan)
    step = _chunk(len(ordered))
    for start in range(0, weights.shape[0], step):
        block = weights[start : start + step]
        # row-major, so each resample's cumulative sum runs along memory (a fancy index
        # on axis 1 gives a column-major block: a strided cumsum and a copying ravel)
        block = np.take(block, owner, axis=1) if owner is not None else np.ascontiguousarray(block)
        cum = np.cumsum(block, axis=1)
        total = cum[:, -1].copy()
        rows = np.arange(len(block))
        stride = int(total.max()) + 1
        cum += (rows * stride)[:, None]
        flat = cum.ravel()
        held = total > 0
        for col, q in enumerate(qs):
            virtual = total * q + (1 + q * -1) - 1  # numpy's linear virtual index
            low = np.floor(virtual)
            high = np.minimum(low + 1, total - 1)
            values = _lerp(
                _value_at(ordered, flat, low, stride),
                _value_at(ordered, flat, high, stride),
                virtual - low,
            )
            out[start : start + step, col] = np.where(held, values, np.nan)
    return out


def _interval(samples: np.ndarray) -> tuple[float | None, float | None]:
    finite = samples[np.isfinite(samples)]
    if not len(finite):
        return None, None
    tail = (1 - LEVEL) / 2 * 100
    low, high = np.percentile(finite, [tail, 100 - tail])
    return float(low), float(high)


def _quantile_stats(subset: Prompts, weights: np.ndarray | None) -> dict[str, float | None]:
    values = subset.values
    if not len(values):
        return {}
    stats: dict[str, float | None] = dict(
        zip(TAIL_QUANTILES, (float(v) for v in np.quantile(values, QUANTILES)), strict=True)
    )
    stats["max"] = float(values.max())
    for eps in EPSILONS:
        stats[eps_column(eps)] = float(np.mean(values > eps))
    if weights is not None:
        order = np.argsort(values, kind="stable")
        draws = weighted_quantiles(values[order], weights, QUANTILES, subset.owner[order])
        for col, name in enumerate(TAIL_QUANTILES):
            stats[f"ci_low_{name}"], stats[f"ci_high_{name}"] = _interval(draws[:, col])
    return stats


def _flip_stats(subset: Prompts, weights: np.ndarray | None) -> dict[str, float | None]:
    judged = int(subset.judged.sum())
    if not judged:
        return {}
    stats: dict[str, float | None] = {}
    for name in FLIPS:
        stats[name] = float(subset.flips[name].sum() / judged)
        if weights is not None:
            with np.errstate(invalid="ignore", divide="ignore"):
                draws = (weights @ subset.flips[name]) / (weights @ subset.judged)
            stats[f"ci_low_{name}"], stats[f"ci_high_{name}"] = _interval(draws)
    return stats


@dataclass(frozen=True)
class _Ordered:
    """What every axis of one subset shares: its rows in (dataset, prompt_id) order, each
    row's prompt, the dataset strata and the per-prompt verdict counts (built once per
    subset, not once per axis)."""

    rows: pl.DataFrame
    prompt: np.ndarray
    strata: list[int]
    judged: np.ndarray
    flips: dict[str, np.ndarray]


def _ordered(rows: pl.DataFrame) -> _Ordered:
    ordered = rows.sort("dataset", "prompt_id")
    keys = ordered.select("dataset", "prompt_id")
    prompt = keys.select(pl.struct("dataset", "prompt_id").rle_id())[:, 0].to_numpy()
    count = int(prompt.max()) + 1 if len(prompt) else 0
    strata = keys.unique(maintain_order=True).group_by("dataset", maintain_order=True).len()
    if SAMPLED_FLIPS[0] in ordered.columns:  # K > 1: every sample, beyond self-flips
        return _Ordered(ordered, prompt, strata["len"].to_list(), *_sampled_flips(ordered, prompt))
    base = ordered["base_correct"].to_numpy()
    variant = ordered["variant_correct"].to_numpy()
    judged = ordered["base_correct"].is_not_null() & ordered["variant_correct"].is_not_null()
    known_np = judged.to_numpy()
    right = np.where(known_np, base, False).astype(bool)
    now_right = np.where(known_np, variant, False).astype(bool)

    def per_prompt(mask: np.ndarray) -> np.ndarray:
        return np.bincount(prompt[mask], minlength=count).astype(np.float64)

    return _Ordered(
        ordered,
        prompt,
        strata["len"].to_list(),
        per_prompt(known_np),
        {
            "flip_right_to_wrong": per_prompt(known_np & right & ~now_right),
            "flip_wrong_to_right": per_prompt(known_np & ~right & now_right),
        },
    )


def _sampled_flips(
    ordered: pl.DataFrame, prompt: np.ndarray
) -> tuple[np.ndarray, dict[str, np.ndarray]]:
    """K > 1: per prompt, the variants with both flip excesses and the sum of each excess."""
    count = int(prompt.max()) + 1 if len(prompt) else 0
    excess = {
        name: ordered[column].to_numpy().astype(np.float64)
        for name, column in zip(FLIPS, SAMPLED_FLIPS, strict=True)
    }
    known = np.logical_and.reduce([np.isfinite(v) for v in excess.values()])
    judged = np.bincount(prompt[known], minlength=count).astype(np.float64)
    sums = {
        name: np.bincount(prompt[known], weights=values[known], minlength=count)
        for name, values in excess.items()
    }
    return judged, sums


def _prompts(ordered: _Ordered, axis: str) -> Prompts:
    d = ordered.rows[f"d_{axis}"].to_numpy().astype(np.float64)  # null -> NaN, dropped below
    measured = np.isfinite(d)
    return Prompts(
        ordered.strata, np.abs(d[measured]), ordered.prompt[measured], ordered.judged, ordered.flips
    )


def _axis_reason(rows: pl.DataFrame, axis: str) -> str:
    reasons = rows[f"reason_{axis}"].drop_nulls()
    return str(reasons.mode().sort()[0]) if len(reasons) else "no variants"


def _flip_reason(rows: pl.DataFrame) -> str:
    """Why no variant was judged: the instances' most common ``correct_missing_reason``
    (e.g. Alpaca's: its ``output`` is no gold answer), else the generic ``NO_VERDICT``."""
    column = "flip_missing_reason" if SAMPLED_FLIPS[0] in rows.columns else "correct_missing_reason"
    if column not in rows.columns:
        return NO_VERDICT
    reasons = rows[column].drop_nulls()
    return str(reasons.mode().sort()[0]) if len(reasons) else NO_VERDICT


def _row(ordered: _Ordered, key: tuple[str, str, str, str], resamples: int) -> dict:
    model, dataset, axis, family = key
    rows = ordered.rows
    subset = _prompts(ordered, axis)
    # per dataset: prompts with a delta on this axis, prompts with a judged variant
    measured = len(np.unique(subset.owner))
    judged = int(np.count_nonzero(subset.judged))
    quantile_refusal = interval_refusal(measured, "quantile intervals")
    # flips describe answers, not an axis: one draw per (model, dataset, family)
    flip_refusal = interval_refusal(judged, "flip intervals") if judged else None
    everyone = [sum(subset.strata)]  # one draw over all prompts, pooled row included
    weights = (
        prompt_weights(everyone, stable_seed(*key), resamples) if quantile_refusal is None else None
    )
    flip_weights = (
        prompt_weights(everyone, stable_seed(model, dataset, FLIP_SEED, family), resamples)
        if judged and flip_refusal is None
        else None
    )
    quantiles, flips = _quantile_stats(subset, weights), _flip_stats(subset, flip_weights)
    n = len(subset.values)
    refusals = [r for r in (quantile_refusal if n else None, flip_refusal) if r]
    return {
        "model": model,
        "dataset": dataset,
        "axis": axis,
        "family": family,
        "n": n,
        **quantiles,
        **flips,
        "n_prompts": sum(subset.strata),
        "n_judged": int(subset.judged.sum()),
        "missing_reason": None if n else _axis_reason(rows, axis),
        "flip_missing_reason": None if flips else _flip_reason(rows),
        "ci_missing_reason": "; ".join(refusals) or None,
    }


def _subsets(instances: pl.DataFrame) -> list[tuple[str, str, str, pl.DataFrame]]:
    out = []
    for (model,), rows in instances.group_by(["model"]):
        datasets = sorted(rows["dataset"].unique().to_list())
        families = sorted(rows["family"].unique().to_list())
        for dataset in [*datasets, POOLED]:
            chosen = rows if dataset == POOLED else rows.filter(pl.col("dataset") == dataset)
            for family in [*families, ALL_FAMILIES]:
                part = (
                    chosen if family == ALL_FAMILIES else chosen.filter(pl.col("family") == family)
                )
                if len(part):
                    out.append((str(model), dataset, family, part))
    return out


def tail_statistics(instances: pl.DataFrame, resamples: int = DEFAULT_RESAMPLES) -> pl.DataFrame:
    """tails.parquet from instances.parquet (one row per variant, d_<axis> columns)."""
    rows = []
    for model, dataset, family, part in _subsets(instances):
        ordered = _ordered(part)
        rows += [_row(ordered, (model, dataset, axis, family), resamples) for axis in AXES]
    full = [{column: row.get(column) for column in TAILS} for row in rows]
    return conform(pl.DataFrame(full, schema=TAILS), TAILS).sort(
        "model", "dataset", "family", "axis"
    )


SUBTYPE_FLIPS: dict[str, pl.DataType | type[pl.DataType]] = {
    "model": pl.String,
    "subtype": pl.String,  # a language code for the language family, a method for script
    "n": pl.Int32,  # variants
    "n_judged": pl.Int32,  # variants whose base and variant answers both have a verdict
    "flip_right_to_wrong": pl.Float64,  # right in the base (English), wrong in the variant
    "flip_wrong_to_right": pl.Float64,
    "base_correct": pl.Float64,  # share of right base answers among those with a verdict
    "variant_correct": pl.Float64,  # the same for the variant answers
    "flip_missing_reason": pl.String,  # why the flip rates are null
}


def subtype_flips(instances: pl.DataFrame, family: str) -> pl.DataFrame:
    """Flip rates and correctness per (model, subtype) of one family: for the language
    family, right in English and wrong in German (and the reverse) per language. Flips have
    the judged variants as denominator (as ``tail_statistics``); each accuracy the answers
    with a verdict on its side. Null, with ``flip_missing_reason``, without a judged one. At
    K > 1 (instances with ``SAMPLED_FLIPS``) every sample: ``_sampled_subtype_flips``."""
    rows = instances.filter(pl.col("family") == family)
    if SAMPLED_FLIPS[0] in rows.columns:
        return _sampled_subtype_flips(rows)
    out = []
    for (model, subtype), part in rows.group_by(["model", "subtype"], maintain_order=True):
        judged = part.filter(
            pl.col("base_correct").is_not_null() & pl.col("variant_correct").is_not_null()
        )
        n_judged = len(judged)

        def share(frame: pl.DataFrame, mask: pl.Expr, of: int) -> float | None:
            return frame.filter(mask).height / of if of else None

        base = part["base_correct"].drop_nulls()
        variant = part["variant_correct"].drop_nulls()
        out.append(
            {
                "model": model,
                "subtype": subtype,
                "n": len(part),
                "n_judged": n_judged,
                "flip_right_to_wrong": share(
                    judged, pl.col("base_correct") & ~pl.col("variant_correct"), n_judged
                ),
                "flip_wrong_to_right": share(
                    judged, ~pl.col("base_correct") & pl.col("variant_correct"), n_judged
                ),
                "base_correct": float(base.mean()) if len(base) else None,  # type: ignore[arg-type]
                "variant_correct": float(variant.mean()) if len(variant) else None,  # type: ignore[arg-type]
                "flip_missing_reason": None if n_judged else _flip_reason(part),
            }
        )
    frame = pl.DataFrame(out, schema=SUBTYPE_FLIPS) if out else pl.DataFrame(schema=SUBTYPE_FLIPS)
    return frame.sort("model", "subtype")


def _sampled_subtype_flips(rows: pl.DataFrame) -> pl.DataFrame:
    """K > 1: per (model, subtype) the mean flip excess beyond the base's self-flip rate over
    the variants with one (a language variant has none: sampling_tests does not grade it in
    its own language, and the row says so) and the mean shares of right samples."""
    known = pl.all_horizontal(pl.col(c).is_not_null() for c in SAMPLED_FLIPS)

    def mean(column: str, over: pl.Expr) -> pl.Expr:
        return pl.col(column).filter(over).mean()

    out = rows.group_by(["model", "subtype"]).agg(
        pl.len().alias("n"),
        known.sum().alias("n_judged"),
        *(mean(c, known).alias(name) for name, c in zip(FLIPS, SAMPLED_FLIPS, strict=True)),
        pl.col("share_right_base").mean().alias("base_correct"),
        pl.col("share_right_variant").mean().alias("variant_correct"),
        pl.col("flip_missing_reason").drop_nulls().mode().sort().first().alias("_why"),
    )
    out = out.with_columns(
        pl.when(pl.col("n_judged") == 0)
        .then(pl.coalesce(pl.col("_why"), pl.lit(NO_VERDICT)))
        .alias("flip_missing_reason")
    )
    return out.select(pl.col(c).cast(t) for c, t in SUBTYPE_FLIPS.items()).sort("model", "subtype")
