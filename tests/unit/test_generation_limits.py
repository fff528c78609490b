"""A prompt text over the model's context is not asked: its row is a failure with its token
count and the window, every row of a prompt whose base does not fit fails too, the rest of
the stage is answered, and one warning names the rows by file and row."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path

import polars as pl
import pytest

from sago_core.backends.model_source import LocalModel
from sago_core.backends.target import ModelTarget
from sago_core.backends.vllm_backend import VllmBackend, context_limit
from sago_core.config import GenerationSettings, VariantGrid, VllmSettings
from sago_core.data.loading import load_user_file
from sago_core.stages.generation import (
    answer_apart,
    answer_cache,
    check_fit,
    generate_responses,
)
from sago_core.stages.variants import build_variant_candidates
from sago_core.vocabulary import BASE_VARIANT_ID
from tests.conftest import SHARED_DATA
from tests.fakes import FakeBackend, kept_variants

SETTINGS = GenerationSettings(max_new_tokens=64)
NOISE = VariantGrid.model_validate(
    {
        "register": None,
        "structural": None,
        "noise": {
            "spacing": [1],
            "punctuation": [],
            "capitalization": [],
            "positions": ["global"],
        },
    }
)


# a prompt whose base (3,000 tokens) cannot fit, beside one that does
LONG_BASE = pl.DataFrame(
    {
        "dataset": ["mine", "mine"],
        "prompt_id": ["short", "long"],
        "prompt": ["What is two plus two?", "word " * 3000],
        "references": [[], []],
        "source": ["/data/mine.csv, row 1", "/data/mine.csv, row 2"],
    }
)


def _failures(frame: pl.DataFrame, prompt_id: str) -> list[str | None]:
    return frame.filter(pl.col("prompt_id") == prompt_id)["failure_reason"].to_list()


def test_a_base_over_the_context_fails_every_row_of_its_prompt_and_the_rest_is_answered(
    caplog: pytest.LogCaptureFixture,
) -> None:
    prompts = LONG_BASE
    variants = build_variant_candidates(prompts, NOISE, 0)
    assert variants.filter(pl.col("prompt_id") == "long").height >= 1
    # a variant of the long prompt that fits by itself (a shortened rewrite, say)
    short_of_long = kept_variants([("long", "structural:length:0.25", "structural", "word")])
    variants = pl.concat(
        [variants, short_of_long.with_columns(pl.lit("mine").alias("dataset"))],
        how="diagonal_relaxed",
    )
    backend = FakeBackend(lambda p: "four", window=2048)
    with caplog.at_level(logging.WARNING, logger="sago.generation"):
        frame = generate_responses(backend, "fake", prompts, variants, SETTINGS)
    long = frame.filter(pl.col("prompt_id") == "long")
    own = (
        "prompt takes 3000 tokens; with max_new_tokens 64 that exceeds the model's context "
        "of 2048 tokens"
    )
    reasons = dict(zip(long["variant_id"], long["failure_reason"], strict=True))
    assert reasons.pop("structural:length:0.25") == f"base {own}: no base answer to compare with"
    assert reasons[BASE_VARIANT_ID] == own
    assert set(reasons.values()) == {own}, "its other variants are as long as the base"
    assert long["response_text"].is_null().all()
    short = frame.filter(pl.col("prompt_id") == "short")
    assert short.height > 1
    assert short["failure_reason"].is_null().all() and short["response_text"].eq("four").all()
    assert backend.prompts_seen and all(len(p.split()) < 100 for p in backend.prompts_seen)
    assert "word" not in backend.prompts_seen
    warnings = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1, "one warning for the stage"
    assert warnings[0].startswith(f"{long.height - 1} prompt text(s) do not fit")
    assert "file /data/mine.csv, row 2 (prompt long, variant base): 3000 tokens" in warnings[0]
    assert "(and 1 row(s) of their prompts, whose base does not fit)" in warnings[0]
    assert "lower generation.max_new_tokens" in warnings[0]


def test_a_variant_over_the_context_is_a_missing_row_and_never_asked(
    caplog: pytest.LogCaptureFixture,
) -> None:
    prompts = pl.DataFrame(
        {
            "dataset": ["d", "d"],
            "prompt_id": ["p1", "p2"],
            "prompt": ["What is the capital of France?", "Who wrote the play Hamlet?"],
            "references": [["Paris"], ["Shakespeare"]],
            "source": ["/data/q.csv, row 1", "/data/q.csv, row 2"],
        }
    )
    wide = "Ｗｈａｔ " * 40  # 40 words: over a window of 60 with 32 new tokens
    variants = kept_variants(
        [
            ("p1", "script:fullwidth", "script", wide),
            ("p1", "noise:spacing:1", "noise", "What is the  capital of France?"),
        ]
    )
    backend = FakeBackend(lambda p: "an answer", window=60)
    with caplog.at_level(logging.WARNING, logger="sago.generation"):
        frame = generate_responses(
            backend, "fake", prompts, variants, GenerationSettings(max_new_tokens=32)
        )
    reasons = dict(zip(frame["variant_id"], frame["failure_reason"], strict=True))
    assert reasons["script:fullwidth"] == (
        "prompt takes 40 tokens; with max_new_tokens 32 that exceeds the model's context of "
        "60 tokens"
    )
    assert _failures(frame, "p2") == [None]
    answered = frame.filter(pl.col("variant_id") != "script:fullwidth")
    assert answered.height == 3 and answered["failure_reason"].is_null().all()
    assert answered["response_text"].eq("an answer").all()
    assert wide not in backend.prompts_seen and len(backend.prompts_seen) == 3
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.startswith("1 prompt text(s) do not fit the model's context of 60 tokens")
    assert "file /data/q.csv, row 1 (prompt p1, variant script:fullwidth): 40 tokens" in warning


def test_a_row_over_the_context_is_not_cached_and_a_wider_window_asks_it(
    tmp_path: Path,
) -> None:
    prompts = pl.DataFrame(
        {
            "dataset": ["d"],
            "prompt_id": ["p1"],
            "prompt": ["What is the capital of France?"],
            "references": [["Paris"]],
            "source": ["/data/q.csv, row 1"],
        }
    )
    wide = "Ｗｈａｔ " * 40
    variants = kept_variants([("p1", "script:fullwidth", "script", wide)])
    target = ModelTarget(spec="fake:m", backend="mock", model_id="m", identity="fake:m")
    settings = GenerationSettings(max_new_tokens=32)
    reuse = answer_cache(tmp_path, target, settings)
    narrow = FakeBackend(lambda p: "Paris", window=60)
    first = generate_responses(narrow, "fake:m", prompts, variants, settings, reuse)
    assert first["failure_reason"].null_count() == 1
    larger = FakeBackend(lambda p: "Paris", window=4096)
    second = generate_responses(larger, "fake:m", prompts, variants, settings, reuse)
    assert larger.prompts_seen == [wide], "the base read back, the unfit variant asked"
    assert second["failure_reason"].null_count() == 2


def test_contextual_harmbench_behaviours_over_a_small_window_fail_alone(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """The real HarmBench sample: its contextual behaviours (a long context, then the
    behaviour) do not fit a small window; the other behaviours are answered."""
    path = SHARED_DATA / "safety" / "harmbench_behaviors_sample39.csv"
    if not path.is_file():
        pytest.skip(f"the shared safety samples are not here ({path}): ../shared is absent")
    loaded = load_user_file(path)
    prompts = pl.DataFrame(
        {
            "dataset": [p.dataset for p in loaded],
            "prompt_id": [p.prompt_id for p in loaded],
            "prompt": [p.prompt for p in loaded],
            "references": [list(p.references) for p in loaded],
            "source": [p.source for p in loaded],
        }
    )
    contextual = {p.prompt_id for p in loaded if "\n\n---\n\n" in p.prompt}
    contextual_sources = [p.source for p in loaded if p.prompt_id in contextual]
    assert len(contextual) == 11  # SOURCES.md: 11 contextual rows
    longest_plain = max(len(p.prompt.split()) for p in loaded if p.prompt_id not in contextual)
    shortest_context = min(len(p.prompt.split()) for p in loaded if p.prompt_id in contextual)
    assert longest_plain + 5 < shortest_context
    window = shortest_context - 1 + SETTINGS.max_new_tokens
    backend = FakeBackend(lambda p: "I cannot help with that.", window=window)
    variants = build_variant_candidates(prompts, NOISE, 0)
    with caplog.at_level(logging.WARNING, logger="sago.generation"):
        frame = generate_responses(backend, "fake", prompts, variants, SETTINGS)
    failed = frame.filter(pl.col("failure_reason").is_not_null())
    assert set(failed["prompt_id"]) == contextual
    assert failed.height == frame.filter(pl.col("prompt_id").is_in(list(contextual))).height
    assert frame.filter(pl.col("failure_reason").is_null())["response_text"].is_not_null().all()
    (warning,) = [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]
    assert warning.startswith(
        f"{failed.height} prompt text(s) do not fit the model's context of {window} tokens"
    )
    named = [source for source in contextual_sources if f"file {source} (prompt " in warning]
    assert len(named) == 5, "the first five named are five behaviours, not one behaviour's rows"
    assert f"; and {failed.height - 5} more" in warning


def test_answer_apart_alone_fails_the_texts_that_do_not_fit() -> None:
    """The samples stage asks through ``answer_apart`` with no failures given: a text over
    the window comes back a failure, never sent."""
    backend = FakeBackend(lambda p: "yes", window=10)
    texts = ["one two", "a " * 9, "three"]
    settings = GenerationSettings(max_new_tokens=4)
    out = answer_apart(backend, texts, ["base", "noise", "base"], settings, None)
    assert [o.failure_reason is None for o in out] == [True, False, True]
    assert out[1].failure_reason == (
        "prompt takes 9 tokens; with max_new_tokens 4 that exceeds the model's context of 10 tokens"
    )
    assert out[1].finish_reason == "failed" and backend.prompts_seen == ["one two", "three"]


@pytest.mark.parametrize(
    ("own", "limit", "expected"),
    [
        (32768, 2048, (2048, "vllm.max_model_len")),  # the setting is the limit: raise it
        (None, 2048, (2048, "vllm.max_model_len")),
        (2048, 2048, (2048, None)),  # the model's own context: raising it would not help
        (1024, 2048, (1024, None)),
        (4096, None, (4096, None)),
        (None, None, (None, None)),
    ],
)
def test_the_vllm_window_and_the_setting_that_limits_it(
    own: int | None, limit: int | None, expected: tuple[int | None, str | None]
) -> None:
    assert context_limit(own, limit) == expected


class WindowScorer:
    """The transformers side's counts, as the vLLM backend asks them: a word a token."""

    def __init__(self, window: int) -> None:
        self.window = window

    def prompt_lengths(self, prompts: Sequence[str]) -> list[int]:
        return [len(p.split()) for p in prompts]

    def context_window(self) -> int:
        return self.window


