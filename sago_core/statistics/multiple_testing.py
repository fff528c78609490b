"""Holm and Benjamini-Hochberg adjusted p-values over a family of tests.

A missing p-value (None, or NaN as a null becomes in a numpy array) stays missing and is not
a member of the family: m counts only the tests that have a p-value, and one missing p never
turns the others into NaN.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np


def _present(pvalues: Sequence[float | None]) -> tuple[np.ndarray, np.ndarray]:
    index = np.array(
        [i for i, p in enumerate(pvalues) if p is not None and not np.isnan(p)], dtype=int
    )
    values = np.array([pvalues[i] for i in index], dtype=np.float64)
    return index, values


def _scatter(n: int, index: np.ndarray, adjusted: np.ndarray) -> list[float | None]:
    out: list[float | None] = [None] * n
    for i, value in zip(index, adjusted, strict=True):
        out[int(i)] = float(value)
    return out


def _adjust(
    pvalues: Sequence[float | None], step: Callable[[np.ndarray, int], np.ndarray]
) -> list[float | None]:
    """``step`` maps the m present p-values, sorted ascending, to their adjusted values."""
    index, p = _present(pvalues)
    m = len(p)
    if m == 0:
        return [None] * len(pvalues)
    order = np.argsort(p, kind="stable")
    adjusted = np.empty(m)
    adjusted[order] = np.minimum(1.0, step(p[order], m))
    return _scatter(len(pvalues), index, adjusted)


def holm(pvalues: Sequence[float | None]) -> list[float | None]:
    """Holm step-down: p_(k) * (m - k + 1), made monotone, capped at 1."""
    return _adjust(pvalues, lambda p, m: np.maximum.accumulate(p * (m - np.arange(m))))


def benjamini_hochberg(pvalues: Sequence[float | None]) -> list[float | None]:
    """BH step-up: p_(k) * m / k, made monotone from the largest down, capped at 1."""
    return _adjust(
        pvalues, lambda p, m: np.minimum.accumulate((p * m / np.arange(1, m + 1))[::-1])[::-1]
    )
