"""``mock:<name>``: a deterministic backend for tests and dry wiring, chosen by name.

It answers from the prompt text alone, so a run is reproducible to the byte, and gives
hidden states, log-probabilities and entropies drawn from a generator seeded by the prompt,
so every axis is filled. Every prompt it is asked is recorded: in memory (``calls``) and,
when ``SAGO_MOCK_CALLS`` names a file, as one JSON line (pid, kind, prompt) appended and
fsynced, so a test can count calls across processes. ``SAGO_MOCK_FAIL_ON=TEXT`` makes a
generation that is asked the prompt TEXT (``*``: any prompt) raise ``MockBackendFailure``: a
backend that falls over mid-run, for resume tests, whatever the batching.
``MockBackend.observers``: callables told (kind, prompt) right after each prompt is
recorded, one prompt at a time, so a harness can act inside a batch.

Sampled (T > 0), an answer varies with its seed, deterministically: each word after the
fixed opening is swapped, with probability min(T, 1) / 2, for a word drawn from a small
list, by a generator seeded with the row's seed (and its prompt). Same seed, same answer,
whatever the batch; so flows can be tested at T > 0 without a model.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np

from sago_core.backends.protocol import Generation, Sampling, ScoringRequest, TeacherForced
from sago_core.errors import SagoError

if TYPE_CHECKING:
    from sago_core.backends.factory import BackendPlaces
    from sago_core.backends.target import ModelTarget

CALLS_ENV = "SAGO_MOCK_CALLS"
FAIL_ENV = "SAGO_MOCK_FAIL_ON"
LAYERS, WIDTH = 2, 4


class MockBackendFailure(SagoError):
    """The failure ``SAGO_MOCK_FAIL_ON`` asked for."""


OPENING = "The answer concerns"
SAMPLED_WORDS = ("perhaps", "mostly", "rivers", "numbers", "history", "nothing", "several")
MOCK_SAMPLER = "mock: seeded word swaps, probability min(T, 1) / 2 per word"


def mock_answer(prompt: str) -> str:
    """Deterministic, prompt-dependent, a few words long."""
    words = [w.strip(".,!?;:").lower() for w in prompt.split()]
    words = [w for w in words if w][:6]
    return f"{OPENING} " + " ".join(reversed(words)) + "."


def sampled_answer(prompt: str, temperature: float, seed: int) -> str:
    """``mock_answer`` with seeded word swaps (``MockBackend`` docstring)."""
    digest = hashlib.sha256(f"{seed}\x1f{prompt}".encode()).digest()
    rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
    opening = len(OPENING.split())
    words = mock_answer(prompt).removesuffix(".").split()
    swap = min(temperature, 1.0) / 2
    for i in range(opening, len(words)):
        if rng.random() < swap:
            words[i] = str(rng.choice(SAMPLED_WORDS))
    return " ".join(words) + "."


class MockBackend:
    name = "mock"
    observers: list[Callable[[str, str], None]] = []  # noqa: RUF012 - shared on purpose

    def __init__(self, model_id: str) -> None:
        self.model_id = model_id
        self.calls: list[tuple[str, str]] = []  # (kind, prompt)

    def _record(self, kind: str, prompts: Sequence[str]) -> None:
        fail_on = os.environ.get(FAIL_ENV)
        if kind == "generate" and fail_on and (fail_on == "*" or fail_on in prompts):
            raise MockBackendFailure(f"mock backend {self.model_id} fell over (asked {fail_on!r})")
        log = os.environ.get(CALLS_ENV)
        for prompt in prompts:
            self.calls.append((kind, prompt))
            if log:
                line = json.dumps({"pid": os.getpid(), "kind": kind, "prompt": prompt})
                with Path(log).open("a", encoding="utf-8") as handle:
                    handle.write(line + "\n")
                    handle.flush()
                    os.fsync(handle.fileno())
            for observe in self.observers:
                observe(kind, prompt)

    def generate(
        self,
        prompts: Sequence[str],
        max_new_tokens: int,
        batch_size: int,
        sampling: Sampling | None = None,
    ) -> list[Generation]:
        self._record("generate", prompts)
        out = []
        for row, prompt in enumerate(prompts):
            if sampling is None:
                words = mock_answer(prompt).split()[:max_new_tokens]
                out.append(Generation(" ".join(words), tuple(range(len(words))), "stop"))
                continue
            text = sampled_answer(prompt, sampling.temperature, sampling.seeds[row])
            words = text.split()[:max_new_tokens]
            applied = sampling.record(row, sampler=MOCK_SAMPLER, reproducible=True)
            out.append(
                Generation(" ".join(words), tuple(range(len(words))), "stop", sampling=applied)
            )
        return out

    def score(
        self,
        requests: Sequence[ScoringRequest],
        batch_size: int,
        max_batch_tokens: int | None = None,
    ) -> list[TeacherForced]:
        self._record("score", [r.prompt for r in requests])
        out = []
        for request in requests:
            seed = int.from_bytes(hashlib.sha256(request.prompt.encode()).digest()[:8], "little")
            rng = np.random.default_rng(seed)
            hidden = rng.normal(size=(LAYERS, WIDTH)).astype(np.float32)
            n = len(request.response_token_ids)
            out.append(TeacherForced(hidden, float(-rng.random()), float(rng.random()), n))
        return out

    def encode_response(self, text: str) -> tuple[int, ...] | None:
        return tuple(range(len(text.split())))

    def prompt_lengths(self, prompts: Sequence[str]) -> list[int] | None:
        return [len(p.split()) for p in prompts]

    def context_window(self) -> int | None:
        return None

    def describe(self) -> dict[str, str]:
        return {"backend": self.name, "model": self.model_id, "decoding": "deterministic mock"}


def open_target(
    target: ModelTarget, places: BackendPlaces, api_key: str | None, device: str
) -> MockBackend:
    """The ``mock`` backend's builder (registry/backends.py)."""
    return MockBackend(target.model_id)
