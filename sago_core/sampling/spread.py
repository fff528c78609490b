"""Semantic spread: how many distinct meanings the K samples of one (prompt, variant) hold,
and how evenly the samples spread over them (does the variant make the model less sure of
*what* to say, beyond resampling the base?).

Greedy clustering, in sample order: sample 0 founds the first cluster and is its
representative; each next sample joins the first cluster (in founding order) whose
representative it matches at ``similarity[sample, representative] >= threshold``, else it
founds a new cluster. Deterministic, K^2 / 2 look-ups at most, and it needs only the matrix
the text axes already compute (BERTScore-F1 between samples).

``DEFAULT_THRESHOLD`` = 0.85, BERTScore-F1 with RoBERTa-large (no baseline rescaling): the
value the semantic filter uses to decide that two texts say the same thing (as in the
paper). Another scorer model (or rescaled scores) needs its own calibrated threshold,
passed explicitly.

Entropy of the cluster sizes in nats, H = -sum_c (n_c / K) ln(n_c / K): 0 when every sample
says the same thing, ln K when each says something else (the "semantic entropy" of Kuhn et
al. 2023 with clusters from similarity rather than entailment).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from sago_core.sampling import inputs

DEFAULT_THRESHOLD = 0.85


@dataclass(frozen=True)
class Spread:
    clusters: int  # distinct meanings
    entropy: float  # of the cluster sizes, nats
    sizes: tuple[int, ...]  # samples per cluster, in founding order
    labels: tuple[int, ...]  # each sample's cluster


@dataclass(frozen=True)
class SpreadComparison:
    """Variant minus base: more clusters or more entropy = the variant makes the model less
    sure of what to say."""

    base: Spread
    variant: Spread
    clusters_excess: int
    entropy_excess: float


def cluster_meanings(similarity: object, threshold: float = DEFAULT_THRESHOLD) -> Spread:
    """Greedy clusters of K samples from their K x K similarity matrix (diagonal unread)."""
    if not np.isfinite(threshold):
        raise ValueError(f"threshold: must be a finite number, got {threshold}")
    matrix = inputs.square(similarity, "similarity")
    representatives: list[int] = []
    labels: list[int] = []
    for sample in range(matrix.shape[0]):
        found = next(
            (c for c, rep in enumerate(representatives) if matrix[sample, rep] >= threshold),
            None,
        )
        if found is None:
            found = len(representatives)
            representatives.append(sample)
        labels.append(found)
    sizes = np.bincount(labels)
    shares = sizes / len(labels)
    entropy = float(-(shares * np.log(shares)).sum()) + 0.0  # + 0.0: no -0.0
    return Spread(len(sizes), entropy, tuple(int(s) for s in sizes), tuple(labels))


def compare_spread(
    base_similarity: object, variant_similarity: object, threshold: float = DEFAULT_THRESHOLD
) -> SpreadComparison:
    """Spread of the base's and the variant's samples, each clustered on its own."""
    base = cluster_meanings(base_similarity, threshold)
    variant = cluster_meanings(variant_similarity, threshold)
    return SpreadComparison(
        base, variant, variant.clusters - base.clusters, variant.entropy - base.entropy
    )
