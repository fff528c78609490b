"""Partial correlation of two OOD scores across checkpoints, controlling for the ID score.

Seed 003: regress both OOD scores on the ID score (with intercept), correlate the residuals.
The p-value uses a t statistic with n - 3 degrees of freedom (one controlled variable).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class PartialCorrelation:
    r: float | None
    p_value: float | None
    n: int


def _residuals(y: np.ndarray, control: np.ndarray) -> np.ndarray:
    design = np.column_stack([np.ones_like(control), control])
    coefficients, *_ = np.linalg.lstsq(design, y, rcond=None)
    return y - design @ coefficients


def _negligible(residuals: np.ndarray, values: np.ndarray) -> bool:
    spread = float(np.abs(values - values.mean()).max()) if len(values) else 0.0
    return spread == 0.0 or float(np.abs(residuals).max()) <= 1e-9 * spread


def partial_correlation(
    x: Sequence[float], y: Sequence[float], control: Sequence[float]
) -> PartialCorrelation:
    xs, ys, zs = (np.asarray(v, dtype=np.float64) for v in (x, y, control))
    n = len(xs)
    if not len(ys) == len(zs) == n:
        raise ValueError("x, y and control must have the same length")
    if n < 4:
        return PartialCorrelation(None, None, n)
    rx, ry = _residuals(xs, zs), _residuals(ys, zs)
    if _negligible(rx, xs) or _negligible(ry, ys):
        # Nothing left after controlling for ID (a constant score, or one ID explains
        # exactly): floating-point crumbs of a least-squares fit must not become an r.
        return PartialCorrelation(None, None, n)
    denominator = np.sqrt((rx @ rx) * (ry @ ry))
    r = float(np.clip((rx @ ry) / denominator, -1.0, 1.0))
    if abs(r) < 1e-12:  # orthogonal residuals up to rounding: no sign to report
        r = 0.0
    from scipy import stats  # lazy: imported only when computed

    df = n - 3
    if abs(r) == 1.0:
        return PartialCorrelation(r, 0.0, n)
    t = r * np.sqrt(df / (1 - r**2))
    return PartialCorrelation(r, float(2 * stats.t.sf(abs(t), df)), n)
