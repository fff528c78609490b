"""The backend contract: two batch requests, each precisely defined.

``generate``: greedy (T=0) completion of each prompt, wrapped in the model's chat template
when it has one, at most ``max_new_tokens`` new tokens. The returned token ids are exactly
the generated ids up to and including the first end-of-sequence token, so the scoring pass
can reuse them without re-tokenising decoded text. With ``sampling`` (T > 0) each prompt is
sampled instead, from a generator of its own seeded with its seed: its answer depends on
its prompt and seed alone, never on which other prompts share its batch. Each answer then
records the settings the backend applied (``Generation.sampling``). Callers pass
``sampling`` only when they sample, so a backend that never samples may omit the argument.

``score``: teacher forcing of ``response_token_ids`` after the templated ``prompt``. Returns
the hidden state of the last prompt token at every transformer layer (not the embedding
output), log p(response | prompt) summed over response tokens, and the mean over response
positions of the full next-token distribution's entropy (nats). A backend that cannot give
one of these returns None for it, and the pipeline records the axis as missing.

Where Act is read: ``hidden`` is taken at the last token of the prompt as the model sees it
(the rendered chat prompt's last token, e.g. the end of the assistant header, where the
answer starts). ``hidden_user`` is taken at the last token of the user's own text inside
that rendered prompt, a diagnostic recorded beside it; without a chat template both are
the same position. A non-finite log-probability or entropy (e.g. -inf logits in bf16) is
returned as it is; the pipeline records it as missing.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any, Protocol

import numpy as np


@dataclass(frozen=True)
class Generation:
    response_text: str
    response_token_ids: tuple[int, ...]
    finish_reason: str  # "stop" (end-of-sequence generated) or "length"; "failed" on failure
    # Set when no valid answer came back (API: typed reason after retries). The row is kept
    # as failed and never scored as an empty answer.
    failure_reason: str | None = None
    # API answers: what the provider says answered (served model, system_fingerprint,
    # version headers; backends/api_served.py), added to the row's ``engine`` JSON
    served: dict[str, str] | None = None
    # Sampled answers (T > 0): the sampling the backend applied to this row (its seed
    # included), added to the row's ``engine`` JSON under "sampling"
    sampling: dict[str, Any] | None = None


@dataclass(frozen=True)
class Sampling:
    """Random decoding of one ``generate`` call: the logits divided by ``temperature`` (> 0),
    then the ``top_k`` likeliest tokens kept (0: all), then the smallest set of likeliest
    tokens whose probability reaches ``top_p`` (1: all); ``seeds``: one per prompt."""

    temperature: float
    top_p: float
    top_k: int
    seeds: tuple[int, ...]

    def rows(self, indices: Sequence[int]) -> Sampling:
        """The same settings for the prompts at ``indices`` (a call of some of the rows)."""
        return replace(self, seeds=tuple(self.seeds[i] for i in indices))

    def record(self, row: int, **applied: Any) -> dict[str, Any]:
        """Row ``row``'s ``Generation.sampling``: the settings, its seed and what the
        backend adds (``applied``: how it sampled, whether the seed reproduces it)."""
        return {
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "seed": self.seeds[row],
            **applied,
        }


@dataclass(frozen=True)
class ScoringRequest:
    prompt: str
    response_token_ids: tuple[int, ...]


@dataclass(frozen=True)
class TeacherForced:
    # (layers, hidden_size) float32 at the rendered prompt's last token (where Act is read)
    hidden: np.ndarray | None
    logprob: float | None
    mean_entropy: float | None
    n_response_tokens: int
    missing_reason: str | None = None  # why hidden/logprob/entropy are None, if they are
    # (layers, hidden_size) float32 at the last token of the user's own text; None where a
    # backend does not give it
    hidden_user: np.ndarray | None = None


class Backend(Protocol):
    """``repeats_within_call`` (optional, default False): the backend tells a repeated
    prompt apart only within one ``generate`` call (the API backend's request keys), so the
    noise floor's replay is sent in the call of its base instead of a call of its own."""

    name: str

    def generate(
        self,
        prompts: Sequence[str],
        max_new_tokens: int,
        batch_size: int,
        sampling: Sampling | None = None,
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
