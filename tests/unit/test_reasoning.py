"""A thinking model's answer is what follows its reasoning block; an unclosed block has none."""

from __future__ import annotations

import polars as pl
import pytest

from sago_core.axes.reasoning import UNCLOSED_REASONING, answer_text, with_answers
from sago_core.config import GenerationSettings, VariantGrid
from sago_core.scoring.deltas import compute_deltas
from sago_core.stages.generation import generate_responses
from sago_core.stages.pairs import detect_mirroring_frame, score_pairs
from sago_core.stages.variants import build_variant_candidates
from tests.fakes import PROMPTS, FakeBackend


@pytest.mark.parametrize(
    ("response", "answer"),
    [
        ("Paris.", "Paris."),
        ("  Paris is the capital.  ", "  Paris is the capital.  "),  # no block: unchanged
        ("<think>France... capital</think>\n\nParis.", "Paris."),
        ("<THINK>x</Think> Paris", "Paris"),
        ("<thinking>hmm</thinking>Paris.", "Paris."),
        ("<reasoning>a</reasoning>\nParis.\n", "Paris."),
        ("Okay, the user asks about France.\n</think>\n\nParis.", "Paris."),  # Qwen3: opened
        ("<think>a</think> draft <think>b</think> Paris.", "Paris."),  # after the last close
        ("<think>a</think>", ""),  # closed, then an empty answer (not a missing one)
        ("< think >a< / think >Paris", "Paris"),
        ("I think </b> is a tag", "I think </b> is a tag"),  # other tags are text
        ("<think>France is a country in Europe whose capital", None),  # budget ran out
        ("<Reasoning>still going", None),
        ("<think>a</think> Paris <think>but wait", None),  # reopened, never closed
        (None, None),
    ],
)
def test_answer_text_golden(response: str | None, answer: str | None) -> None:
    assert answer_text(response) == answer
    frame = with_answers(
        pl.DataFrame({"response_text": [response]}, schema={"response_text": pl.String})
    )
    assert frame["answer_text"][0] == answer
    assert frame["thinking"][0] == (response is not None and answer is None)


def _answer(prompt: str) -> str:
    if prompt.startswith("Who"):  # p2's base and replay: think, then answer
        return "<think>the play Hamlet</think>\n\nShakespeare wrote it."
    if "Hamlet" in prompt:  # p2's variants: budget ran out while thinking
        return "<think>a play by"
    return "<think>France</think> Paris." if prompt.startswith("What") else "Paris, France."


def test_pairs_and_mirroring_compare_answers_and_an_unclosed_block_is_missing() -> None:
    grid = VariantGrid.model_validate(
        {"register": {"strengths": [4], "positions": ["prefix"]}, "noise": None}
    )
    variants = build_variant_candidates(PROMPTS, grid, seed=0)
    generations = generate_responses(
        FakeBackend(_answer), "fake:m", PROMPTS, variants, GenerationSettings(max_new_tokens=8)
    )
    rows = {(r["prompt_id"], r["family"]): r for r in generations.iter_rows(named=True)}
    assert rows[("p1", "base")]["response_text"] == "<think>France</think> Paris."  # raw kept
    assert rows[("p1", "base")]["answer_text"] == "Paris."
    assert rows[("p2", "register")]["answer_text"] is None

    pairs = score_pairs(
        generations, lambda c, r: [1.0 if a == b else 0.5 for a, b in zip(c, r, strict=True)]
    )
    by = {(r["prompt_id"], r["variant_id"]): r for r in pairs.iter_rows(named=True)}
    p1_replay = by[("p1", "replay:base:0:global")]
    assert p1_replay["bleu"] == 100.0 and p1_replay["bert_f1"] == 1.0  # "Paris." vs "Paris."
    p2 = [r for (pid, _), r in by.items() if pid == "p2" and not _.startswith("replay")]
    assert p2 and all(r["bleu"] is None and r["bert_f1"] is None for r in p2)

    mirroring = detect_mirroring_frame(generations)
    p2_mr = mirroring.filter(
        (pl.col("prompt_id") == "p2") & pl.col("variant_id").str.starts_with("register")
    )
    assert p2_mr["missing_reason"].to_list() == [UNCLOSED_REASONING]

    analysis = pl.DataFrame(
        {
            "model": "fake:m",
            "dataset": "d",
            "prompt_id": generations["prompt_id"],
            "variant_id": generations["variant_id"],
            "layer_cosines": [[1.0]] * generations.height,
            "layer_cosines_user": [None] * generations.height,
            "act_cos_mean": 1.0,
            "logprob": -1.0,
            "mean_entropy": 0.5,
            "n_response_tokens": 1,
            "missing_reason": None,
        },
        schema_overrides={"layer_cosines_user": pl.List(pl.Float64), "missing_reason": pl.String},
    )
    deltas = compute_deltas(generations, analysis, pairs, mirroring)
    gaps = deltas.filter(pl.col("delta").is_null())
    assert set(gaps["prompt_id"]) == {"p2"} and set(gaps["axis"]) == {"bleu", "bert", "mr"}
    text_gaps = gaps.filter(pl.col("axis") != "mr")["missing_reason"]
    assert set(text_gaps) == {f"variant {UNCLOSED_REASONING}"}
    assert set(gaps.filter(pl.col("axis") == "mr")["missing_reason"]) == {UNCLOSED_REASONING}


def test_a_generations_frame_without_answer_text_is_read_as_before() -> None:
    """Frames written before the column existed: the answer is derived from response_text."""
    frame = pl.DataFrame(
        {
            "model": "m",
            "dataset": "d",
            "prompt_id": "p",
            "variant_id": ["base", "noise:spacing:5:global"],
            "family": ["base", "noise"],
            "subtype": ["base", "spacing"],
            "strength": [0.0, 5.0],
            "position": "global",
            "prompt_text": ["q", "q  "],
            "response_text": ["<think>x</think>Paris", "Paris"],
        }
    )
    pairs = score_pairs(frame, lambda c, r: [1.0] * len(c))
    assert pairs["bleu"].to_list() == [100.0]
