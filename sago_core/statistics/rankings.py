"""Do model rankings on one dataset predict those on another? Kendall's tau, reversals."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import combinations


@dataclass(frozen=True)
class RankAgreement:
    dataset_a: str
    dataset_b: str
    tau: float | None
    p_value: float | None
    n_models: int


@dataclass(frozen=True)
class RankReversal:
    model_a: str
    model_b: str
    dataset_a: str
    dataset_b: str  # model_a is more stable than model_b on dataset_a, less on dataset_b


def rank_agreement(scores: dict[str, dict[str, float]]) -> list[RankAgreement]:
    """``scores[dataset][model]`` (lower = more stable): tau for every pair of datasets."""
    from scipy import stats  # lazy: imported only when computed

    out = []
    for a, b in combinations(sorted(scores), 2):
        models = sorted(set(scores[a]) & set(scores[b]))
        if len(models) < 3:
            out.append(RankAgreement(a, b, None, None, len(models)))
            continue
        result = stats.kendalltau([scores[a][m] for m in models], [scores[b][m] for m in models])
        tau = None if result.statistic != result.statistic else float(result.statistic)
        p = None if result.pvalue != result.pvalue else float(result.pvalue)
        out.append(RankAgreement(a, b, tau, p, len(models)))
    return out


def rank_reversals(scores: dict[str, dict[str, float]]) -> list[RankReversal]:
    """Every pair of models whose order flips between two datasets (ties are no order)."""
    out = []
    for a, b in combinations(sorted(scores), 2):
        models = sorted(set(scores[a]) & set(scores[b]))
        for m1, m2 in combinations(models, 2):
            first = scores[a][m1] - scores[a][m2]
            second = scores[b][m1] - scores[b][m2]
            if first * second < 0:
                better, worse = (m1, m2) if first < 0 else (m2, m1)
                out.append(RankReversal(better, worse, a, b))
    return out