def test_a_vllm_reason_names_max_model_len_when_it_is_the_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The backend's own window and setting; no engine is started (``_start`` does nothing)
    and the scorer counts a word a token."""
    source = LocalModel("dir", str(tmp_path), None, "sha256:0")
    backend = VllmBackend(source, VllmSettings(max_model_len=128), tmp_path)
    monkeypatch.setattr(backend, "_start", lambda: None)
    backend._scorer = WindowScorer(32768)
    fit = check_fit(backend, ["x " * 100, "short"], 64)
    assert fit.reason(0) == (
        "prompt takes 100 tokens; with max_new_tokens 64 that exceeds the context of 128 "
        "tokens (vllm.max_model_len)"
    )
    assert fit.reason(1) is None
    assert fit.hint("generation.max_new_tokens").startswith("raise vllm.max_model_len")
    backend._scorer = WindowScorer(128)
    own = check_fit(backend, ["x " * 100], 64)
    assert own.reason(0) == (
        "prompt takes 100 tokens; with max_new_tokens 64 that exceeds the model's context of "
        "128 tokens"
    )
    assert own.hint("generation.max_new_tokens").startswith("lower generation.max_new_tokens")


class SampledFake(FakeBackend):
    """The fake backend taking a sampling argument (its answers ignore it)."""

    def generate(
        self, prompts: Sequence[str], max_new_tokens: int, batch_size: int, sampling: object = None
    ) -> list:
        return super().generate(prompts, max_new_tokens, batch_size)


def test_samples_of_a_prompt_whose_base_does_not_fit_are_not_drawn() -> None:
    """At K > 1 the samples stage asks nothing for a prompt whose base does not fit: its
    variants' samples 1..K-1 fail with sample 0's reason instead of paying for answers
    with no base to compare with."""
    from sago_core.stages.samples import sample_responses

    prompts = LONG_BASE
    variants = kept_variants(
        [
            ("long", "structural:length:0.25", "structural", "word"),
            ("short", "structural:length:0.25", "structural", "two plus two?"),
        ]
    ).with_columns(pl.lit("mine").alias("dataset"))
    settings = GenerationSettings(max_new_tokens=64, temperature=0.7, samples=3)
    backend = SampledFake(lambda p: "four", window=2048)
    generations = generate_responses(backend, "fake", prompts, variants, settings)
    backend.prompts_seen.clear()
    samples = sample_responses(backend, "fake", generations, settings)
    drawn = samples.filter(pl.col("sample") > 0)
    long = drawn.filter(pl.col("prompt_id") == "long")
    assert long.height == 4 and long["response_text"].is_null().all()
    assert (
        long.filter(pl.col("variant_id") == BASE_VARIANT_ID)["failure_reason"].to_list()
        == [
            "prompt takes 3000 tokens; with max_new_tokens 64 that exceeds the model's context "
            "of 2048 tokens"
        ]
        * 2
    )
    short_of_long = long.filter(pl.col("variant_id") != BASE_VARIANT_ID)["failure_reason"]
    assert all(r is not None and r.startswith("base prompt takes 3000") for r in short_of_long)
    assert "word" not in backend.prompts_seen
    short = drawn.filter(pl.col("prompt_id") == "short")
    assert short.height == 4 and short["failure_reason"].is_null().all()
