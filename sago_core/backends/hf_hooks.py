"""Tensor helpers of the transformers backend's scoring pass (hf.py): the load-time
self-check's comparison within a dtype's tolerance, the rows gathered at given positions
(across devices), and the forward hooks of activation patching."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


def _tolerance(dtype: Any) -> float:
    import torch

    return 1e-4 if dtype == torch.float32 or dtype == torch.float64 else 3e-2


def tensors_close(a: Any, b: Any, dtype: Any) -> tuple[bool, float]:
    """Whether two tensors agree within the dtype's tolerance (relative to their scale)."""
    import torch

    if a is None or b is None:
        return a is None and b is None, 0.0
    if a.shape != b.shape:
        return False, float("inf")
    a, b = a.float(), b.float().to(a.device)
    # equal values (the same -inf of a masked token included) differ by 0, not NaN
    diff = torch.where(a == b, torch.zeros_like(a), a - b)
    error = float(diff.abs().max()) if a.numel() else 0.0
    finite = b[torch.isfinite(b)]
    scale = max(1.0, float(finite.abs().max()) if finite.numel() else 0.0)
    ok = bool(math.isfinite(error)) and error <= _tolerance(dtype) * scale
    return ok, error


def rows_at(hidden: Any, rows: Any, positions: Any) -> Any:
    """``hidden[rows, positions]`` (B, d), gathered onto the rows' device (a model spread
    over several GPUs has its layers, and their outputs, on different devices)."""
    where = hidden.device
    return hidden[rows.to(where), positions.to(where)].to(rows.device)


@dataclass
class Patch:
    """One batch's patches: per row the layer (1..L; 0 = none) whose output at ``positions``
    is replaced by that row's state; ``captured`` gets every layer's output at those
    positions after patching, (B, *state_shape) per layer, in layer order."""

    layers: list[int]
    states: list[Any]  # a tensor where the row is patched, else None
    captured: list[Any]


def state_rows(hidden: Any, rows: Any, positions: Any) -> Any:
    """A layer output's full residual state at ``positions``: (B, d), or (B, streams, d) for
    AltUp's stacked (streams, B, S, d) outputs."""
    where = hidden.device
    if hidden.dim() == 4:
        return hidden[:, rows.to(where), positions.to(where)].transpose(0, 1).to(rows.device)
    return rows_at(hidden, rows, positions)


def patch_hook(layer: int, patch: Patch, rows: Any, positions: Any) -> Callable[..., Any]:
    chosen = [i for i, wanted in enumerate(patch.layers) if wanted == layer]

    def hook(module: Any, inputs: Any, output: Any) -> Any:
        hidden = output[0] if isinstance(output, tuple) else output
        if chosen:
            hidden = hidden.clone()
            for i in chosen:
                value = patch.states[i].to(hidden.device, hidden.dtype)
                position = int(positions[i])
                if hidden.dim() == 4:
                    hidden[:, i, position] = value
                else:
                    hidden[i, position] = value
        patch.captured.append(state_rows(hidden, rows, positions))
        if not chosen:
            return None
        return (hidden, *output[1:]) if isinstance(output, tuple) else hidden

    return hook
