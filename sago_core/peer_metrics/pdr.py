"""PromptBench's performance drop rate (Zhu et al. 2023, arXiv:2306.04528): for an attack A
on prompt P over a dataset D,

    PDR = 1 - sum_{(x, y) in D} M[f([A(P), x]), y] / sum_{(x, y) in D} M[f([P, x]), y]

(M: 1 when the answer is right). In sago the attack is one variant (family, subtype,
strength, position: the same perturbation applied to every instance), P the base prompt."""

from __future__ import annotations

from collections.abc import Sequence


def pdr(base_correct: Sequence[float], variant_correct: Sequence[float]) -> float | None:
    """Over paired verdicts (one per instance: right or not, or at K > 1 the share of its
    samples that are right); None when the base is never right (the rate divides by the
    base's performance)."""
    if len(base_correct) != len(variant_correct):
        raise ValueError("pdr needs one variant verdict per base verdict")
    base = sum(base_correct)
    if base == 0:
        return None
    return 1.0 - sum(variant_correct) / base
