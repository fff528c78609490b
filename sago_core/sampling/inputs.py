"""The input checks every sampling statistic shares: a clear ``ValueError`` for bad input
(wrong shape, no samples, NaN), so a caller's mistake never turns into a number."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def matrix(values: object, rows: int, cols: int, name: str) -> np.ndarray:
    """``values`` as a finite float (rows x cols) matrix."""
    array = np.asarray(values, dtype=np.float64)
    if array.shape != (rows, cols):
        raise ValueError(f"{name}: expected a {rows} x {cols} matrix, got shape {array.shape}")
    if not np.isfinite(array).all():
        raise ValueError(f"{name}: holds NaN or infinite values")
    return array


def square(values: object, name: str) -> np.ndarray:
    """``values`` as a finite float square matrix with at least one row."""
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 2 or array.shape[0] != array.shape[1]:
        raise ValueError(f"{name}: expected a square matrix, got shape {array.shape}")
    if array.shape[0] < 1:
        raise ValueError(f"{name}: needs at least one sample (K >= 1)")
    if not np.isfinite(array).all():
        raise ValueError(f"{name}: holds NaN or infinite values")
    return array


def count(k: int, name: str) -> int:
    """A number of samples: K >= 1."""
    if k < 1:
        raise ValueError(f"{name}: needs at least one sample (K >= 1), got {k}")
    return k


def flags(values: Sequence[bool | None], name: str) -> np.ndarray:
    """Detector or correctness flags as a float array, 1.0 / 0.0, NaN where a sample has no
    verdict (None). Anything but a bool or None is refused (a 0.5 is not a flag)."""
    count(len(values), name)
    out = np.empty(len(values), dtype=np.float64)
    for i, flag in enumerate(values):
        if flag is None:
            out[i] = np.nan
        elif isinstance(flag, bool | np.bool_):
            out[i] = float(flag)
        else:
            raise ValueError(f"{name}[{i}]: expected True, False or None, got {flag!r}")
    return out


def measurements(values: Sequence[float | None], name: str) -> np.ndarray:
    """Per-sample measurements as floats, NaN where a sample has none (None). A NaN or
    infinite number is refused: a missing value is said with None, not with a NaN."""
    count(len(values), name)
    out = np.empty(len(values), dtype=np.float64)
    for i, value in enumerate(values):
        if value is None:
            out[i] = np.nan
            continue
        number = float(value)
        if not np.isfinite(number):
            raise ValueError(f"{name}[{i}]: {value!r} is not a finite number (use None)")
        out[i] = number
    return out
