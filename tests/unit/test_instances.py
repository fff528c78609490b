"""instances.parquet: one row per variant with texts, the six deltas side by side, verdicts
and graded mirroring (checked against hand-counted values)."""

from __future__ import annotations

import math

import polars as pl
import pytest

from sago_core.artifacts.schemas import INSTANCES
from sago_core.axes.mirroring_intensity import (
    NO_ANSWER,
    NOTHING_INSERTED,
    length_intensity,
    mirroring_intensity,
    mood_intensity,
    noise_intensity,
    register_intensity,
)
from sago_core.data.datasets import NO_GOLD_ALPACA
from sago_core.stages import instances as stage
from sago_core.stages.instances import build_instances
from sago_core.vocabulary import AXES, REPLAY_FAMILY, REPLAY_VARIANT_ID
from tests.unit.test_tails import raw_run

CONTRACT = [
    "model",
    "dataset",
    "prompt_id",
    "variant_id",
    "family",
    "subtype",
    "strength",
    "position",
    "base_prompt",
    "variant_prompt",
    "base_answer",
    "variant_answer",
    *(f"d_{axis}" for axis in AXES),
    "mr_intensity",
]


def test_one_row_per_variant_with_the_six_deltas_side_by_side() -> None:
    raw = raw_run(prompts=3)
    instances = build_instances(raw["deltas"], raw["generations"], raw["prompts"])
    assert instances.columns[: len(CONTRACT)] == CONTRACT
    assert instances.schema == pl.Schema(INSTANCES)
    deltas = raw["deltas"].filter(pl.col("family") != REPLAY_FAMILY)
    assert instances.height == deltas.height // len(AXES)  # the replay is not a variant
    assert REPLAY_VARIANT_ID not in instances["variant_id"].to_list()
    key = ["dataset", "prompt_id", "variant_id"]
    for axis in AXES:
        long = deltas.filter(pl.col("axis") == axis).select(*key, "delta_norm", "missing_reason")
        joined = instances.join(long, on=key)
        assert joined.height == instances.height
        same = joined[f"d_{axis}"].eq_missing(joined["delta_norm"])
        assert same.all()
        gone = joined.filter(pl.col("delta_norm").is_null())
        assert len(gone) and (gone[f"reason_{axis}"] == "gone").all()
    generations = raw["generations"]
    row = instances.filter((pl.col("dataset") == "d1") & (pl.col("prompt_id") == "p1")).row(
        0, named=True
    )
    asked = generations.filter(
        (pl.col("dataset") == "d1")
        & (pl.col("prompt_id") == "p1")
        & (pl.col("variant_id").is_in(["base", row["variant_id"]]))
    )
    texts = dict(zip(asked["variant_id"], asked["prompt_text"], strict=True))
    answers = dict(zip(asked["variant_id"], asked["answer_text"], strict=True))
    assert row["base_prompt"] == texts["base"] == "Capital of X1?"
    assert row["variant_prompt"] == texts[row["variant_id"]]
    assert (row["base_answer"], row["variant_answer"]) == (
        answers["base"],
        answers[row["variant_id"]],
    )
    assert row["base_correct"] == (answers["base"] == "It is Paris.")


def test_verdicts_are_null_without_references_and_without_an_answer() -> None:
    raw = raw_run(prompts=2)
    failed = raw["generations"].with_columns(
        pl.when((pl.col("dataset") == "d1") & (pl.col("prompt_id") == "p0"))
        .then(None)
        .otherwise(pl.col("answer_text"))
        .alias("answer_text")
    )
    instances = build_instances(raw["deltas"], failed, raw["prompts"])
    assert instances.filter(pl.col("dataset") == "d2")["base_correct"].null_count() == (
        instances.filter(pl.col("dataset") == "d2").height
    )
    gone = instances.filter((pl.col("dataset") == "d1") & (pl.col("prompt_id") == "p0"))
    assert gone["variant_correct"].null_count() == gone.height
    assert (gone["mr_intensity_reason"] == NO_ANSWER).all() and gone["mr_intensity"].is_null().all()
    kept = instances.filter((pl.col("dataset") == "d1") & (pl.col("prompt_id") == "p1"))
    assert kept["base_correct"].null_count() == 0


