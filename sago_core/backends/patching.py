"""The activation-patching request: one teacher-forced forward with one layer's state replaced.

``PatchRequest``: teacher-force ``response_token_ids`` after ``prompt`` (exactly as the
scoring pass does, same rendering, same token ids) and, when ``layer`` is set, replace the
output of decoder layer ``layer`` (1..L, the residual stream after that layer) at the last
prompt token with ``state``. ``layer`` None: the plain forward (the reference rows).

``PatchedScore``: log p(response | prompt) summed over the response tokens (the Prob axis'
quantity), the full log-softmax of the first answer token's next-token distribution, and
every layer's output at the last prompt token (L, *state_shape) after the patch, the states a
later request can patch in (the last layer's output before the decoder's final norm).

Only backends that run the model's layers can patch (``can_patch``); the others leave the
stage's rows missing with a reason.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import numpy as np


@dataclass(frozen=True)
class PatchRequest:
    prompt: str
    response_token_ids: tuple[int, ...]
    layer: int | None = None
    state: np.ndarray | None = None


@dataclass(frozen=True)
class PatchedScore:
    logprob: float
    first_token_logprobs: np.ndarray | None  # (vocab,) float32; None without a response
    states: np.ndarray  # (layers, *state_shape) float32 at the last prompt token


@runtime_checkable
class Patcher(Protocol):
    n_layers: int

    def patch(
        self,
        requests: Sequence[PatchRequest],
        batch_size: int,
        max_batch_tokens: int | None = None,
    ) -> list[PatchedScore]: ...


def patcher_of(backend: Any) -> Patcher | None:
    """The engine that can patch for ``backend``: itself (transformers) or its transformers
    scorer (vLLM generates, transformers scores the same weights); None for the others."""
    if isinstance(backend, Patcher):
        return backend
    scorer = getattr(backend, "scorer", None)
    if callable(scorer):
        engine = scorer()
        if isinstance(engine, Patcher):
            return engine
    return None


def declared_layers(location: str | None, gguf_file: str | None) -> int | None:
    """Decoder layers a local folder's config.json declares (its text config's
    ``num_hidden_layers``), read without loading weights; None for a GGUF file, a hub id or
    a folder without one (the dry run then counts layers as L)."""
    if location is None or gguf_file is not None:
        return None
    path = Path(location) / "config.json"
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    text = config.get("text_config") if isinstance(config.get("text_config"), dict) else config
    layers = text.get("num_hidden_layers")
    return int(layers) if isinstance(layers, int) and layers > 0 else None
