"""Per-layer profiles of the scoring pass' cosines: where in depth a variant moves the model.

For every model and variant group, the profile at layer l is the mean over variants of
1 - cos(h_l(variant), h_l(base)), read at one of two positions of the prompt
(``READ_POSITIONS``): ``generation_start``, the rendered prompt's last token where the answer
starts (the Act axis, ``layer_cosines``), and ``prompt_end``, the last token of the user's
own text (``layer_cosines_user``).

Band: a seeded bootstrap over prompts. A prompt is resampled with all its variants: its
variants share a base state and move together, so resampling variants as if independent
makes the band too narrow (10 prompts x 6 variants, intra-prompt correlation 0.5: a 95%
variant-bootstrap band covers the true mean about 65% of the time). The profile is a mean
over all of a group's variants, whatever their dataset, so prompts are drawn from all of
the group's prompts in one stratum (``tails.prompt_weights``), not within each dataset: a
dataset of 1 or 2 prompts drawn within itself adds no or half its spread (6 datasets x 2
prompts x 3 variants, prompt and variant effects of equal variance, 2000 simulated runs,
measured once: a band drawn within each dataset covered the true mean 0.83 of the time, the
one-stratum band 0.95; ``test_band_ignores_datasets_and_covers_with_two_prompts_each``
reruns 200 and asserts at least 0.88).
The same draws serve every layer, so the band is of one curve, not of L independent means;
a resample's profile is the mean over its variants (the drawn prompts' variants summed,
over their count), as the profile itself is. The band's percentiles are the expanded ones
of ``intervals.expanded_tail``; ``test_band_resamples_prompts_and_covers_a_clustered_truth``
(10 prompts x 6 variants, intra-prompt correlation 0.5, 400 simulated runs) asserts the
band covers the true mean at least 90% of the time. With fewer than
``intervals.MIN_PROMPTS`` prompts holding a curve the band is null, with the reason
(``intervals.interval_refusal``).

Onset layer: the first layer whose profile reaches ``ONSET_FRACTION`` of the profile's
maximum over layers (a half-maximum onset: robust to the scale of a family's effect, which
differs by orders of magnitude between a stray comma and a politeness prefix). A profile
that is 0 at every layer (the replay on a deterministic backend) has no onset: null, with
its reason.

Groups: each (family, subtype, strength) and each family pooled over its subtypes and
strengths (subtype ``POOLED``, strength null). Rows without cosines (an API model, a failed
base) or with a non-finite cosine are left out of the means and of the prompt count; ``n``
counts the variants left.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
import polars as pl

from sago_core.artifacts.schemas import LAYER_PROFILES, conform, empty
from sago_core.statistics.intervals import expanded_tail, interval_refusal
from sago_core.statistics.tails import prompt_weights
from sago_core.vocabulary import BASE_VARIANT_ID, POOLED

ONSET_FRACTION = 0.5
RESAMPLES = 1000
LEVEL = 0.95
READ_POSITIONS: dict[str, str] = {
    "generation_start": "layer_cosines",
    "prompt_end": "layer_cosines_user",
}
NO_ONSET = "profile is 0 at every layer: no change to locate"
GROUP_COLUMNS = ("model", "family", "subtype", "strength")


def group_seed(seed: int, key: Sequence[object]) -> int:
    """A seed per group from the run seed and the group's identity (order-independent)."""
    text = "\x1f".join([str(seed), *(str(k) for k in key)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") >> 1


def profile_band(
    one_minus_cos: np.ndarray,
    prompts: np.ndarray,
    seed: int,
    resamples: int = RESAMPLES,
    level: float = LEVEL,
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Mean per layer of an (n variants, L layers) array, and its expanded percentile
    bootstrap band over prompts, all prompts in one stratum (None with fewer than
    ``MIN_PROMPTS`` prompts). ``prompts``: each variant's prompt, 0..P-1 (every index
    used)."""
    values = np.asarray(one_minus_cos, dtype=np.float64)
    owner = np.asarray(prompts, dtype=np.int64)
    mean = values.mean(axis=0)
    count = int(owner.max()) + 1 if owner.size else 0
    if interval_refusal(count) is not None:
        return mean, None, None
    sums = np.zeros((count, values.shape[1]))
    np.add.at(sums, owner, values)
    sizes = np.bincount(owner, minlength=count).astype(np.float64)
    weights = prompt_weights([count], seed, resamples)
    means = (weights @ sums) / (weights @ sizes)[:, None]  # (resamples, L)
    tail = expanded_tail(count, level)
    low, high = np.percentile(means, [tail, 100 - tail], axis=0)
    return mean, low, high


def onset_layer(profile: np.ndarray, fraction: float = ONSET_FRACTION) -> int | None:
    """First layer (1-based) whose value reaches ``fraction`` x the maximum; None when the
    maximum is not positive."""
    peak = float(np.max(profile))
    if not peak > 0:
        return None
    return int(np.argmax(profile >= fraction * peak)) + 1


@dataclass(frozen=True)
class _Curves:
    values: np.ndarray  # (n, L) of 1 - cos
    prompts: np.ndarray  # each row's prompt, 0..P-1 in (dataset, prompt_id) order
    count: int  # P


def _matrix(group: pl.DataFrame, column: str) -> _Curves | None:
    """1 - cos over rows with a complete finite curve; None when there is none."""
    lists = group[column].to_list()
    lengths = [len(c) if c is not None else 0 for c in lists]
    width = max(lengths, default=0)
    if not width:
        return None
    keep = [i for i, c in enumerate(lists) if lengths[i] == width and np.all(np.isfinite(c))]
    if not keep:
        return None
    kept = group[keep]
    keys = kept.select("dataset", "prompt_id")
    order = keys.unique().sort("dataset", "prompt_id")
    index = {k: i for i, k in enumerate(order.iter_rows())}
    return _Curves(
        1.0 - np.asarray([lists[i] for i in keep], dtype=np.float64),
        np.array([index[k] for k in keys.iter_rows()], dtype=np.int64),
        len(index),
    )


def _profile_rows(
    key: dict[str, object], position: str, curves: _Curves, seed: int
) -> list[dict[str, object]]:
    values = curves.values
    band_seed = group_seed(seed, [*key.values(), position])
    mean, low, high = profile_band(values, curves.prompts, band_seed)
    onset = onset_layer(mean)
    refusal = interval_refusal(curves.count)
    reasons = [None if onset else NO_ONSET, refusal if low is None else None]
    reason = "; ".join(r for r in reasons if r) or None
    return [
        {
            **key,
            "read_position": position,
            "layer": layer + 1,
            "mean_one_minus_cos": float(mean[layer]),
            "ci_low": None if low is None else float(low[layer]),
            "ci_high": None if high is None else float(high[layer]),
            "n": values.shape[0],
            "onset_layer": onset,
            "missing_reason": reason,
        }
        for layer in range(values.shape[1])
    ]


def layer_profiles(rows: pl.DataFrame, seed: int) -> pl.DataFrame:
    """``rows``: analysis rows with the variant's family, subtype and strength (base rows are
    left out). One row per group, read position and layer (``LAYER_PROFILES``)."""
    variants = rows.filter(pl.col("variant_id") != BASE_VARIANT_ID)
    for column in READ_POSITIONS.values():  # an analysis written before the second position
        if column not in variants.columns:
            variants = variants.with_columns(pl.lit(None, pl.List(pl.Float64)).alias(column))
    pooled = variants.with_columns(
        pl.lit(POOLED).alias("subtype"), pl.lit(None, pl.Float64).alias("strength")
    )
    records: list[dict[str, object]] = []
    for frame in (variants, pooled):
        for key_values, group in frame.group_by(list(GROUP_COLUMNS), maintain_order=True):
            key = dict(zip(GROUP_COLUMNS, key_values, strict=True))
            for position, column in READ_POSITIONS.items():
                curves = _matrix(group, column)
                if curves is not None:
                    records.extend(_profile_rows(key, position, curves, seed))
    if not records:
        return empty(LAYER_PROFILES)
    order = [*GROUP_COLUMNS, "read_position", "layer"]
    frame = pl.DataFrame(
        records, schema_overrides={"strength": pl.Float64}, infer_schema_length=None
    )
    return conform(frame.sort(order, nulls_last=True), LAYER_PROFILES)


def run_layer_profiles(
    analysis: pl.DataFrame, generations: pl.DataFrame, seed: int
) -> pl.DataFrame:
    """``layer_profiles`` of a run: every model's analysis rows with each variant's family,
    subtype and strength from generations.parquet."""
    keys = ["model", "dataset", "prompt_id", "variant_id"]
    variant_key = generations.select(*keys, "family", "subtype", "strength").unique(keys)
    # sorted: unique() and the join keep no order (the mean and the bootstrap do not
    # depend on row order, but a stable order keeps the output rows stable)
    return layer_profiles(analysis.join(variant_key, on=keys, how="inner").sort(keys), seed)
