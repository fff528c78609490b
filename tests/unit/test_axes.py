"""Axis measurements: golden cases for cosines, BLEU, BERTScore wiring and mirroring rules."""

from __future__ import annotations

import numpy as np
import pytest
import sacrebleu

from sago_core.axes.activation import layer_cosines
from sago_core.axes.mirroring import (
    detect_mirroring,
    extra_spaces,
    noise_mirroring,
    register_mirroring,
)
from sago_core.axes.text_similarity import sentence_bleu


def test_layer_cosines_golden() -> None:
    a = np.array([[1.0, 0.0], [1.0, 1.0], [0.0, 2.0]], dtype=np.float32)
    b = np.array([[0.0, 1.0], [-1.0, -1.0], [0.0, 5.0]], dtype=np.float32)
    assert layer_cosines(a, b) == pytest.approx([0.0, -1.0, 1.0])
    assert np.all(layer_cosines(a, a) == 1.0)


def test_identical_hidden_states_give_exactly_zero_delta() -> None:
    rng = np.random.default_rng(0)
    h = rng.standard_normal((30, 576)).astype(np.float32)
    assert np.all(layer_cosines(h, h.copy()) == 1.0)  # the Act delta, mean cos - 1, is 0
    assert np.all(layer_cosines(h * 1.0001, h) <= 1.0)


def test_bleu_golden_pairs() -> None:
    assert sentence_bleu("The capital is Paris.", "The capital is Paris.") == 100.0
    assert sentence_bleu("", "Paris") == 0.0
    hyp, ref = "the cat sat on the mat today", "the cat sat on a mat today"
    expected = sacrebleu.sentence_bleu(hyp, [ref], use_effective_order=True).score
    assert sentence_bleu(hyp, ref) == pytest.approx(expected)
    assert 30.0 < sentence_bleu(hyp, ref) < 60.0


def test_noise_mirroring_rules() -> None:
    base = "The answer is Paris. It is the capital of France."
    assert noise_mirroring("spacing", 20, base, base) == 0
    spaced = base.replace(" ", "    ")
    assert extra_spaces(spaced) == 3 * 9
    assert noise_mirroring("spacing", 20, spaced, base) == 1
    assert (
        noise_mirroring("punctuation", 10, "The answer; is: Paris!! (yes) - [France].", base) == 1
    )
    assert noise_mirroring("capitalization", 50, base.upper(), base) == 1
    assert noise_mirroring("capitalization", 50, base, base.upper()) == 0


def test_register_mirroring_rules() -> None:
    base = "Paris is the capital of France."
    polite = "Thank you for asking! Paris is the capital of France. I hope this helps!"
    assert register_mirroring(4, polite, base) == 1
    assert register_mirroring(4, base, base) == 0
    assert register_mirroring(-4, "Obviously, Paris.", base) == 1
    assert register_mirroring(-4, base, base) == 0


def test_mood_mirroring_rule() -> None:
    imperative = "Tell me the capital of France."
    verdict = detect_mirroring(
        "structural", "mood", 1, "Name it: Paris.", "It is Paris.", imperative
    )
    assert (verdict.m_variant, verdict.m_base) == (1, 0)
    question = "What is the capital of France?"
    asks = detect_mirroring("structural", "mood", 1, "Why ask? Paris.", "Paris.", question)
    assert (asks.m_variant, asks.m_base) == (1, 0)
    same = detect_mirroring("structural", "mood", 1, "Paris.", "Paris.", question)
    assert (same.m_variant, same.m_base) == (0, 0)


def test_unknown_family_is_missing_not_zero() -> None:
    verdict = detect_mirroring("other", "x", 1, "Paris.", "Paris.", "q")
    assert verdict.m_variant is None and verdict.missing_reason


def test_length_mirroring_base_is_evaluated() -> None:
    verdict = detect_mirroring("structural", "length", 2.0, "a b c d e f g h", "a b c d", "q")
    assert (verdict.m_variant, verdict.m_base) == (1, 0)
