"""The backend contract: two batch requests, each precisely defined.

``generate``: greedy (T=0) completion of each prompt, wrapped in the model's chat template
when it has one, at most ``max_new_tokens`` new tokens. The returned token ids are exactly
the generated ids up to and including the first end-of-sequence token, so the scoring pass
can reuse them without re-tokenising decoded text.

``score``: teacher forcing of ``response_token_ids`` after the templated ``prompt``. Returns
the hidden state of the last prompt token at every transformer layer (not the embedding
output), log p(response | prompt) summed over response tokens, and the mean over response
positions of the full next-token distribution's entropy (nats). A backend that cannot give
one of these returns None for it, and the pipeline records the axis as missing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np


@dataclass(frozen=True)
class Generation:
    response_text: str
    response_token_ids: tuple[int, ...]
    finish_reason: str  # "stop" (end-of-sequence generated) or "length"; "failed" on failure
    # Set when no valid answer came back (API: typed reason after retries). The row is kept
    # as failed and never scored as an empty answer.
    failure_reason: str | None = None


@dataclass(frozen=True)
class ScoringRequest:
    prompt: str
    response_token_ids: tuple[int, ...]


@dataclass(frozen=True)
class TeacherForced:
    hidden: np.ndarray | None  # (layers, hidden_size) float32
    logprob: float | None
    mean_entropy: float | None
    n_response_tokens: int
    missing_reason: str | None = None  # why hidden/logprob/entropy are None, if they are


class Backend(Protocol):
    name: str

    def generate(
        self, prompts: Sequence[str], max_new_tokens: int, batch_size: int
    ) -> list[Generation]: ...

    def score(
        self,
        requests: Sequence[ScoringRequest],
        batch_size: int,
        max_batch_tokens: int | None = None,
    ) -> list[TeacherForced]: ...

    def encode_response(self, text: str) -> tuple[int, ...] | None:
        """Token ids of ``text`` as an answer (no special tokens), for teacher forcing a
        reference answer; None if the backend cannot tokenise."""
        ...

    def prompt_lengths(self, prompts: Sequence[str]) -> list[int] | None:
        """Tokens each prompt takes as the model sees it; None if the backend cannot count."""
        ...

    def context_window(self) -> int | None:
        """Most tokens (prompt + response) the model takes; None if unknown."""
        ...

    def describe(self) -> dict[str, str]:
        """Backend name, library versions, device and dtype, for the manifest."""
        ...
