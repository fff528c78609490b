"""Activation geometry: per-layer cosine between last-prompt-token hidden states."""

from __future__ import annotations

import numpy as np
import polars as pl

from sago_core.axes.likelihood import teacher_forced_reason


def layer_cosines(variant: np.ndarray, base: np.ndarray) -> np.ndarray:
    """cos(h_l(x^v), h_l(x)) for every layer l; inputs are (layers, hidden) arrays.

    Computed in float64. Identical states give exactly 1.0, so a prompt compared with itself
    has an Act delta of exactly zero rather than rounding noise. A layer whose states hold a
    NaN or inf has a NaN cosine (the delta is then missing as a non-finite measurement),
    never a made-up 0.
    """
    if variant.shape != base.shape:
        raise ValueError(f"hidden-state shapes differ: {variant.shape} vs {base.shape}")
    v = variant.astype(np.float64)
    b = base.astype(np.float64)
    broken = ~(np.isfinite(v).all(axis=1) & np.isfinite(b).all(axis=1))
    norms = np.linalg.norm(v, axis=1) * np.linalg.norm(b, axis=1)
    cos = np.divide((v * b).sum(axis=1), norms, out=np.zeros(len(v)), where=norms > 0)
    cos[np.all(v == b, axis=1)] = 1.0
    cos = np.clip(cos, -1.0, 1.0)
    cos[broken] = np.nan
    return cos


def act_delta_rule() -> tuple[pl.Expr, pl.Expr]:
    """The Act axis (registry/axes.py): the stored mean per-layer cosine minus 1."""
    return pl.col("act_cos_mean") - 1.0, teacher_forced_reason()
