"""A deterministic in-process backend for tests: scripted answers and a call counter."""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import polars as pl

from sago_core.backends.protocol import Generation, ScoringRequest, TeacherForced


class FakeBackend:
    name = "fake"

    def __init__(self, answer: Callable[[str], str], window: int | None = None) -> None:
        self.answer = answer
        self.window = window
        self.generate_calls = 0
        self.prompts_seen: list[str] = []

    def generate(
        self, prompts: Sequence[str], max_new_tokens: int, batch_size: int
    ) -> list[Generation]:
        self.generate_calls += 1
        self.prompts_seen.extend(prompts)
        out = []
        for prompt in prompts:
            text = self.answer(prompt)
            out.append(Generation(text, tuple(range(len(text.split()))), "stop"))
        return out

    def score(
        self,
        requests: Sequence[ScoringRequest],
        batch_size: int,
        max_batch_tokens: int | None = None,
    ) -> list[TeacherForced]:
        return [
            TeacherForced(np.ones((2, 4), dtype=np.float32), -1.0, 0.5, len(r.response_token_ids))
            for r in requests
        ]

    def encode_response(self, text: str) -> tuple[int, ...] | None:
        return tuple(range(len(text.split())))

    def prompt_lengths(self, prompts: Sequence[str]) -> list[int] | None:
        return [len(p.split()) for p in prompts]

    def context_window(self) -> int | None:
        return self.window

    def describe(self) -> dict[str, str]:
        return {"backend": self.name}


# Two questions with references: the prompts the stage tests over a fake backend share.
PROMPTS = pl.DataFrame(
    {
        "dataset": ["d", "d"],
        "prompt_id": ["p1", "p2"],
        "prompt": ["What is the capital of France?", "Who wrote the play Hamlet?"],
        "references": [["Paris"], ["Shakespeare"]],
        "source": ["builtin", "builtin"],
    }
)


def kept_variants(rows: list[tuple[str, str, str, str]]) -> pl.DataFrame:
    """A variants frame of kept rows (prompt_id, variant_id, family, text) in dataset "d";
    the subtype is the family, strength 0, position global."""
    return pl.DataFrame(
        {
            "dataset": ["d"] * len(rows),
            "prompt_id": [r[0] for r in rows],
            "variant_id": [r[1] for r in rows],
            "family": [r[2] for r in rows],
            "subtype": [r[2] for r in rows],
            "strength": [0.0] * len(rows),
            "position": ["global"] * len(rows),
            "text": [r[3] for r in rows],
            "kept": [True] * len(rows),
        }
    )
