"""Rows cached one at a time (artifacts/row_cache.py): a stage asks the model only for the
rows no run asked before, and what it reads back equals what it would have asked."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from sago_core.backends.mock import MockBackend
from sago_core.backends.protocol import Generation
from sago_core.backends.target import ModelTarget
from sago_core.config import AnalysisSettings, GenerationSettings, VariantGrid
from sago_core.stages.analysis import analyse_pairs, measure_cache
from sago_core.stages.generation import answer_cache, generate_responses
from sago_core.stages.variants import build_variant_candidates
from sago_core.vocabulary import BASE_VARIANT_ID, REPLAY_FAMILY

PROMPTS = pl.DataFrame(
    {
        "dataset": ["d"] * 3,
        "prompt_id": ["p1", "p2", "p3"],
        "prompt": [
            "What is the capital of France?",
            "Who wrote the play Hamlet?",
            "How many legs does a spider have?",
        ],
        "references": [["Paris"], ["Shakespeare"], ["eight"]],
        "source": ["builtin"] * 3,
    }
)
GRID = VariantGrid.model_validate(
    {
        "register": {"strengths": [-4, 4], "positions": ["prefix"]},
        "noise": {"spacing": [5], "capitalization": [50], "positions": ["global"]},
    }
)
TARGET = ModelTarget(spec="mock:m", backend="mock", model_id="m", identity="mock:m")
SETTINGS = GenerationSettings(max_new_tokens=8)


@pytest.fixture(scope="module")
def variants() -> pl.DataFrame:
    return build_variant_candidates(PROMPTS, GRID, seed=0).with_columns(pl.lit(True).alias("kept"))


def asked(backend: MockBackend, kind: str) -> list[str]:
    return [prompt for k, prompt in backend.calls if k == kind]


def run(
    variants: pl.DataFrame, root: Path | None
) -> tuple[pl.DataFrame, pl.DataFrame, MockBackend]:
    backend = MockBackend("m")
    reuse = answer_cache(root, TARGET, SETTINGS) if root else None
    generations = generate_responses(backend, "mock:m", PROMPTS, variants, SETTINGS, reuse)
    measure = measure_cache(root, TARGET) if root else None
    analysis = analyse_pairs(backend, generations, AnalysisSettings(), measure)
    return generations, analysis, backend


def test_a_second_stage_over_the_same_rows_asks_nothing_and_reads_the_same(
    tmp_path: Path, variants: pl.DataFrame
) -> None:
    plain_g, plain_a, plain = run(variants, None)
    first_g, first_a, first = run(variants, tmp_path)
    again_g, again_a, again = run(variants, tmp_path)
    assert len(asked(first, "generate")) == plain_g.height == len(asked(plain, "generate"))
    assert asked(again, "generate") == [] and asked(again, "score") == []
    assert first_g.equals(plain_g) and again_g.equals(plain_g)
    assert first_a.equals(plain_a) and again_a.equals(plain_a)


def test_more_rows_later_ask_only_the_new_ones_their_cosines_against_the_cached_bases(
    tmp_path: Path, variants: pl.DataFrame
) -> None:
    noise = variants.filter(pl.col("family") != "noise")  # the first round: no noise rows
    run(noise, tmp_path)
    full_g, full_a, later = run(variants, tmp_path)
    new = variants.filter(pl.col("family") == "noise")
    assert sorted(asked(later, "generate")) == sorted(new["text"].to_list())
    # only the new rows are forced: their bases' hidden states (the cosines' reference)
    # come from the first round's cache, and the cosines equal a run without any cache
    assert sorted(asked(later, "score")) == sorted(new["text"].to_list())
    plain_g, plain_a, _ = run(variants, None)
    assert full_g.equals(plain_g) and full_a.equals(plain_a)
    noise_rows = full_a.filter(pl.col("variant_id").is_in(new["variant_id"].implode()))
    assert noise_rows.height == new.height and noise_rows["layer_cosines"].null_count() == 0


def test_a_base_measured_before_its_states_were_cached_is_forced_again(
    tmp_path: Path, variants: pl.DataFrame
) -> None:
    """A cache written before the bases' states were kept (or that lost them) gives no
    reference: the base is forced again with the new rows, never a cosine left out."""
    run(variants.filter(pl.col("family") != "noise"), tmp_path)
    for part in (tmp_path / "references").rglob("*.parquet"):
        part.unlink()
    _, later_a, later = run(variants, tmp_path)
    new = variants.filter(pl.col("family") == "noise")
    bases = PROMPTS.filter(pl.col("prompt_id").is_in(new["prompt_id"].implode()))["prompt"]
    assert sorted(asked(later, "score")) == sorted([*new["text"], *bases])
    _, plain_a, _ = run(variants, None)
    assert later_a.equals(plain_a)


class FailsOnce(MockBackend):
    """Fails every row asking ``fail`` in its first call, answers it afterwards."""

    def __init__(self, fail: str) -> None:
        super().__init__("m")
        self.fail, self.failed = fail, False

    def generate(self, prompts, max_new_tokens, batch_size, sampling=None):  # type: ignore[no-untyped-def]
        answers = super().generate(prompts, max_new_tokens, batch_size, sampling)
        if self.failed:
            return answers
        self.failed = True
        return [
            Generation("", (), "failed", "provider error") if p == self.fail else a
            for p, a in zip(prompts, answers, strict=True)
        ]


def test_the_replay_is_a_row_of_its_own_and_a_failure_is_asked_again(
    tmp_path: Path, variants: pl.DataFrame
) -> None:
    generations, _, _ = run(variants, tmp_path)
    replay = generations.filter(pl.col("family") == REPLAY_FAMILY)
    base = generations.filter(pl.col("variant_id") == BASE_VARIANT_ID)
    assert replay.height == base.height == PROMPTS.height  # same texts, two rows each
    cache = answer_cache(tmp_path, TARGET, SETTINGS)
    stored = pl.read_parquet(next(cache.folder.glob("part-*.parquet")))
    assert stored.height == generations.height
    # another decoding setting is another scope: nothing read back
    other = answer_cache(tmp_path / "x", TARGET, GenerationSettings(max_new_tokens=9))
    assert other.get(stored["row_key"].to_list()).is_empty()
    assert (
        answer_cache(tmp_path, TARGET, GenerationSettings(max_new_tokens=9))
        .get(stored["row_key"].to_list())
        .is_empty()
    )


def test_a_failed_answer_is_not_stored_and_is_asked_again(
    tmp_path: Path, variants: pl.DataFrame
) -> None:
    text = variants["text"][0]
    flaky = FailsOnce(text)
    reuse = answer_cache(tmp_path, TARGET, SETTINGS)
    first = generate_responses(flaky, "mock:m", PROMPTS, variants, SETTINGS, reuse)
    assert first.filter(pl.col("failure_reason").is_not_null())["prompt_text"].to_list() == [text]
    flaky.calls.clear()
    second = generate_responses(flaky, "mock:m", PROMPTS, variants, SETTINGS, reuse)
    assert asked(flaky, "generate") == [text]
    assert second["failure_reason"].null_count() == second.height
