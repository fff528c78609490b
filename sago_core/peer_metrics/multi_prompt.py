"""The multi-prompt statistics of "State of What Art?" (Mizrahi et al. 2024,
arXiv:2401.00595) over a set of prompt templates, each with its performance (accuracy):
MaxP, the best template's; AvgP, their mean; and the combined performance score

    saturation = 1 - (MaxP - AvgP),  CPS = saturation * MaxP

(MaxP - AvgP: how far the average template falls short of the best; the saturation is 1
when every template does as well as the best). The performances are accuracies over the
same instances: those every template answered with a verdict."""

from __future__ import annotations

from collections.abc import Sequence


def max_p(performances: Sequence[float]) -> float:
    return max(performances)


def avg_p(performances: Sequence[float]) -> float:
    return sum(performances) / len(performances)


def cps(max_performance: float, avg_performance: float) -> float:
    return (1.0 - (max_performance - avg_performance)) * max_performance
