"""Bootstrap confidence intervals for SGS, resampling prompts.

Pooled SGS is an equal-weight mean over datasets, so its bootstrap resamples prompts within
each dataset (stratified) and recomputes that same mean. Percentile intervals, seeded.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

DEFAULT_RESAMPLES = 2000


def stable_seed(*parts: str) -> int:
    """A seed from names (model, dataset, axis, ...): the same in every process and run."""
    return int.from_bytes(hashlib.sha256("\x1f".join(parts).encode()).digest()[:8], "big")


Values = Sequence[float] | np.ndarray


def bootstrap_mean_ci(
    values: Values, seed: int, resamples: int = DEFAULT_RESAMPLES, level: float = 0.95
) -> tuple[float | None, float | None]:
    return bootstrap_pooled_ci([values], seed, resamples, level)


def bootstrap_pooled_ci(
    groups: Sequence[Values],
    seed: int,
    resamples: int = DEFAULT_RESAMPLES,
    level: float = 0.95,
) -> tuple[float | None, float | None]:
    """Interval for the equal-weight mean of group means; None when there is no spread
    to resample (fewer than two values in every group). Non-finite values are left out
    (they are missing measurements, not numbers to average)."""
    arrays = [np.asarray(g, dtype=np.float64) for g in groups]
    arrays = [a[np.isfinite(a)] for a in arrays]
    arrays = [a for a in arrays if len(a)]
    if not arrays or all(len(a) < 2 for a in arrays):
        return None, None
    rng = np.random.default_rng(seed)
    means = np.zeros(resamples)
    for values in arrays:
        picks = rng.integers(0, len(values), size=(resamples, len(values)))
        means += values[picks].mean(axis=1)
    means /= len(arrays)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)