def test_a_null_verdict_says_why_beside_it() -> None:
    """d2: no references, with prompts.parquet's reason; d1 p0: no base answer; d1 p1: a
    reference of punctuation only; d1 p2: judged (no reason)."""
    raw = raw_run(prompts=3)
    prompts = raw["prompts"].with_columns(
        pl.when((pl.col("dataset") == "d1") & (pl.col("prompt_id") == "p1"))
        .then(pl.lit(["?!"], dtype=pl.List(pl.String)))
        .otherwise(pl.col("references"))
        .alias("references"),
        pl.when(pl.col("dataset") == "d2")
        .then(pl.lit(NO_GOLD_ALPACA))
        .otherwise(None)
        .alias("reference_missing_reason"),
    )
    failed = raw["generations"].with_columns(
        pl.when((pl.col("prompt_id") == "p0") & (pl.col("variant_id") == "base"))
        .then(None)
        .otherwise(pl.col("answer_text"))
        .alias("answer_text")
    )
    instances = build_instances(raw["deltas"], failed, prompts)
    reasons = {
        (d, p): set(group["correct_missing_reason"].to_list())
        for (d, p), group in instances.group_by("dataset", "prompt_id")
    }
    assert reasons[("d2", "p0")] == reasons[("d2", "p2")] == {NO_GOLD_ALPACA}
    assert reasons[("d1", "p0")] == {stage.NO_ANSWER}
    assert reasons[("d1", "p1")] == {stage.NO_REFERENCE_WORDS}
    assert reasons[("d1", "p2")] == {None}
    judged = instances.filter(pl.col("correct_missing_reason").is_null())
    assert judged["base_correct"].null_count() == judged["variant_correct"].null_count() == 0


def test_noise_intensity_is_the_share_of_inserted_noise_reproduced() -> None:
    base_prompt = "What is the capital of France?"
    variant = "What  is the   capital of  France?"  # 1 + 2 + 1 = 4 extra spaces
    answer = "Paris  is the  capital."  # 2 extra spaces more than the base answer
    graded = noise_intensity("spacing", answer, "Paris is the capital.", variant, base_prompt)
    assert graded.value == pytest.approx(2 / 4)
    marks = noise_intensity("punctuation", "Paris;; (yes)", "Paris", "Cap;ital?( of)", "Capital?")
    assert marks.value == pytest.approx(1.0)  # 4 marks copied of 3 inserted: capped at 1
    caps = noise_intensity("capitalization", "pARIS", "paris", "WHAT is it?", "what is it?")
    assert caps.value == pytest.approx(4 / 4)
    fewer = noise_intensity("spacing", "Paris", "Paris  is", variant, base_prompt)
    assert fewer.value == 0.0  # fewer spaces than the base answer: nothing copied
    none = noise_intensity("spacing", "a  b", "a b", base_prompt, base_prompt)
    assert none.value is None and none.missing_reason == NOTHING_INSERTED


def test_register_intensity_is_the_marker_surplus_against_the_prompts() -> None:
    base = "Name the capital."
    polite = "Please, kindly name the capital, thank you."  # three politeness markers
    assert register_intensity(4, "Paris, thank you!", "Paris.", polite, base).value == (
        pytest.approx(1 / 3)
    )
    assert register_intensity(4, "Paris.", "Paris.", polite, base).value == 0.0
    rude = "Just name the capital, obviously."  # two bluntness markers
    blunt = register_intensity(-4, "Obviously Paris.", "Paris, thanks.", rude, base)
    assert blunt.value == pytest.approx(min(1.0, (1 + 1) / 2))  # one blunt more, one polite less


def test_length_and_mood_intensities() -> None:
    two_words, eight_words = "a b", "a b c d e f g h"
    assert length_intensity(2.0, eight_words, "a b c d").value == pytest.approx(1.0)
    assert length_intensity(4.0, "a b c d e f g h", "a b c d").value == pytest.approx(0.5)
    assert length_intensity(0.5, "a b c", "a b c d").value == pytest.approx(
        math.log(3 / 4) / math.log(0.5)
    )
    assert length_intensity(2.0, two_words, "a b c d").value == 0.0  # moved the other way
    assert mood_intensity("Is it Paris?", "Paris.", "Is the capital Paris?").value == 1.0
    assert mood_intensity("Is it Paris?", "Is it?", "Is the capital Paris?").value == 0.0
    assert mirroring_intensity("replay", "base", 0.0, "x", "y", "p", "p").value == 0.0
    odd = mirroring_intensity("structural", "other", 1.0, "x", "y", "p", "q")
    assert odd.value is None and "no intensity measure" in str(odd.missing_reason)
