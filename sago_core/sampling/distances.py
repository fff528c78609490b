"""The distances between the K samples of one (prompt, variant) pair and the K samples of its
base: every number the excess and the permutation test read.

A distance is ``d(hypothesis, reference)``, in that order, because BLEU is not symmetric:
today's delta scores the variant's answer against the base answer as reference, so the cross
distances are ``d(variant sample i, base sample j)``. Within a set, ``d(x_i, x_j)`` is taken
for every ordered pair i != j (both directions), so an asymmetric d needs no choice there.
The diagonal of a within matrix (a sample against itself) is never read.

For BLEU and BERTScore the distance is ``1 - similarity / scale`` (``answers.TextDistances``)
with scale the axis's range R_X (100 for BLEU, 1 for BERTScore-F1), so at K = 1 the
distance is minus today's normalised delta: ``Delta / R_X = similarity / R_X - 1``.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

import numpy as np

from sago_core.sampling import inputs

Sample = TypeVar("Sample")


@dataclass(frozen=True)
class PairDistances:
    """Distances of one (prompt, variant) pair's samples, built by ``from_matrices`` or
    ``measure_distances`` (which check them).

    ``cross[i, j] = d(variant_i, base_j)``; ``cross_reverse[j, i] = d(base_j, variant_i)``
    (needed only when the permutation test relabels samples; the transpose of ``cross`` for
    a symmetric d); ``within_variant[i, i2] = d(variant_i, variant_i2)``, likewise
    ``within_base``."""

    cross: np.ndarray
    cross_reverse: np.ndarray
    within_variant: np.ndarray
    within_base: np.ndarray

    @property
    def k_variant(self) -> int:
        return int(self.cross.shape[0])

    @property
    def k_base(self) -> int:
        return int(self.cross.shape[1])

    def pooled(self) -> np.ndarray:
        """The (K_variant + K_base) square matrix of every ordered pair, variant samples
        first, diagonal zero: what a relabelling of the pooled samples reads."""
        top = np.hstack([self.within_variant, self.cross])
        bottom = np.hstack([self.cross_reverse, self.within_base])
        out = np.vstack([top, bottom])
        np.fill_diagonal(out, 0.0)
        return out


def from_matrices(
    cross: object,
    within_base: object,
    within_variant: object,
    cross_reverse: object | None = None,
) -> PairDistances:
    """Checked distances from precomputed matrices: ``cross`` (K_variant x K_base),
    ``within_base`` (K_base square), ``within_variant`` (K_variant square) and, for an
    asymmetric d, ``cross_reverse`` (K_base x K_variant; default: ``cross`` transposed)."""
    base = inputs.square(within_base, "within_base")
    variant = inputs.square(within_variant, "within_variant")
    k_variant, k_base = variant.shape[0], base.shape[0]
    forward = inputs.matrix(cross, k_variant, k_base, "cross (K_variant x K_base)")
    reverse = (
        forward.T.copy()
        if cross_reverse is None
        else inputs.matrix(cross_reverse, k_base, k_variant, "cross_reverse (K_base x K_variant)")
    )
    return PairDistances(forward, reverse, variant, base)


def pairwise(samples: Sequence[Sample], distance: Callable[[Sample, Sample], float]) -> np.ndarray:
    """``distance(samples[i], samples[j])`` for every ordered pair i != j; the diagonal 0."""
    n = len(samples)
    matrix = np.zeros((n, n), dtype=np.float64)
    for i in range(n):
        for j in range(n):
            if i != j:
                matrix[i, j] = distance(samples[i], samples[j])
    return matrix


def measure_distances(
    variant: Sequence[Sample],
    base: Sequence[Sample],
    distance: Callable[[Sample, Sample], float],
) -> PairDistances:
    """Every distance between the samples, ``distance(hypothesis, reference)`` called once
    per ordered pair of distinct samples (the diagonal is never asked)."""
    inputs.count(len(variant), "variant samples")
    inputs.count(len(base), "base samples")
    matrix = pairwise([*variant, *base], distance)
    k = len(variant)
    return from_matrices(
        matrix[:k, k:], matrix[k:, k:], matrix[:k, :k], cross_reverse=matrix[k:, :k]
    )
