"""The smallest effect a one-sided one-sample t-test detects with given power at N."""

from __future__ import annotations


def minimum_detectable_effect(n: int, alpha: float = 0.05, power: float = 0.8) -> float | None:
    """Smallest standardised effect d = (mean - eps) / sd with P(reject) >= power.

    Exact, from the noncentral t distribution (noncentrality d * sqrt(n), df n - 1).
    Multiply by the scores' standard deviation for the effect in SGS units.
    """
    if n < 2:
        return None
    from scipy import optimize, stats  # lazy: imported only when a test is run

    df = n - 1
    critical = stats.t.ppf(1 - alpha, df)

    def shortfall(d: float) -> float:
        return float(stats.nct.sf(critical, df, d * n**0.5) - power)

    return float(optimize.brentq(shortfall, 1e-9, 100.0))
