"""ProSA's PromptSensiScore of one instance: the mean over unordered pairs of its prompt
variants of |Y(p_i) - Y(p_j)|, Y the evaluation score of the answer to p_i (ProSA, Zhuo et
al. 2024, arXiv:2410.12405). A dataset's PSS is the mean over its instances."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import combinations


def pss(scores: Sequence[float]) -> float | None:
    """None with fewer than two scored prompts (no pair to compare)."""
    if len(scores) < 2:
        return None
    gaps = [abs(a - b) for a, b in combinations(scores, 2)]
    return sum(gaps) / len(gaps)
