"""Structural variants: instructions, cleaning, rejection reasons, and the rewrite cache."""

from __future__ import annotations

import logging
from pathlib import Path

import polars as pl
import pytest

from sago_core.artifacts.json_cache import JsonCache
from sago_core.config import StructuralGrid
from sago_core.stages.structural import rewrite_structural
from sago_core.stages.variants import filter_variants
from sago_core.variants.structural import (
    NO_POLITENESS,
    check_rewrite,
    clean_rewrite,
    length_task,
    mood_task,
    target_words,
)
from tests.fakes import FakeBackend

PROMPTS = pl.DataFrame(
    {
        "dataset": ["d", "d"],
        "prompt_id": ["q", "i"],
        "prompt": ["What is the capital city of France?", "List the first five prime numbers."],
        "references": [["Paris"], ["2, 3, 5, 7, 11"]],
        "source": ["data.csv, row 1", "data.csv, row 2"],
    }
)


def test_length_instruction_targets_round_words_times_m() -> None:
    prompt = "What is the capital city of France?"  # 7 words
    assert target_words(prompt, 0.25) == 2 and target_words(prompt, 3) == 21
    task = length_task(prompt, 0.5)
    assert "about 4 words" in task.instruction and task.instruction.startswith("Shorten")
    assert NO_POLITENESS in task.instruction and prompt in task.instruction
    assert length_task(prompt, 2).instruction.startswith("Lengthen")


def test_mood_instruction_goes_both_ways() -> None:
    assert "as a command" in mood_task("What is the capital of France?").instruction
    assert "as a direct question" in mood_task("List three colours.").instruction


def test_a_question_without_a_question_mark_is_asked_as_a_command() -> None:
    """NQ-open asks "when did the united states enter world war i" with no "?": its mood
    variant is a command; a rewrite that only adds the capitals and the "?" is no variant."""
    nq = "when did the united states enter world war i"
    assert "as a command" in mood_task(nq).instruction
    assert check_rewrite(nq, "When did the United States enter World War I?", mood_task(nq)) == (
        "rewrite differs from the prompt only in casing and punctuation"
    )
    assert (
        check_rewrite(nq, "Name the year the United States entered World War I.", mood_task(nq))
        is None
    )
    assert (
        "as a direct question" in mood_task("qui a écrit hamlet").instruction
    )  # English rules only


def test_clean_rewrite_strips_labels_quotes_and_extra_lines() -> None:
    assert (
        clean_rewrite('Rewritten question: "Tell me the capital."\nExtra') == "Tell me the capital."
    )
    assert clean_rewrite("\n\n  Name France's capital.  ") == "Name France's capital."
    assert clean_rewrite("   ") == ""


def test_check_rewrite_reasons() -> None:
    q = "What is the capital of France?"
    mood = mood_task(q)
    assert check_rewrite(q, "", mood) == "rewriter returned no text"
    assert check_rewrite(q, q, mood) == "rewriter returned the prompt unchanged"
    assert (
        check_rewrite(q, "Which city is France's capital?", mood)
        == "rewrite did not change the mood"
    )
    assert check_rewrite(q, "Tell me the capital of France.", mood) is None
    longer = length_task(q, 2.0)
    assert check_rewrite(q, "Capital of France?", longer).startswith(
        "rewrite did not change the length in the asked direction"
    )
    assert check_rewrite(q, "Which city is the capital of the country of France?", longer) is None
    assert check_rewrite(q, "France's capital?", length_task(q, 0.5)) is None


