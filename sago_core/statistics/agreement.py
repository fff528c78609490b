"""Agreement between two raters on binary labels: percent agreement and Cohen's kappa.

kappa = (p_o - p_e) / (1 - p_e), p_o the observed agreement, p_e the agreement expected from
each rater's label frequencies. When p_e = 1 (both raters constant and equal) kappa is
undefined (None).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass


@dataclass(frozen=True)
class Agreement:
    n: int
    percent: float | None
    kappa: float | None


def agreement(a: Sequence[int | None], b: Sequence[int | None]) -> Agreement:
    pairs = [(x, y) for x, y in zip(a, b, strict=True) if x is not None and y is not None]
    n = len(pairs)
    if not n:
        return Agreement(0, None, None)
    observed = sum(x == y for x, y in pairs) / n
    labels = {x for pair in pairs for x in pair}
    expected = sum(
        (sum(x == label for x, _ in pairs) / n) * (sum(y == label for _, y in pairs) / n)
        for label in labels
    )
    kappa = None if expected == 1 else (observed - expected) / (1 - expected)
    return Agreement(n, 100.0 * observed, kappa)
