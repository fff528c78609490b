"""Partial correlation of two OOD scores across checkpoints, controlling for the ID score.

The consistency study's question: regress both OOD scores on the ID score, correlate the
residuals. Two adjustments:

- ``linear`` (the published study's method): the design is (1, ID). The t-test has n - 3 df.
- ``spline``: a natural (restricted) cubic spline of the ID score, Harrell's basis, with k
  knots at his recommended quantiles of the ID scores (3 knots: the 10th, 50th and 90th
  percentiles; table ``KNOT_QUANTILES``, 3 to 7 knots). It is linear beyond the outer knots
  and has k columns (intercept, ID and k - 2 curvature terms), so the t-test has
  n - k - 1 df.

How many knots (``knots_for``): unless the caller fixes k, as many as leave at least half
of the checkpoints as residual degrees of freedom, k = n // 2 - 1, kept within Harrell's
3..7 (n <= 9: 3; 10-11: 4; 12-13: 5; 14-15: 6; from 16: 7). More knots follow a curved ID
-> OOD relation more closely but cost degrees of freedom, so the number grows with the data.

The limit, measured (``tests/unit/test_spline_knots.py``, 200 simulated studies): the
spline *reduces* the curvature a linear adjustment leaves in both OOD scores; it does not
remove it. Both OOD scores following ID along the same saturating curve (1 - exp(-6 ID),
independent noise, true partial correlation 0), 20 checkpoints, 5% test: with noise sd 0.05
the linear adjustment calls 96% of such studies significant, 3 knots 70%, the rule's 7
knots 2.5%; with noise sd 0.02, 3 knots 96% and the rule 15%. A relation curved more
sharply than the knots can follow, relative to the noise, still shows up as a partial
correlation: read a significant spline r beside the linear one and the scores themselves.

In general df = n - rank(design) - 1; a result needs df >= 1, otherwise r is NA with the
reason. Two adjustments never share residuals: each test uses its own design's df.

The permutation test (``block_permutation_p``) respects checkpoint order: the second score's
residuals are cut into contiguous blocks of ``block_length`` checkpoints (the last may be
shorter) and only whole blocks are reordered, so neighbouring checkpoints, which are
autocorrelated, stay together (Kennedy's residual permutation, in blocks). All orderings are
enumerated when there are at most ``MAX_EXACT`` of them; otherwise ``draws`` seeded random
orderings (p = (1 + hits) / (1 + draws)). With m blocks the smallest attainable exact p is
1 / m!; when that exceeds alpha the test cannot reject anything, and p is NA with that
reason (blocks of 2 need at least 7 checkpoints at alpha 0.05: 4 blocks, 24 orderings).
Whether a *corrected* p can reach alpha is the study's design check
(``sago_core.study.design``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import permutations
from typing import Literal

import numpy as np

Adjustment = Literal["linear", "spline"]
ADJUSTMENTS: tuple[Adjustment, ...] = ("linear", "spline")
DEFAULT_KNOTS = 3
# Harrell, Regression Modeling Strategies (2nd ed.), table 2.3: knot quantiles by count.
KNOT_QUANTILES: dict[int, tuple[float, ...]] = {
    3: (0.10, 0.50, 0.90),
    4: (0.05, 0.35, 0.65, 0.95),
    5: (0.05, 0.275, 0.50, 0.725, 0.95),
    6: (0.05, 0.23, 0.41, 0.59, 0.77, 0.95),
    7: (0.025, 0.1833, 0.3417, 0.50, 0.6583, 0.8167, 0.975),
}
MAX_EXACT = 5040  # 7! block orderings
DEFAULT_DRAWS = 9999


@dataclass(frozen=True)
class PartialCorrelation:
    r: float | None
    p_value: float | None
    n: int
    df: int | None = None  # residual degrees of freedom of the t-test
    reason: str | None = None  # why r is NA
    rx: np.ndarray | None = None  # residuals after the adjustment (for the permutation test)
    ry: np.ndarray | None = None


def knots_for(n: int, requested: int | None = None) -> int:
    """The spline's knots for ``n`` checkpoints: ``requested`` when given, else
    n // 2 - 1 within 3..7 (at least half the checkpoints left as residual df; module doc)."""
    if requested is not None:
        return requested
    return min(max(KNOT_QUANTILES), max(min(KNOT_QUANTILES), n // 2 - 1))


def design_columns(method: Adjustment, knots: int = DEFAULT_KNOTS) -> int:
    """Columns of the adjustment's design, the intercept included."""
    return 2 if method == "linear" else knots


def minimum_checkpoints(method: Adjustment, knots: int | None = None) -> int:
    """The fewest checkpoints that leave the t-test one degree of freedom (the spline by
    the rule: 3 knots at so few checkpoints)."""
    return design_columns(method, DEFAULT_KNOTS if knots is None else knots) + 2


def spline_knots(control: np.ndarray, count: int = DEFAULT_KNOTS) -> np.ndarray:
    if count not in KNOT_QUANTILES:
        raise ValueError(f"spline knots must be one of {sorted(KNOT_QUANTILES)}, not {count}")
    return np.quantile(control, KNOT_QUANTILES[count])


def natural_spline_basis(z: np.ndarray, knots: np.ndarray) -> np.ndarray:
    """Harrell's restricted cubic spline basis: columns 1, z and k - 2 curvature terms.

    Term j: (z - t_j)+^3 - (z - t_{k-1})+^3 (t_k - t_j)/(t_k - t_{k-1})
    + (z - t_k)+^3 (t_{k-1} - t_j)/(t_k - t_{k-1}), divided by (t_k - t_1)^2 for scale.
    """
    t = np.asarray(knots, dtype=np.float64)
    k = len(t)
    scale = (t[-1] - t[0]) ** 2

    def cube(v: np.ndarray) -> np.ndarray:
        return np.clip(v, 0.0, None) ** 3

    columns = [np.ones_like(z), z]
    for j in range(k - 2):
        term = (
            cube(z - t[j])
            - cube(z - t[k - 2]) * (t[k - 1] - t[j]) / (t[k - 1] - t[k - 2])
            + cube(z - t[k - 1]) * (t[k - 2] - t[j]) / (t[k - 1] - t[k - 2])
        )
        columns.append(term / scale)
    return np.column_stack(columns)


def adjustment_design(
    control: np.ndarray, method: Adjustment, knots: int = DEFAULT_KNOTS
) -> tuple[np.ndarray | None, str | None]:
    """The design matrix of the adjustment, or None with the reason it cannot be built."""
    if method == "linear":
        return np.column_stack([np.ones_like(control), control]), None
    if method != "spline":
        raise ValueError(f"unknown adjustment {method!r}; use one of {ADJUSTMENTS}")
    positions = spline_knots(control, knots)
    if len(np.unique(positions)) < knots:
        return None, f"the ID scores take too few distinct values for {knots} spline knots"
    return natural_spline_basis(control, positions), None


def _residuals(y: np.ndarray, design: np.ndarray) -> np.ndarray:
    coefficients, *_ = np.linalg.lstsq(design, y, rcond=None)
    return y - design @ coefficients


def _negligible(residuals: np.ndarray, values: np.ndarray) -> bool:
    spread = float(np.abs(values - values.mean()).max()) if len(values) else 0.0
    return spread == 0.0 or float(np.abs(residuals).max()) <= 1e-9 * spread


def _correlation(a: np.ndarray, b: np.ndarray) -> float:
    a, b = a - a.mean(), b - b.mean()
    denominator = math.sqrt(float(a @ a) * float(b @ b))
    return float(np.clip((a @ b) / denominator, -1.0, 1.0)) if denominator > 0 else 0.0


Values = Sequence[float] | np.ndarray


def partial_correlation(
    x: Values,
    y: Values,
    control: Values,
    method: Adjustment = "linear",
    knots: int | None = None,
) -> PartialCorrelation:
    """``knots``: the spline's knots; None chooses them by the number of checkpoints
    (``knots_for``)."""
    xs, ys, zs = (np.asarray(v, dtype=np.float64) for v in (x, y, control))
    n = len(xs)
    if not len(ys) == len(zs) == n:
        raise ValueError("x, y and control must have the same length")
    knots = knots_for(n, knots)
    needed = minimum_checkpoints(method, knots)
    if n < needed:
        return PartialCorrelation(
            None,
            None,
            n,
            reason=f"{n} checkpoints with all three scores; the {method} adjustment needs "
            f"at least {needed}",
        )
    for name, values in (("first OOD", xs), ("second OOD", ys), ("ID", zs)):
        if np.ptp(values) == 0:
            return PartialCorrelation(
                None, None, n, reason=f"the {name} score is the same for every checkpoint"
            )
    design, why = adjustment_design(zs, method, knots)
    if design is None:
        return PartialCorrelation(None, None, n, reason=why)
    df = n - int(np.linalg.matrix_rank(design)) - 1
    if df < 1:
        return PartialCorrelation(
            None, None, n, reason=f"no degree of freedom left after the {method} adjustment"
        )
    rx, ry = _residuals(xs, design), _residuals(ys, design)
    if _negligible(rx, xs) or _negligible(ry, ys):
        # Nothing left after controlling for ID (one ID explains a score exactly):
        # floating-point crumbs of a least-squares fit must not become an r.
        return PartialCorrelation(
            None, None, n, df, reason="the residuals after controlling for ID are constant"
        )
    r = float(np.clip((rx @ ry) / math.sqrt((rx @ rx) * (ry @ ry)), -1.0, 1.0))
    if abs(r) < 1e-12:  # orthogonal residuals up to rounding: no sign to report
        r = 0.0
    if abs(r) == 1.0:
        return PartialCorrelation(r, 0.0, n, df, rx=rx, ry=ry)
    from scipy import stats  # lazy: imported only when computed

    t = r * math.sqrt(df / (1 - r**2))
    return PartialCorrelation(r, float(2 * stats.t.sf(abs(t), df)), n, df, rx=rx, ry=ry)


def blocks_of(n: int, block_length: int) -> list[np.ndarray]:
    """Contiguous index blocks in checkpoint order; the last one may be shorter."""
    if block_length < 1:
        raise ValueError("block_length must be at least 1")
    return [np.arange(start, min(start + block_length, n)) for start in range(0, n, block_length)]


def smallest_permutation_p(n: int, block_length: int, draws: int = DEFAULT_DRAWS) -> float:
    m = len(blocks_of(n, block_length))
    count = math.factorial(m)
    return 1.0 / count if count <= MAX_EXACT else 1.0 / (draws + 1)


def checkpoints_for_permutation(block_length: int, alpha: float) -> int:
    """The fewest checkpoints whose block orderings can reach p <= alpha."""
    n = block_length
    while smallest_permutation_p(n, block_length) > alpha:
        n += block_length
    return n - block_length + 1  # a short last block counts as a block


@dataclass(frozen=True)
class PermutationResult:
    p_value: float | None
    orderings: int  # orderings evaluated (exact: all of them, the identity included)
    exact: bool
    reason: str | None = None


def block_permutation_p(
    rx: np.ndarray,
    ry: np.ndarray,
    block_length: int = 2,
    alpha: float = 0.05,
    draws: int = DEFAULT_DRAWS,
    seed: int = 0,
) -> PermutationResult:
    """Two-sided p of corr(rx, ry) against ry's blocks reordered (see the module doc)."""
    n = len(rx)
    blocks = blocks_of(n, block_length)
    m = len(blocks)
    smallest = smallest_permutation_p(n, block_length, draws)
    if smallest > alpha:
        return PermutationResult(
            None,
            math.factorial(m),
            True,
            f"{n} checkpoints make {m} blocks of {block_length}: {math.factorial(m)} orderings, "
            f"smallest p {smallest:.3g} > alpha {alpha:g}; at least "
            f"{checkpoints_for_permutation(block_length, alpha)} checkpoints are needed",
        )
    observed = abs(_correlation(rx, ry)) - 1e-12
    exact = math.factorial(m) <= MAX_EXACT
    if exact:
        orders: list[tuple[int, ...]] = list(permutations(range(m)))
    else:
        rng = np.random.default_rng(seed)
        orders = [tuple(int(i) for i in rng.permutation(m)) for _ in range(draws)]
    hits = 0
    for order in orders:
        index = np.concatenate([blocks[i] for i in order])
        hits += abs(_correlation(rx, ry[index])) >= observed
    if exact:
        return PermutationResult(hits / len(orders), len(orders), True)
    return PermutationResult((1 + hits) / (1 + draws), draws, False)


def critical_r(df: int, alpha: float = 0.05) -> float | None:
    """The smallest |r| a two-sided t-test with ``df`` degrees of freedom calls significant."""
    if df < 1:
        return None
    from scipy import stats

    t = float(stats.t.ppf(1 - alpha / 2, df))
    return t / math.sqrt(df + t * t)


def detectable_r(n: int, controls: int, alpha: float = 0.05, power: float = 0.8) -> float | None:
    """Minimum detectable |partial r| with ``power`` at ``alpha`` (two-sided), Fisher's z
    approximation with standard error 1 / sqrt(n - controls - 3); ``controls`` counts the
    design's columns besides the intercept (linear 1, spline knots - 1)."""
    if n - controls - 3 < 1:
        return None
    from scipy import stats

    z = (stats.norm.ppf(1 - alpha / 2) + stats.norm.ppf(power)) / math.sqrt(n - controls - 3)
    return float(math.tanh(z))
