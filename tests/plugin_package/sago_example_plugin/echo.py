"""``echo:<name>``: answers "You asked: <the prompt>", cut at max_new_tokens words.

The mock backend's teacher-forced pass (hidden states, log-probabilities seeded by the
prompt) is reused as it is, so every axis is measured.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sago_core.backends.mock import MockBackend
from sago_core.backends.protocol import Generation, Sampling

OPENING = "You asked:"


def echo_answer(prompt: str, max_new_tokens: int) -> str:
    return " ".join(f"{OPENING} {prompt}".split()[:max_new_tokens])


class EchoBackend(MockBackend):
    name = "echo"

    def generate(
        self,
        prompts: Sequence[str],
        max_new_tokens: int,
        batch_size: int,
        sampling: Sampling | None = None,
    ) -> list[Generation]:
        if sampling is not None:  # sampled answers: the mock's seeded word swaps
            return super().generate(prompts, max_new_tokens, batch_size, sampling)
        self._record("generate", prompts)
        answers = [echo_answer(p, max_new_tokens) for p in prompts]
        return [Generation(a, tuple(range(len(a.split()))), "stop") for a in answers]

    def describe(self) -> dict[str, str]:
        return {"backend": self.name, "model": self.model_id, "decoding": "echo"}


def open_target(target: Any, places: Any, api_key: str | None, device: str) -> EchoBackend:
    """The ``echo`` backend's builder (its ``BackendSpec``)."""
    return EchoBackend(target.model_id)
