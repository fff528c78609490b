"""Answer-flip rates at T > 0, counted only beyond the base's own self-flip rate.

At T = 0 a flip is a (base answer, variant answer) pair whose verdict against the reference
answers changes (``statistics/tails.py``: right -> wrong, wrong -> right). At T > 0 two base
samples already disagree, so the variant's flip rate over its K_base x K_variant (base
sample, variant sample) pairs is compared with the base's self-flip rate over the ordered
pairs (base sample i, base sample j), i != j: the excess is the first minus the second, 0 in
expectation when the variant leaves the share of right answers unchanged (both rates then
estimate p (1 - p) without bias).

K = 1 on both sides: no base pair exists, the self-flip rate is 0 and the excess is today's
flip (1 or 0 for the one pair). One base sample beside several variant samples: the
self-flip rate cannot be measured, the excess is None with a reason. A sample without a
verdict (None: no reference answer, no answer) makes the excess None with a reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from sago_core.sampling import inputs


@dataclass(frozen=True)
class FlipExcess:
    """Rates for one direction pair; ``*_excess`` = variant rate - base self-flip rate."""

    right_to_wrong: float | None  # variant rate: base sample right, variant sample wrong
    wrong_to_right: float | None
    self_right_to_wrong: float | None  # base sample i right, base sample j != i wrong
    self_wrong_to_right: float | None
    right_to_wrong_excess: float | None
    wrong_to_right_excess: float | None
    k_variant: int
    k_base: int
    missing_reason: str | None = None


def _reason(base: np.ndarray, variant: np.ndarray) -> str | None:
    for name, values in (("base", base), ("variant", variant)):
        absent = int(np.isnan(values).sum())
        if absent:
            return f"{absent} of {len(values)} {name} samples have no verdict"
    if len(base) == 1 and len(variant) > 1:
        return (
            f"one base sample beside {len(variant)} variant samples: the self-flip rate "
            "needs at least 2 base samples"
        )
    return None


def flip_excess(
    base_correct: Sequence[bool | None], variant_correct: Sequence[bool | None]
) -> FlipExcess:
    """Flip rates of one (prompt, variant) pair from each sample's verdict (True: right)."""
    base = inputs.flags(base_correct, "base_correct")
    variant = inputs.flags(variant_correct, "variant_correct")
    k_b, k_v = len(base), len(variant)
    reason = _reason(base, variant)
    if reason:
        return FlipExcess(None, None, None, None, None, None, k_v, k_b, reason)
    right_b, right_v = base.sum(), variant.sum()
    wrong_b, wrong_v = k_b - right_b, k_v - right_v
    to_wrong = float(right_b * wrong_v / (k_b * k_v))
    to_right = float(wrong_b * right_v / (k_b * k_v))
    if k_b == 1:  # and k_v == 1: today's single pair, no self-flip
        self_to_wrong = self_to_right = 0.0
    else:  # a right i and a wrong j are always distinct samples
        self_to_wrong = self_to_right = float(right_b * wrong_b / (k_b * (k_b - 1)))
    return FlipExcess(
        to_wrong,
        to_right,
        self_to_wrong,
        self_to_right,
        to_wrong - self_to_wrong,
        to_right - self_to_right,
        k_v,
        k_b,
    )
