"""Design-based estimates of the full grid's scores from a budgeted sample of its cells.

Per prompt i and axis: the mean square MS_i = (1/V_i) sum_v d(i, v)^2 (d the normalised
delta) is estimated by the stratified mean of the sampled cells,
``MS^_i = sum_h W_ih mean_{sampled v in h} d^2``, W_ih = V_ih / V_i: unbiased for MS_i under
the design (design.py: a simple random sample within each stratum of each sampled prompt;
written as Horvitz-Thompson, it is sum over sampled cells of d^2 / (V_i pi_v|i)). Its
variance is the stratified formula ``sum_h W_ih^2 (1 - m_ih/V_ih) S_ih^2 / m_ih``, S_ih^2
the sample variance of d^2 in (i, h) (design.py asks for two cells per stratum and prompt),
shrunk towards the stratum's relative variance pooled over the prompts: S^2 = (df S_ih^2 +
k R_h mean_ih^2) / (df + k), R_h = sum df S^2 / sum df mean^2, k = ``SHRINK``. A cell whose
axis is missing (a failed measurement) is left out of that axis as unsampled; a stratum
with none left is dropped from the prompt's weights (renormalised).

The root: s_i = sqrt(MS_i) and E[sqrt(MS^)] < sqrt(MS) (Jensen). Two estimates of that bias:
a bootstrap of the second stage (the cells of each (prompt, stratum) resampled with
replacement, m - 1 draws rescaled by sqrt(1 - m/V): Rao and Wu 1988, JASA 83:231, which
makes the bootstrap variance of a stratified mean equal the design formula above; bias =
mean_b sqrt(MS*_b) - sqrt(MS^), Efron and Tibshirani 1993 section 10.4), and the second-order
delta method (bias = -sqrt(MS^) CV^2 / 8, CV^2 = Var(MS^)/MS^2 from the shrunk variances,
capped at 1). The corrected root removes the larger of the two (capped at
``MAX_CORRECTION`` of the root): with two or three cells of a stratum the bootstrap cannot
see a heavy tail it did not draw (Prob, Ent, Act: a delta scale that grows with strength),
while the shrunk variance borrows the dataset's tails; on 0/1-like axes (BLEU, MR) the
bootstrap's is the larger. Its variance is, likewise, the larger of the bootstrap variance
of sqrt(MS*) and the delta method's Var(MS^)/(4 MS^) (capped at MS^: Var(sqrt X) <= E[X]).
Measured on the synthetic paper grid at 20% (200 replays, bench/budget.py): the bootstrap
alone left SGS biased by -0.3 of its standard error on Act and Ent and covered 0.88-0.91
there; the larger of the two left -0.1 to +0.1 and covered 0.91-0.97 on every axis. The
delta method alone, or a Satterthwaite chi-square reading of MS^, underestimated the root's
variance by 10-30%.

A prompt whose sampled cells all show 0 (a sparse, 0/1-like axis such as MR, where a prompt
holds a handful of events among its variants) has MS^ = 0, a root of 0 and, by both methods,
no variance, though its unsampled cells may hold events. Its root's variance is floored at
``ms_up / 4``: ms_up = sum_h W_ih (1 - 0.05^(1/m_ih)) c_h over its strata not fully asked,
the exact one-sided 95% upper bound on a stratum's event rate after 0 events in m_ih cells
(Clopper-Pearson) times c_h, the mean non-zero d^2 of the stratum's sampled cells over the
dataset's prompts (the dataset's, where the stratum shows none; no floor where the dataset
shows no non-zero cell at all). sqrt(ms_up) / 2, half the root's upper bound, is then its
standard error. Measured with bench/budget.py on a synthetic paper-size grid whose MR is a
0/1 event at a real run's per-prompt rates: MR's coverage at 20% of the grid 0.62 without
the floor, 0.98 with it (the bias of a 0 root is not removed, the interval is widened to
the width the error needs); moving the root itself up to half its bound over-corrected (+0.8
to +5.7 standard errors) and is not done.

Dataset SGS^ = mean of the corrected roots over the sampled prompts (a simple random sample
of the dataset's prompts); its design variance is the two-stage formula (Cochran 1977, eq.
10.21 with the first stage's finite-population correction) ``(1 - n/N) s_b^2 / n + (1 / (n
N)) sum_i v_i``, s_b^2 the sample variance of the roots, v_i each root's bootstrap variance:
prompts analytically, then cells within a prompt by the bootstrap. With every prompt sampled
(n = N) the first term is zero: the interval is then for the full grid's value over these
prompts, and its width is what the budget costs. Pooled = equal-weight mean over datasets,
variance sum_j v_j / D^2.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sago_core.budget.design import Layout

RESAMPLES = 200
# The bias correction moves a root by at most this share of it (a prompt with a handful of
# cells and a huge spread is corrected no further than the c4 constant of two observations).
MAX_CORRECTION = 0.25
# Weight (in degrees of freedom) of the pooled relative variance in each prompt's stratum
# variance: a prompt's own S^2 from two or three cells is too noisy to set an interval.
SHRINK = 4.0
# One-sided level of the upper bound on a stratum's event rate when its cells show none.
ZERO_BOUND_ALPHA = 0.05
Z95 = 1.959963984540054


@dataclass(frozen=True)
class PromptEstimates:
    """Per prompt (NaN where the prompt is not sampled or holds no measured cell)."""

    ms: np.ndarray
    ms_var: np.ndarray
    root: np.ndarray  # sqrt(MS^), uncorrected
    s: np.ndarray  # corrected root
    s_var: np.ndarray


@dataclass(frozen=True)
class Estimate:
    """A score and the design variance of its estimate of the full grid's value."""

    value: float
    variance: float
    prompts: int

    def half_width(self, z: float = Z95) -> float:
        return float(z * np.sqrt(max(self.variance, 0.0)))


