"""The rewrite cache over reruns: a rewrite the checks reject is cached with its
reason, keyed as a usable one, so a rerun over a warm cache asks the rewriter nothing and
never loads it; a failed call is not cached and is asked again."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import polars as pl

from sago_core.artifacts.json_cache import JsonCache
from sago_core.backends.protocol import Generation
from sago_core.config import StructuralGrid
from sago_core.stages.structural import rewrite_key, rewrite_structural
from sago_core.stages.tool_answers import REJECTED
from sago_core.variants.structural import mood_task
from tests.fakes import FakeBackend
from tests.unit.test_structural import PROMPTS

GRID = StructuralGrid(lengths=(0.5, 2.0), mood=True, method="model")


def rewriter(instruction: str) -> str:
    """Usable length rewrites; the question's mood rewrite is the prompt unchanged and the
    command's is empty: two answers the checks reject, for two reasons."""
    text = instruction.split("Text: ", 1)[1]
    if "as a command" in instruction:
        return text
    if "as a direct question" in instruction:
        return ""
    words = text.split()
    return (
        " ".join(words[: max(1, len(words) // 2)]) if "Shorten" in instruction else f"{text} {text}"
    )


class Opener:
    """Builds the rewriter's backend on demand and counts how often it was asked to."""

    def __init__(self, backend: FakeBackend) -> None:
        self.backend = backend
        self.opened = 0

    def __call__(self) -> FakeBackend:
        self.opened += 1
        return self.backend


def test_a_rerun_over_a_warm_cache_never_loads_the_rewriter(tmp_path: Path) -> None:
    cache = JsonCache(tmp_path / "cache")
    first_opener = Opener(FakeBackend(rewriter))
    first = rewrite_structural(PROMPTS, GRID, first_opener, "fake@1", cache, seed=0)
    assert first_opener.opened == 1 and len(first_opener.backend.prompts_seen) == 6
    rejected = first.filter(~pl.col("kept")).sort("prompt_id")
    assert rejected["prompt_id"].to_list() == ["i", "q"]
    assert rejected["reject_reason"].to_list() == [
        "rewriter returned no text",
        "rewriter returned the prompt unchanged",
    ]
    # The rejection is cached under the key a usable rewrite of the same request gets.
    question = PROMPTS["prompt"][0]
    entry = cache.get(rewrite_key("fake@1", mood_task(question), question, GRID.max_new_tokens))
    assert entry == {
        "text": question,
        "rewriter": "fake@1",
        REJECTED: "rewriter returned the prompt unchanged",
    }

    again = Opener(FakeBackend(rewriter))
    second = rewrite_structural(PROMPTS, GRID, again, "fake@1", cache, seed=0)
    assert again.opened == 0 and again.backend.generate_calls == 0
    assert second.equals(first), "the same variants, rejections and reasons included"

    other = Opener(FakeBackend(rewriter))
    rewrite_structural(PROMPTS, GRID, other, "fake@2", cache, seed=0)
    assert other.opened == 1 and len(other.backend.prompts_seen) == 6


class FailingBackend(FakeBackend):
    """Every call fails (an API error after its retries)."""

    def generate(
        self, prompts: Sequence[str], max_new_tokens: int, batch_size: int
    ) -> list[Generation]:
        super().generate(prompts, max_new_tokens, batch_size)
        return [Generation("", (), "failed", failure_reason="timeout") for _ in prompts]


def test_a_failed_call_is_not_cached_and_is_asked_again(tmp_path: Path) -> None:
    cache = JsonCache(tmp_path / "cache")
    grid = StructuralGrid(lengths=(2.0,), mood=False, method="model")
    failed = rewrite_structural(PROMPTS, grid, Opener(FailingBackend(rewriter)), "f", cache, 0)
    assert failed["reject_reason"].to_list() == ["tool call failed: timeout"] * 2
    retry = Opener(FakeBackend(rewriter))
    answered = rewrite_structural(PROMPTS, grid, retry, "f", cache, 0)
    assert retry.opened == 1 and len(retry.backend.prompts_seen) == 2
    assert answered["kept"].all()
