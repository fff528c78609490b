"""POSIX's per-instance sensitivity psi (Chatterjee et al. 2024, arXiv:2410.02185):

    psi = 1 / (N (N - 1)) * sum_{i != j} (1 / L_{y_j}) |log P(y_j | x_i) - log P(y_j | x_j)|

over the N intent-aligned prompts x_i of one instance and their answers y_j (L: tokens of
y_j); POSIX is the mean of psi over instances. ``posix_full_psi`` is that formula, over the
matrix of stages/posix_matrix.py (``RunConfig.posix_matrix``). ``posix_psi`` is its column
j = base alone, the ordered pairs (x_i = a variant, y_j = the base answer) the analysis
stage always scores: ``posix_base_column`` in peer_metrics.parquet.

The released package (``prompt-sensitivity-index``, github.com/kowndinya-renduchintala/POSIX,
``posix.py``) sums |M[j][i] - M[j][j]| with M[i][k] = log P(y_k | x_i): log P(y_i | x_j)
against log P(y_j | x_j), two answers under one prompt, the transpose of the paper's (one
answer under two prompts); and it divides by ``max_new_tokens``, not by L_{y_j}."""

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


def posix_full_psi(
    logprob: Sequence[Sequence[float | None]], answer_tokens: Sequence[int]
) -> float | None:
    """The paper's psi of one instance: ``logprob[i][j]`` = log P(y_j | x_i) (row: the prompt
    text, column: whose answer), ``answer_tokens[j]`` = L_{y_j}. The mean over the ordered
    pairs i != j whose log P(y_j | x_i) and log P(y_j | x_j) are known and L_{y_j} > 0 of
    |log P(y_j | x_i) - log P(y_j | x_j)| / L_{y_j}: with every pair known, the paper's sum
    over N (N - 1). None without such a pair."""
    n = len(answer_tokens)
    terms = []
    for j in range(n):
        own = logprob[j][j]
        if own is None or answer_tokens[j] <= 0:
            continue
        for i in range(n):
            other = logprob[i][j]
            if i != j and other is not None:
                terms.append(abs(other - own) / answer_tokens[j])
    return sum(terms) / len(terms) if terms else None
