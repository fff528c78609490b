"""Bootstrap confidence intervals for SGS, resampling prompts, and the one rule for when an
interval is drawn at all.

Pooled SGS is an equal-weight mean over datasets, so its bootstrap resamples prompts within
each dataset (stratified) and recomputes that same mean. Percentile intervals, seeded.

Small strata: a dataset's resampled mean varies (n_d - 1) / n_d as much as its mean does
(the plug-in variance), so with few prompts per dataset the stratified band is too narrow
(a dataset of 1 prompt adds no spread at all, of 2 half). ``bootstrap_pooled_ci`` rescales
each dataset's resampled mean's deviation from that dataset's mean by sqrt(n_d / (n_d - 1)),
the usual small-stratum correction, and ``pooled_refusal`` draws no pooled interval when a
dataset in the pool holds fewer than ``MIN_PER_STRATUM`` (2) prompts with a value. What
remains (normal scores, 6 datasets x 2 prompts, 95% nominal, 3000 simulated runs of 1000
resamples, measured once): the corrected band covers the true pooled mean 0.90 of the time,
the uncorrected one 0.77 (``test_pooled_band_covers_with_two_prompts_per_dataset`` in
tests/unit/test_statistics.py reruns 400 of them and asserts at least 0.85); the rest of
the gap is the percentile band's z where a t with few degrees of freedom belongs. A single
dataset (a dataset row, a paired difference) gets the same rescaling.

Too few prompts (``MIN_PROMPTS``): every bootstrap interval in sago (summary, tails, paired,
layer profiles, patching recovery) resamples prompts, and is drawn only when at least
``MIN_PROMPTS`` prompts hold a value on what is measured (a prompt in the subset without a
measurement does not count). Below that the interval is missing (None) with the reason from
``interval_refusal``, never a band. Why 5: a percentile bootstrap band from n prompts is
built from at most C(2n-1, n) distinct resamples (3 at n = 2, where the band is exactly
[smaller value, larger value]), and a nominal 95% band of a mean covers the truth (normal
data, 2000 simulations) 0.50 of the time at n = 2, 0.76 at 3, 0.81 at 4, 0.83 at 5, 0.86 at
6 and 0.90 at 10. Below 5 a band is mostly an artefact of which prompts were drawn; from 5
on it is a rough but honest interval, shown with its prompt count so a reader can weigh it.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import numpy as np

DEFAULT_RESAMPLES = 2000
MIN_PROMPTS = 5
MIN_PER_STRATUM = 2


def stable_seed(*parts: str) -> int:
    """A seed from names (model, dataset, axis, ...): the same in every process and run."""
    return int.from_bytes(hashlib.sha256("\x1f".join(parts).encode()).digest()[:8], "big")


def interval_refusal(n_prompts: int, what: str = "") -> str | None:
    """Why no bootstrap interval is drawn from ``n_prompts`` prompts with a value (None when
    there are enough). ``what`` names the interval when a row holds several."""
    if n_prompts >= MIN_PROMPTS:
        return None
    prefix = f"{what}: " if what else ""
    return (
        f"{prefix}{n_prompts} prompt(s) with a value, fewer than {MIN_PROMPTS}: "
        "no bootstrap interval"
    )


def pooled_refusal(sizes: Sequence[int], what: str = "") -> str | None:
    """Why no stratified bootstrap interval is drawn over datasets holding ``sizes`` prompts
    with a value (a dataset without one is not in the pool and is left out): fewer than
    ``MIN_PROMPTS`` in all (``interval_refusal``), or, when several datasets are pooled, one
    of them with fewer than ``MIN_PER_STRATUM`` (its prompts are always all redrawn, so it
    adds no spread). None when an interval is drawn."""
    held = [int(n) for n in sizes if n > 0]
    total = interval_refusal(sum(held), what)
    if total is not None or len(held) < 2:
        return total
    few = sum(1 for n in held if n < MIN_PER_STRATUM)
    if not few:
        return None
    prefix = f"{what}: " if what else ""
    return (
        f"{prefix}{few} of {len(held)} pooled datasets hold fewer than {MIN_PER_STRATUM} "
        "prompts with a value (a bootstrap within each dataset draws no spread from them): "
        "no bootstrap interval"
    )


def expanded_tail(n_prompts: int, level: float = 0.95) -> float:
    """The lower percentile (in %) of an expanded percentile bootstrap band from
    ``n_prompts`` resampled prompts (Hesterberg 2015, "What teachers should know about the
    bootstrap", section 3.2): Phi(-sqrt(n / (n - 1)) t_{(1 + level) / 2, n - 1}) instead of
    (1 - level) / 2. It undoes the plain percentile band's two small-sample narrowings (the
    bootstrap's variance is (n - 1) / n of the sample's, and z where t belongs): with 10
    prompts the 95% band takes the 0.86th and 99.14th percentiles. Used where a band is
    drawn from few clusters (layer profiles, patching recovery); the upper percentile is
    100 minus it."""
    from scipy import stats  # lazy: only a band drawn pays for scipy

    n = max(int(n_prompts), 2)
    quantile = stats.t.ppf((1 + level) / 2, n - 1)
    return float(stats.norm.cdf(-np.sqrt(n / (n - 1)) * quantile) * 100)


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
    """Interval for the equal-weight mean of group means (one value per prompt), prompts
    resampled within each group, each group's resampled mean's deviation from its mean
    scaled by sqrt(n / (n - 1)); None when ``pooled_refusal`` refuses (it says why).
    Non-finite values are left out (they are missing measurements, not numbers to
    average)."""
    arrays = [np.asarray(g, dtype=np.float64) for g in groups]
    arrays = [a[np.isfinite(a)] for a in arrays]
    arrays = [a for a in arrays if len(a)]
    if pooled_refusal([len(a) for a in arrays]) is not None:
        return None, None
    rng = np.random.default_rng(seed)
    means = np.zeros(resamples)
    for values in arrays:
        picks = rng.integers(0, len(values), size=(resamples, len(values)))
        centre = values.mean()
        scale = np.sqrt(len(values) / (len(values) - 1))
        means += centre + (values[picks].mean(axis=1) - centre) * scale
    means /= len(arrays)
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(means, [tail, 100 - tail])
    return float(low), float(high)