def _stratum_sums(layout: Layout, values: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per (prompt, stratum): count, mean of d^2 and sample variance of d^2 (NaN below 2)."""
    shape = layout.sizes.shape
    seen = np.isfinite(values)
    sq = np.where(seen, values, 0.0) ** 2
    p, h = layout.prompt_code, layout.stratum
    count = np.zeros(shape)
    total = np.zeros(shape)
    total2 = np.zeros(shape)
    np.add.at(count, (p, h), seen)
    np.add.at(total, (p, h), sq)
    np.add.at(total2, (p, h), sq**2)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean = total / count
        var = (total2 - count * mean**2) / (count - 1)
    var = np.where(count >= 2, np.maximum(var, 0.0), np.nan)
    return count, mean, var


def _pooled_relative(count: np.ndarray, mean: np.ndarray, var: np.ndarray) -> np.ndarray:
    """Per stratum: the within-prompt relative variance of d^2 pooled over prompts,
    sum df S^2 / sum df mean^2 (NaN where no prompt holds two cells)."""
    df = np.where(count >= 2, count - 1, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        num = (df * np.nan_to_num(var)).sum(axis=0)
        den = (df * np.nan_to_num(mean) ** 2).sum(axis=0)
        return np.where(den > 0, num / den, np.where(df.sum(axis=0) > 0, 0.0, np.nan))


def estimate_prompts(
    layout: Layout,
    values: np.ndarray,
    correct: bool = True,
    seed: int = 0,
    resamples: int = RESAMPLES,
) -> PromptEstimates:
    """``values``: one axis' normalised delta per grid cell, NaN where not sampled or
    missing. ``correct``: remove the root's bias (bootstrap); False keeps sqrt(MS^)."""
    count, mean, var = _stratum_sums(layout, values)
    relative = _pooled_relative(count, mean, var)
    prior = relative[None, :] * np.nan_to_num(mean) ** 2
    df = np.where(count >= 2, count - 1, 0.0)
    with np.errstate(invalid="ignore", divide="ignore"):
        shrunk = (df * np.nan_to_num(var) + SHRINK * prior) / (df + SHRINK)
    var = np.where(np.isfinite(shrunk), shrunk, np.nan_to_num(var))
    size = layout.sizes.astype(np.float64)
    present = count > 0
    weight_total = np.where(present, size, 0.0).sum(axis=1)
    with np.errstate(invalid="ignore", divide="ignore"):
        weight = np.where(present, size, 0.0) / weight_total[:, None]
        ms = np.where(present, weight * np.nan_to_num(mean), 0.0).sum(axis=1)
        fpc = np.where(present, 1.0 - count / size, 0.0)
        term = np.where(present, weight**2 * fpc * var / np.maximum(count, 1), 0.0)
        ms_var = term.sum(axis=1)
    measured = weight_total > 0
    ms = np.where(measured, ms, np.nan)
    ms_var = np.where(measured, ms_var, np.nan)
    root = np.sqrt(ms)
    boot_mean, boot_var = bootstrap_roots(layout, values, resamples, seed)
    with np.errstate(invalid="ignore", divide="ignore"):
        delta_bias = -root * np.minimum(np.where(ms > 0, ms_var / ms**2, 0.0), 1.0) / 8
    bias = np.minimum(boot_mean - root, delta_bias)
    bias = np.clip(bias, -MAX_CORRECTION * root, MAX_CORRECTION * root)
    s = root - bias if correct else root
    with np.errstate(invalid="ignore", divide="ignore"):
        delta_var = np.where(ms > 0, np.minimum(ms_var / (4 * ms), ms), 0.0)
    s_var = np.where(measured, np.maximum(boot_var, delta_var), np.nan)
    floor = zero_root_floor(layout, values, count, mean, weight)
    s_var = np.where(measured & (ms == 0), np.maximum(s_var, floor), s_var)
    return PromptEstimates(ms, ms_var, root, s, s_var)


def zero_root_floor(
    layout: Layout, values: np.ndarray, count: np.ndarray, mean: np.ndarray, weight: np.ndarray
) -> np.ndarray:
    """Per prompt: ms_up / 4 (see the module's docstring), the floor on the root's variance
    of a prompt whose sampled cells all show 0; 0 where every cell of the prompt was asked
    or its dataset shows no non-zero cell. ``weight``: the prompt's stratum weights W_ih."""
    seen = np.isfinite(values)
    sq = np.where(seen, values, 0.0) ** 2
    hit = seen & (sq > 0)
    strata = len(layout.strata)
    hits = np.bincount(layout.stratum, weights=hit, minlength=strata)
    total = np.bincount(layout.stratum, weights=np.where(hit, sq, 0.0), minlength=strata)
    cell_dataset = layout.stratum_dataset[layout.stratum]
    d_hits = np.bincount(cell_dataset, weights=hit, minlength=len(layout.datasets))
    d_total = np.bincount(
        cell_dataset, weights=np.where(hit, sq, 0.0), minlength=len(layout.datasets)
    )
    with np.errstate(invalid="ignore", divide="ignore"):
        d_mean = np.where(d_hits > 0, d_total / d_hits, 0.0)
        c = np.where(hits > 0, total / hits, d_mean[layout.stratum_dataset])
        bound = np.where(count > 0, 1.0 - ZERO_BOUND_ALPHA ** (1.0 / count), 0.0)
    open_ = (count > 0) & (count < layout.sizes) & (np.nan_to_num(mean) == 0)
    ms_up = np.where(open_, np.nan_to_num(weight) * bound * c[None, :], 0.0).sum(axis=1)
    return ms_up / 4


def dataset_estimate(
    s: np.ndarray, s_var: np.ndarray, sampled: int, population: int
) -> Estimate | None:
    """SGS of one dataset from its sampled prompts' corrected roots (NaN: no measurement).
    None when no prompt holds a value."""
    keep = np.isfinite(s)
    n = int(keep.sum())
    if n == 0:
        return None
    values = s[keep]
    between = float(np.var(values, ddof=1)) if n >= 2 else 0.0
    first = (1 - sampled / population) * between / n
    second = float(s_var[keep].sum()) / (n * population)
    return Estimate(float(values.mean()), first + second, n)


def pooled_estimate(estimates: list[Estimate | None]) -> Estimate | None:
    """Equal-weight mean over the datasets holding a value."""
    held = [e for e in estimates if e is not None]
    if not held:
        return None
    d = len(held)
    return Estimate(
        sum(e.value for e in held) / d,
        sum(e.variance for e in held) / d**2,
        sum(e.prompts for e in held),
    )


def axis_estimates(
    layout: Layout,
    values: np.ndarray,
    sampled_prompts: np.ndarray,
    correct: bool = True,
    seed: int = 0,
    resamples: int = RESAMPLES,
) -> tuple[PromptEstimates, list[Estimate | None], Estimate | None]:
    """Per-prompt, per-dataset and pooled estimates of one axis."""
    prompts = estimate_prompts(layout, values, correct, seed, resamples)
    population = layout.prompts_per_dataset
    per_dataset = [
        dataset_estimate(
            prompts.s[layout.prompt_dataset == j],
            prompts.s_var[layout.prompt_dataset == j],
            int(sampled_prompts[j]),
            int(population[j]),
        )
        for j in range(len(layout.datasets))
    ]
    return prompts, per_dataset, pooled_estimate(per_dataset)


def full_scores(layout: Layout, values: np.ndarray) -> np.ndarray:
    """The full grid's per-prompt scores s_i = sqrt(mean d^2) (spec section 6), NaN where a
    prompt has no measured cell: the values a budgeted estimate is compared with."""
    seen = np.isfinite(values)
    total = np.zeros(len(layout.prompts))
    count = np.zeros(len(layout.prompts))
    np.add.at(total, layout.prompt_code, np.where(seen, values, 0.0) ** 2)
    np.add.at(count, layout.prompt_code, seen)
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(count > 0, np.sqrt(total / count), np.nan)


def bootstrap_roots(
    layout: Layout, values: np.ndarray, resamples: int, seed: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per prompt: mean and variance of sqrt(MS*) over second-stage resamples (cells drawn
    with replacement within each (prompt, stratum), m - 1 draws, Rao-Wu rescaled). NaN for
    a prompt without a measured cell."""
    rng = np.random.default_rng(seed)
    strata = len(layout.strata)
    seen = np.flatnonzero(np.isfinite(values))
    group = layout.prompt_code[seen] * strata + layout.stratum[seen]
    order = np.argsort(group, kind="stable")
    cells, group = seen[order], group[order]
    ms_star = np.zeros((resamples, len(layout.prompts)))
    measured = np.zeros(len(layout.prompts), dtype=bool)
    if len(group) == 0:
        return np.full(len(layout.prompts), np.nan), np.full(len(layout.prompts), np.nan)
    starts = np.r_[0, np.flatnonzero(np.diff(group)) + 1]
    sizes = np.diff(np.r_[starts, len(group)])
    g_prompt, g_stratum = group[starts] // strata, group[starts] % strata
    measured[g_prompt] = True
    population = layout.sizes[g_prompt, g_stratum].astype(np.float64)
    weight = population / np.bincount(g_prompt, weights=population)[g_prompt]
    sq = values[cells] ** 2
    mean = np.add.reduceat(sq, starts) / sizes
    scale = np.sqrt(np.clip(1 - sizes / population, 0.0, 1.0))
    rows = np.arange(resamples)[:, None]
    # groups of one size are resampled together: (resamples, groups, draws) at once; a
    # prompt may own several groups of one size, so the sums go through np.add.at
    for size in np.unique(sizes):
        which = np.flatnonzero(sizes == size)
        if size == 1:  # one cell: nothing to resample (a one-kind stratum, or one measured)
            rescaled = np.broadcast_to(mean[which], (resamples, len(which)))
        else:
            picks = rng.integers(0, size, size=(resamples, len(which), size - 1))
            boot = sq[starts[which][None, :, None] + picks].mean(axis=2)
            rescaled = mean[which] + scale[which] * (boot - mean[which])
        np.add.at(ms_star, (rows, g_prompt[which][None, :]), weight[which] * rescaled)
    roots = np.sqrt(np.maximum(ms_star, 0.0))
    boot_mean = np.where(measured, roots.mean(axis=0), np.nan)
    boot_var = np.where(measured, roots.var(axis=0, ddof=1), np.nan)
    return boot_mean, boot_var
