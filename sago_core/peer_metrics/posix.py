"""POSIX's per-instance sensitivity psi (Chatterjee et al. 2024, arXiv:2410.02185):

    psi = 1 / (N (N - 1)) * sum_{i != j} (1 / L_{y_j}) |log P(y_j | x_i) - log P(y_j | x_j)|

over the N intent-aligned prompts x_i of one instance and their answers y_j (L: tokens of
y_j); POSIX is the mean of psi over instances. sago teacher-forces the base answer only, so
it has the ordered pairs (x_i = a variant, y_j = the base answer): psi here is the mean over
those N - 1 pairs (``coverage`` in peer_metrics.parquet says so)."""

from __future__ import annotations

from collections.abc import Sequence


def posix_psi(
    answer_logprob_under_variants: Sequence[float], answer_logprob: float, answer_tokens: int
) -> float | None:
    """Mean over variants of |log P(y | x_variant) - log P(y | x)| / L_y for the answer y to
    prompt x; None without a variant or without answer tokens."""
    if not answer_logprob_under_variants or answer_tokens <= 0:
        return None
    terms = [abs(lp - answer_logprob) / answer_tokens for lp in answer_logprob_under_variants]
    return sum(terms) / len(terms)
