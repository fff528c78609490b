"""The prompt-induced excess of one (prompt, variant) pair at T > 0, per axis kind.

Text axes (BLEU, BERTScore), from ``distances.PairDistances``:
D = mean of d over the K_variant x K_base cross pairs, W_base and W_variant = mean of d over
the ordered pairs i != j within each set, and E = D - (W_base + W_variant) / 2. D and both W
are U-statistics (means over pairs of distinct samples), so E is an unbiased estimate of
E d(V, B) - (E d(B, B') + E d(V, V')) / 2, which is 0 when variant and base samples come
from one distribution (for a metric d it is half the energy distance, >= 0 in expectation;
a single draw can be negative).

K = 1 on both sides (T = 0, today's run): there are no within pairs, and E = D exactly,
the distance of the one variant answer to the one base answer; with ``similarity_distance``
that is minus today's normalised delta, so the per-prompt RMS and SGS are today's. With one
sample on one side and several on the other, the missing W cannot be estimated and E is
None with a reason (a T > 0 run has K samples on both sides; this is a lost sample).

Mirroring is not a distance: its excess is the share of variant samples the detector flags
minus the share of base samples the same detector flags for the same variant's surface
feature (at K = 1: M(y^v, v) - M(y, v), today's delta).

Prob and Ent are teacher-forced on the base samples: the mean over base samples of the value
under the variant prompt minus the mean under the base prompt (at K = 1: today's delta).

A sample without a verdict or a value (None) makes the pair's excess None with a reason:
averaging the rest would silently change what is compared.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sago_core.sampling import inputs
from sago_core.sampling.distances import PairDistances


@dataclass(frozen=True)
class Excess:
    """E of a text axis with its parts; ``value`` None when ``missing_reason`` says why."""

    value: float | None
    cross: float  # D
    within_base: float | None  # W_base (None at K_base = 1)
    within_variant: float | None  # W_variant
    k_variant: int
    k_base: int
    missing_reason: str | None = None


@dataclass(frozen=True)
class ShareExcess:
    """Mirroring's excess: share of flagged variant samples minus share of flagged base
    samples."""

    value: float | None
    share_variant: float | None
    share_base: float | None
    k_variant: int
    k_base: int
    missing_reason: str | None = None


@dataclass(frozen=True)
class TeacherForcedDelta:
    """Prob or Ent at T > 0: mean over base samples under the variant prompt minus the mean
    under the base prompt."""

    value: float | None
    mean_variant_prompt: float | None
    mean_base_prompt: float | None
    k_base: int
    missing_reason: str | None = None


def within_mean(within: np.ndarray) -> float | None:
    """Mean of d over the ordered pairs i != j of a square matrix; None below 2 samples."""
    k = within.shape[0]
    if k < 2:
        return None
    return float((within.sum() - np.trace(within)) / (k * (k - 1)))


def excess(distances: PairDistances) -> Excess:
    """E = D - (W_base + W_variant) / 2; E = D when both sides hold one sample."""
    cross = float(distances.cross.mean())
    w_base = within_mean(distances.within_base)
    w_variant = within_mean(distances.within_variant)
    k_v, k_b = distances.k_variant, distances.k_base
    if w_base is None and w_variant is None:
        return Excess(cross, cross, None, None, k_v, k_b)
    if w_base is None or w_variant is None:
        side = "base" if w_base is None else "variant"
        reason = (
            f"one {side} sample beside {max(k_v, k_b)} on the other side: "
            f"W_{side} needs at least 2 samples"
        )
        return Excess(None, cross, w_base, w_variant, k_v, k_b, reason)
    return Excess(cross - (w_base + w_variant) / 2, cross, w_base, w_variant, k_v, k_b)


def _missing(values: np.ndarray, name: str) -> str | None:
    absent = int(np.isnan(values).sum())
    return f"{absent} of {len(values)} {name} have no value" if absent else None


def mirroring_excess(
    variant_flags: Sequence[bool | None], base_flags: Sequence[bool | None]
) -> ShareExcess:
    """Share of variant samples flagged minus share of base samples flagged (the same
    detector, the same variant's surface feature); None marks a sample without a verdict."""
    variant = inputs.flags(variant_flags, "variant_flags")
    base = inputs.flags(base_flags, "base_flags")
    reason = _missing(variant, "variant samples' flags") or _missing(base, "base samples' flags")
    if reason:
        return ShareExcess(None, None, None, len(variant), len(base), reason)
    share_v, share_b = float(variant.mean()), float(base.mean())
    return ShareExcess(share_v - share_b, share_v, share_b, len(variant), len(base))


def teacher_forced_mean(values: Sequence[float | None]) -> tuple[float | None, str | None]:
    """Mean over base samples of a teacher-forced value (log-probability or mean entropy of
    base sample j under one prompt); (None, reason) when a sample has no value."""
    array = inputs.measurements(values, "teacher-forced values")
    reason = _missing(array, "base samples")
    return (None, reason) if reason else (float(array.mean()), None)


def teacher_forced_delta(
    under_variant: Sequence[float | None], under_base: Sequence[float | None]
) -> TeacherForcedDelta:
    """Element j of both: base sample j teacher-forced under the variant prompt and under the
    base prompt. Delta = mean of the first minus mean of the second."""
    if len(under_variant) != len(under_base):
        raise ValueError(
            f"under_variant and under_base: one value per base sample each, got "
            f"{len(under_variant)} and {len(under_base)}"
        )
    mean_v, reason_v = teacher_forced_mean(under_variant)
    mean_b, reason_b = teacher_forced_mean(under_base)
    k = len(under_base)
    if mean_v is None or mean_b is None:
        reason = f"under the variant prompt: {reason_v}" if reason_v else None
        reason = reason or f"under the base prompt: {reason_b}"
        return TeacherForcedDelta(None, mean_v, mean_b, k, reason)
    return TeacherForcedDelta(mean_v - mean_b, mean_v, mean_b, k)
