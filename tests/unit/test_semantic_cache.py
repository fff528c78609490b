"""The semantic filter's scores cached across runs: asked once per (scorer, variant, base)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from sago_core.artifacts.json_cache import JsonCache
from sago_core.stages.semantic_cache import cached_f1, scorer_identity


class CountingF1:
    """A stand-in scorer: F1 = len(candidate) / 100; counts the pairs it is asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[str, str]] = []

    def __call__(self, candidates: Sequence[str], references: Sequence[str]) -> list[float]:
        self.asked += list(zip(candidates, references, strict=True))
        return [len(c) / 100 for c in candidates]


def test_a_second_run_asks_only_the_pairs_no_run_scored(tmp_path: Path) -> None:
    cache = JsonCache(tmp_path / "semantic")
    first = CountingF1()
    assert cached_f1(first, cache, "scorer-a")(["ab", "abcd"], ["q", "q"]) == [0.02, 0.04]
    second = CountingF1()
    scores = cached_f1(second, cache, "scorer-a")(["abcd", "abc", "ab"], ["q", "q", "q"])
    assert scores == [0.04, 0.03, 0.02]  # in the order asked, cached or not
    assert second.asked == [("abc", "q")]
    # another base prompt, or another scorer, is another pair
    third = CountingF1()
    cached_f1(third, cache, "scorer-a")(["ab"], ["other prompt"])
    cached_f1(third, cache, "scorer-b")(["ab"], ["q"])
    assert third.asked == [("ab", "other prompt"), ("ab", "q")]


def test_replaced_weights_in_a_local_folder_are_another_scorer(tmp_path: Path) -> None:
    folder = tmp_path / "encoder"
    folder.mkdir()
    (folder / "config.json").write_text('{"hidden_size": 8}', encoding="utf-8")
    (folder / "model.safetensors").write_bytes(b"x" * 10)
    before = scorer_identity(str(folder), 6)
    assert scorer_identity(str(folder), 6) == before
    assert scorer_identity(str(folder), 5) != before
    (folder / "model.safetensors").write_bytes(b"x" * 11)
    assert scorer_identity(str(folder), 6) != before
    assert scorer_identity("hub/name", 6) != scorer_identity("hub/other", 6)


def test_a_later_round_scores_only_its_new_answer_pairs_and_the_same_values(
    tmp_path: Path,
) -> None:
    """Pair scoring through the shared F1 cache (tasks/metrics.py's ``score_pairs_task``):
    the second round's stage asks the scorer only for answer pairs no stage scored, and its
    pair scores equal scoring every pair afresh."""
    import polars as pl

    from sago_core.backends.mock import MockBackend
    from sago_core.config import GenerationSettings, VariantGrid
    from sago_core.stages.generation import generate_responses
    from sago_core.stages.pairs import score_pairs
    from sago_core.stages.semantic_cache import cached_scorer
    from sago_core.stages.variants import build_variant_candidates
    from tests.fakes import PROMPTS

    prompts = PROMPTS
    grid = VariantGrid.model_validate(
        {
            "register": {"strengths": [-4, 4], "positions": ["prefix"]},
            "noise": {"spacing": [5], "capitalization": [50], "positions": ["global"]},
        }
    )
    variants = build_variant_candidates(prompts, grid, seed=0).with_columns(kept=pl.lit(True))
    settings = GenerationSettings(max_new_tokens=8)

    def answers(frame: pl.DataFrame) -> pl.DataFrame:
        return generate_responses(MockBackend("m"), "mock:m", prompts, frame, settings)

    def pairs_of(frame: pl.DataFrame) -> set[tuple[str, str]]:
        base = frame.filter(pl.col("variant_id") == "base").select("prompt_id", "response_text")
        rows = frame.filter(pl.col("variant_id") != "base").join(
            base, on="prompt_id", suffix="_base"
        )
        return set(zip(rows["response_text"], rows["response_text_base"], strict=True))

    first_round = answers(variants.filter(pl.col("family") == "register"))
    score_pairs(first_round, cached_scorer(CountingF1(), str(tmp_path), "minilm-l6", 6))
    full = answers(variants)
    later = CountingF1()
    cached = score_pairs(full, cached_scorer(later, str(tmp_path), "minilm-l6", 6))
    new_pairs = pairs_of(full) - pairs_of(first_round)
    assert new_pairs and set(later.asked) == new_pairs
    assert cached.equals(score_pairs(full, CountingF1()))
