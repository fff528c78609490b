"""Per-layer profiles of the scoring pass' cosines: where in depth a variant moves the model.

For every model and variant group, the profile at layer l is the mean over variants of
1 - cos(h_l(variant), h_l(base)), read at one of two positions of the prompt
(``READ_POSITIONS``): ``generation_start``, the rendered prompt's last token where the answer
starts (the Act axis, ``layer_cosines``), and ``prompt_end``, the last token of the user's
own text (``layer_cosines_user``). The band is a seeded percentile bootstrap over variants
(the same resampled variants at every layer, so the band is of one curve, not of L
independent means).

Onset layer: the first layer whose profile reaches ``ONSET_FRACTION`` of the profile's
maximum over layers (a half-maximum onset: robust to the scale of a family's effect, which
differs by orders of magnitude between a stray comma and a politeness prefix). A profile
that is 0 at every layer (the replay on a deterministic backend) has no onset: null, with
its reason.

Groups: each (family, subtype, strength) and each family pooled over its subtypes and
strengths (subtype ``POOLED``, strength null). Rows without cosines (an API model, a failed
base) or with a non-finite cosine are left out of the means; ``n`` counts the rest.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np
import polars as pl

from sago_core.artifacts.schemas import LAYER_PROFILES, conform, empty
from sago_core.vocabulary import BASE_VARIANT_ID, POOLED

ONSET_FRACTION = 0.5
RESAMPLES = 1000
LEVEL = 0.95
READ_POSITIONS: dict[str, str] = {
    "generation_start": "layer_cosines",
    "prompt_end": "layer_cosines_user",
}
NO_ONSET = "profile is 0 at every layer: no change to locate"
NO_INTERVAL = "one variant: no bootstrap interval"
GROUP_COLUMNS = ("model", "family", "subtype", "strength")


def group_seed(seed: int, key: Sequence[object]) -> int:
    """A seed per group from the run seed and the group's identity (order-independent)."""
    text = "\x1f".join([str(seed), *(str(k) for k in key)])
    return int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "big") >> 1


def profile_band(
    one_minus_cos: np.ndarray, seed: int, resamples: int = RESAMPLES, level: float = LEVEL
) -> tuple[np.ndarray, np.ndarray | None, np.ndarray | None]:
    """Mean per layer of an (n variants, L layers) array, and its percentile bootstrap band
    (None with fewer than two variants)."""
    values = np.asarray(one_minus_cos, dtype=np.float64)
    mean = values.mean(axis=0)
    if values.shape[0] < 2:
        return mean, None, None
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, values.shape[0], size=(resamples, values.shape[0]))
    means = np.stack([values[:, layer][picks].mean(axis=1) for layer in range(values.shape[1])])
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail], axis=1)
    return mean, low, high


def onset_layer(profile: np.ndarray, fraction: float = ONSET_FRACTION) -> int | None:
    """First layer (1-based) whose value reaches ``fraction`` x the maximum; None when the
    maximum is not positive."""
    peak = float(np.max(profile))
    if not peak > 0:
        return None
    return int(np.argmax(profile >= fraction * peak)) + 1


def _matrix(lists: Sequence[Sequence[float] | None]) -> np.ndarray | None:
    """(n, L) of 1 - cos over rows with a complete finite curve; None when there is none."""
    rows = [c for c in lists if c is not None and len(c)]
    if not rows:
        return None
    width = max(len(c) for c in rows)
    kept = [c for c in rows if len(c) == width and np.all(np.isfinite(c))]
    if not kept:
        return None
    return 1.0 - np.asarray(kept, dtype=np.float64)


def _profile_rows(
    key: dict[str, object], position: str, values: np.ndarray, seed: int
) -> list[dict[str, object]]:
    mean, low, high = profile_band(values, group_seed(seed, [*key.values(), position]))
    onset = onset_layer(mean)
    reasons = [r for r in (None if onset else NO_ONSET, None if low is not None else NO_INTERVAL)]
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
                values = _matrix(group[column].to_list())
                if values is not None:
                    records.extend(_profile_rows(key, position, values, seed))
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
    # sorted: unique() and the join keep no order, and the bootstrap resamples by position
    return layer_profiles(analysis.join(variant_key, on=keys, how="inner").sort(keys), seed)
