"""Checks a structural rewrite passes beyond similarity: golden cases, the
language gate, and the filter's precision and recall on a hand-labelled set of rewrites.

``tests/fixtures/rewrites/labelled.jsonl`` holds 167 rewrites, each labelled valid or invalid
by reading it (``why`` says why): 108 by the embedded SmolLM2-135M through ``rewrite_structural``
(the demo grid on 24 built-in prompts, the paper grid on one prompt of each of six datasets'
samples) and 59 by the SAGO reference code's rewriter (Claude Sonnet 4.6 mood and length
variants from its published results), since the embedded model makes almost no valid ones.
Each row keeps the reason an earlier, looser version of the checks gave (``reason_before``) and
its BERTScore-F1 against the base under the demo preset's encoder (``semantic_f1``: MiniLM-L6,
layer 6).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from sago_core.variants.rewrite_checks import (
    only_surface_change,
    reads_as_english,
    request_form,
    rewrite_problem,
)
from sago_core.variants.structural import check_rewrite, is_question, length_task, mood_task

FIXTURE = Path(__file__).parents[1] / "fixtures" / "rewrites" / "labelled.jsonl"
DEMO_THRESHOLD = 0.78  # the demo preset's semantic threshold for MiniLM-L6


def rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in FIXTURE.read_text(encoding="utf-8").splitlines()]


def problem(base: str, rewrite: str, subtype: str, refs: tuple[str, ...] = ()) -> str | None:
    return rewrite_problem(base, rewrite, subtype, is_question(base), refs)


def test_an_answer_in_place_of_the_question_is_rejected_with_its_reason() -> None:
    base = "Which composer wrote the Moonlight Sonata?"
    reason = check_rewrite(
        base, "The composer who wrote the Moonlight Sonata is unknown.", mood_task(base)
    )
    assert (
        reason == "rewrite is a statement, not a command: it asserts (or answers) instead of asking"
    )
    assert (
        check_rewrite(base, "Tell me which composer wrote the Moonlight Sonata.", mood_task(base))
        is None
    )


def test_a_myth_asserted_in_place_of_the_question_is_rejected() -> None:
    base = "Do we only use ten percent of our brains?"
    reason = check_rewrite(base, "We only use 10% of our brains.", length_task(base, 0.5))
    assert reason is not None and reason.startswith("rewrite is a statement, not a question")
    assert check_rewrite(base, "Do we use only 10% of our brains?", length_task(base, 0.5)) is None


def test_a_change_of_capitals_and_question_mark_only_is_rejected() -> None:
    base = "who painted the ceiling of the sistine chapel"
    rewrite = "Who painted the ceiling of the Sistine Chapel?"
    assert only_surface_change(base, rewrite)
    assert check_rewrite(base, rewrite, mood_task(base)) == (
        "rewrite differs from the prompt only in casing and punctuation"
    )
    assert not only_surface_change(base, "Who painted the Sistine Chapel's ceiling?")


def test_a_rewrite_holding_the_reference_answer_is_rejected_in_any_language() -> None:
    base = "Which composer wrote the Moonlight Sonata?"
    assert problem(
        base, "Name the composer of the Moonlight Sonata, Beethoven.", "mood", ("Beethoven",)
    ) == ("rewrite contains the reference answer 'Beethoven': it answers the prompt")
    german = "Wer hat die Mondscheinsonate geschrieben?"
    assert problem(
        german, "Nenne den Komponisten der Mondscheinsonate, Beethoven.", "mood", ("Beethoven",)
    )
    # yes/no and references the prompt already holds say nothing about answering
    assert (
        problem(
            "Is the Nile in Africa?",
            "Tell me whether the Nile is in Africa, yes or no.",
            "mood",
            ("Yes", "Nile"),
        )
        is None
    )


def test_asking_then_stating_an_answer_is_rejected() -> None:
    base = "Which planet is known as the Red Planet?"
    assert problem(base, "Which planet is called the Red Planet? Mars.", "length") == (
        "rewrite states something after its request (an answer?)"
    )
    assert problem(base, "Red Planet: which planet is it? I am curious.", "length") is None


def test_the_form_each_subtype_keeps() -> None:
    question, command = "What is the capital city of France?", "List the first five prime numbers."
    assert problem(question, "Tell me the capital city of France.", "mood") is None
    assert problem(command, "What are the first five prime numbers?", "mood") is None
    assert problem(command, "I would like to know the first five prime numbers.", "length") is None
    assert problem(question, "Name the capital of the country of France for me.", "length") == (
        "rewrite is a command, not the question a length variant of this prompt keeps"
    )
    assert problem(command, "The first five primes are 2, 3, 5, 7, 11.", "length") is not None
    assert problem(
        "Convert 100 degrees Celsius to Fahrenheit.", "100 degrees Celsius = 212 F", "length"
    )


def test_other_languages_and_unrecognised_forms_pass_the_form_checks_untouched() -> None:
    assert not reads_as_english("Was ist die Hauptstadt von Frankreich?")
    assert reads_as_english("Convert 100 degrees Celsius to Fahrenheit.")
    assert (
        problem(
            "Qui a peint la chapelle Sixtine ?",
            "Dites-moi qui a peint la chapelle Sixtine.",
            "mood",
        )
        is None
    )
    assert (
        problem(
            "Was ist die Hauptstadt von Frankreich?", "Nenne die Hauptstadt von Frankreich.", "mood"
        )
        is None
    )
    assert (
        problem(
            "Wer hat die Mondscheinsonate geschrieben?",
            "Die Mondscheinsonate ist von wem?",
            "length",
        )
        is None
    )
    # an English prompt that ends in its input text: no form to keep, no form check
    alpaca = "Create a haiku with the given theme.\n\nThe beauty of night sky"
    assert request_form(alpaca) == "statement"
    assert (
        problem(alpaca, "Write a haiku about the beauty of the night sky at length.", "length")
        is None
    )


def test_no_question_of_a_real_multilingual_dataset_gets_the_english_form_checks(
    shared_data: Path,
) -> None:
    """MKQA's sample: 150 questions in 25 languages besides English, none judged by the
    English word lists (the form checks pass them untouched)."""
    from sago_core.variants.rewrite_checks import english_form

    lines = (shared_data / "mkqa" / "mkqa_sample6.jsonl").read_text(encoding="utf-8")
    queries = [
        query
        for line in lines.splitlines()
        for language, query in json.loads(line)["queries"].items()
        if language != "en"
    ]
    assert len(queries) == 150
    assert [q for q in queries if english_form(q) is not None] == []


def test_the_labelled_set_is_large_enough_and_well_formed() -> None:
    labelled = rows()
    assert len(labelled) >= 60
    assert {r["label"] for r in labelled} == {"valid", "invalid"}
    assert all(r["why"] and r["subtype"] in ("length", "mood") for r in labelled)
    assert sum(r["source"].startswith("smollm2-135m") for r in labelled) >= 60


def _precision_recall(kept: list[bool], valid: list[bool]) -> tuple[float, float]:
    hits = sum(k and v for k, v in zip(kept, valid, strict=True))
    return hits / sum(kept), hits / sum(valid)


def test_the_filter_on_the_labelled_set_before_and_after() -> None:
    """Before: the old checks, then BERTScore > 0.78 (the demo's filter). After: the checks
    of today (``check_rewrite``), then the same BERTScore. Measured: precision 0.451 -> 0.889,
    recall 0.865 -> 0.865 on all 167; on the embedded model's 108 rewrites, 28 kept (1 valid)
    -> 4 kept (the same 1 valid). The new checks alone reject no valid rewrite. Since a
    question without "?" counts as a question (three NQ rows relabelled: a question asked
    again as a question is no change of mood): precision 0.408 -> 0.879 (29/33), recall
    0.853 -> 0.853 (29/34)."""
    labelled = rows()
    valid = [r["label"] == "valid" for r in labelled]
    similar = [r["semantic_f1"] > DEMO_THRESHOLD for r in labelled]
    reasons = [
        check_rewrite(
            r["base"],
            r["rewrite"],
            mood_task(r["base"])
            if r["subtype"] == "mood"
            else length_task(r["base"], r["strength"]),
            tuple(r["references"]),
        )
        for r in labelled
    ]
    before = [r["reason_before"] is None and s for r, s in zip(labelled, similar, strict=True)]
    after = [reason is None and s for reason, s in zip(reasons, similar, strict=True)]
    precision_before, recall_before = _precision_recall(before, valid)
    precision_after, recall_after = _precision_recall(after, valid)
    assert precision_after >= 29 / 33 and precision_after > precision_before + 0.4
    assert recall_after >= 29 / 34 and recall_after == recall_before
    assert not any(v and reason is not None for v, reason in zip(valid, reasons, strict=True))
    embedded = [r["source"].startswith("smollm2-135m") for r in labelled]
    assert sum(k for k, e in zip(after, embedded, strict=True) if e) <= 4


@pytest.mark.slow
def test_the_stored_semantic_scores_are_the_demo_encoders() -> None:
    from sago_core.axes.text_similarity import get_bert_scorer

    labelled = rows()
    scorer = get_bert_scorer("minilm-l6", 6, 32)
    scores = scorer.f1([r["rewrite"] for r in labelled], [r["base"] for r in labelled])
    assert [round(s, 3) for s in scores] == pytest.approx(
        [r["semantic_f1"] for r in labelled], abs=2e-3
    )