def _rewriter(instruction: str) -> str:
    text = instruction.split("Text: ", 1)[1]
    if "as a command" in instruction:
        return "Rewritten: Tell me " + text.rstrip("?").lower().removeprefix("what is ") + "."
    if "as a direct question" in instruction:
        return ""  # an unusable answer: must be recorded, not dropped
    words = text.split()
    return (
        " ".join(words[: max(1, len(words) // 2)])
        if "Shorten" in instruction
        else text + " " + text
    )


def test_rewrites_are_cached_and_failures_are_recorded(tmp_path: Path) -> None:
    grid = StructuralGrid(lengths=(0.5, 2.0), mood=True, method="model")
    cache = JsonCache(tmp_path / "cache")
    backend = FakeBackend(_rewriter)
    first = rewrite_structural(PROMPTS, grid, lambda: backend, "fake@1", cache, seed=0)
    assert backend.generate_calls == 1 and len(backend.prompts_seen) == 6
    assert set(first["variant_id"]) == {
        "structural:length:0.5:global",
        "structural:length:2:global",
        "structural:mood:1:global",
    }
    assert (first["position"] == "global").all()
    failed = first.filter(~pl.col("kept"))
    assert failed["variant_id"].to_list() == ["structural:mood:1:global"]
    assert failed["reject_reason"].to_list() == ["rewriter returned no text"]

    again = FakeBackend(_rewriter)
    second = rewrite_structural(PROMPTS, grid, lambda: again, "fake@1", cache, seed=0)
    assert again.prompts_seen == [], "the rejected rewrite is cached too (with its reason)"
    assert second.equals(first)
    other = FakeBackend(_rewriter)
    rewrite_structural(PROMPTS, grid, lambda: other, "fake@2", cache, seed=0)
    assert len(other.prompts_seen) == 6, "a different rewriter identity misses the cache"


def test_filter_keeps_upstream_rejections_and_records_word_ratio(tmp_path: Path) -> None:
    grid = StructuralGrid(lengths=(2.0,), mood=True, method="model")
    rewrites = rewrite_structural(
        PROMPTS, grid, lambda: FakeBackend(_rewriter), "fake", JsonCache(tmp_path), 0
    )
    filtered = filter_variants(rewrites, PROMPTS, lambda c, r: [0.99] * len(c), threshold=0.5)
    doubled = filtered.filter(pl.col("variant_id") == "structural:length:2:global")
    assert doubled["word_ratio"].to_list() == [2.0, 2.0]
    assert doubled["kept"].all()
    mood = filtered.filter(pl.col("prompt_id") == "i", pl.col("subtype") == "mood")
    assert mood["kept"].to_list() == [False]
    assert mood["reject_reason"].to_list() == ["rewriter returned no text"]
    assert mood["semantic_score"].to_list() == [None]
    strict = filter_variants(rewrites, PROMPTS, lambda c, r: [0.4] * len(c), threshold=0.5)
    assert not strict["kept"].any()
    assert (
        strict.filter(pl.col("semantic_score").is_not_null())["reject_reason"]
        .str.starts_with("semantic score 0.4 <= threshold 0.5")
        .all()
    )


def test_a_rewrite_over_the_context_is_rejected_unasked_and_the_others_rewritten(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """96 new tokens in a window of 144: prompt q's length instructions (49 words) do not
    fit; its mood instruction (46) and prompt i's (44 and 48) do. The rejected rewrites are
    not cached: a wider window asks them on the next pass."""
    cache = JsonCache(tmp_path)
    backend = FakeBackend(_rewriter, window=144)
    with caplog.at_level(logging.WARNING, logger="sago.generation"):
        frame = rewrite_structural(
            PROMPTS, StructuralGrid(method="model"), lambda: backend, "fake", cache, 0
        )
    unfit = frame.filter(pl.col("prompt_id") == "q", pl.col("subtype") == "length")
    assert unfit.height == 5 and not unfit["kept"].any()
    assert set(unfit["reject_reason"]) == {
        "instruction takes 49 tokens; with max_new_tokens 96 that exceeds the model's context "
        "of 144 tokens"
    }
    rewritten = frame.filter((pl.col("prompt_id") == "i") | (pl.col("subtype") == "mood"))
    assert rewritten.height == 7 and rewritten["kept"].sum() >= 1
    assert not rewritten["reject_reason"].str.starts_with("instruction takes").any()
    assert len(backend.prompts_seen) == 7
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.startswith("5 tool request(s) do not fit the model's context of 144 tokens")
    assert "file data.csv, row 1 (prompt q (rewrite structural:length:0.25:global)): 49" in warning
    wide = FakeBackend(_rewriter, window=4096)
    again = rewrite_structural(
        PROMPTS, StructuralGrid(method="model"), lambda: wide, "fake", cache, 0
    )
    assert len(wide.prompts_seen) == 5
    assert all("capital city of France" in p for p in wide.prompts_seen)
    assert not again["reject_reason"].str.starts_with("instruction takes").any()


# Rewrites the demo's semantic filter kept, each the rewriter answering or
# barely rewriting; the rewrite stage now rejects them with a reason, cached like any other.
ANSWERING = {
    "Which composer wrote the Moonlight Sonata?": "The composer who wrote the Moonlight Sonata "
    "is unknown.",
    "Do we only use ten percent of our brains?": "We only use 10% of our brains.",
    "who painted the ceiling of the sistine chapel": "Who painted the ceiling of the Sistine "
    "Chapel?",
    "What is the capital of the country where the Eiffel Tower stands?": "Tell me the capital "
    "of France, Paris.",
}
DEMO_PROMPTS = pl.DataFrame(
    {
        "dataset": ["builtin"] * 4,
        "prompt_id": ["tr3", "tq2", "nq1", "hp2"],
        "prompt": list(ANSWERING),
        "references": [["Beethoven"], ["No"], ["Michelangelo"], ["Paris"]],
        "source": [f"builtin, row {i}" for i in range(1, 5)],
    }
)


def _answering(instruction: str) -> str:
    return ANSWERING[instruction.split("Text: ", 1)[1]]


def test_a_rewrite_that_answers_or_only_recases_is_rejected_with_its_reason(
    tmp_path: Path,
) -> None:
    cache = JsonCache(tmp_path / "cache")
    grid = StructuralGrid(lengths=(), mood=True, method="model")
    frame = rewrite_structural(DEMO_PROMPTS, grid, lambda: FakeBackend(_answering), "f", cache, 0)
    assert not frame["kept"].any()
    assert frame.sort("prompt_id")["reject_reason"].to_list() == [
        "rewrite contains the reference answer 'Paris': it answers the prompt",
        "rewrite differs from the prompt only in casing and punctuation",
        "rewrite is a statement, not a command: it asserts (or answers) instead of asking",
        "rewrite is a statement, not a command: it asserts (or answers) instead of asking",
    ]
    again = FakeBackend(_answering)
    assert rewrite_structural(DEMO_PROMPTS, grid, lambda: again, "f", cache, 0).equals(frame)
    assert again.generate_calls == 0, "each rejection is cached with its reason"


def test_a_rewrite_cached_as_usable_before_the_checks_is_rejected_when_read(
    tmp_path: Path,
) -> None:
    from sago_core.stages.structural import rewrite_key

    cache = JsonCache(tmp_path / "cache")
    base = "Do we only use ten percent of our brains?"
    task = length_task(base, 0.5)
    cache.put(rewrite_key("f", task, base, 64), {"text": ANSWERING[base], "rewriter": "f"})
    unused = FakeBackend(_answering)
    frame = rewrite_structural(
        DEMO_PROMPTS.filter(pl.col("prompt") == base),
        StructuralGrid(lengths=(0.5,), mood=False, max_new_tokens=64, method="model"),
        lambda: unused,
        "f",
        cache,
        0,
    )
    assert unused.generate_calls == 0
    assert frame["kept"].to_list() == [False]
    assert frame["reject_reason"].to_list() == [
        "rewrite is a statement, not a question: it asserts (or answers) instead of asking"
    ]
