"""The demo's semantic threshold for MiniLM-L6 (layer 6), measured, not assumed.

Calibration (kept share at 0.78 over the 36 built-in prompts, both directions): +-2 prefix
1.00, +-2 suffix 1.00, +-2 global 0.58, +-4 prefix 0.81, +-4 suffix 0.94, +-4 global 0.32;
levels 8-10 mostly rejected. Content changes scored 0.24-0.76 and are rejected. Minimal
one-word edits ("ceiling" -> "floor": 0.91) score above every usable threshold: BERTScore
guards against gross drift, which is what the paper's filter is for.
"""

from __future__ import annotations

import pytest

from sago_core.axes.text_similarity import get_bert_scorer
from sago_core.config import PRESETS
from sago_core.data.builtin import builtin_prompts
from sago_core.variants.register import apply_register

DRIFTED = [
    ("What is the capital of France?", "What is the capital of Germany?"),
    ("What is the capital city of australia", "What is the capital city of austria"),
    ("Who wrote the novel pride and prejudice", "Who wrote the novel war and peace"),
    ("What is the capital of France?", "Who painted the Mona Lisa?"),
]


@pytest.fixture(scope="module")
def demo_filter() -> tuple[object, float]:
    settings = PRESETS["demo"].bertscore
    scorer = get_bert_scorer(settings.model, settings.num_layers)
    return scorer, settings.semantic_threshold


@pytest.mark.slow
def test_content_changes_are_rejected(demo_filter: tuple) -> None:
    scorer, threshold = demo_filter
    scores = scorer.f1([b for _, b in DRIFTED], [a for a, _ in DRIFTED])
    assert all(s <= threshold for s in scores), scores


@pytest.mark.slow
def test_light_register_variants_are_kept(demo_filter: tuple) -> None:
    scorer, threshold = demo_filter
    bases = [p.prompt for p in builtin_prompts()]
    for position in ("prefix", "suffix"):
        variants = [apply_register(b, s, position) for b in bases for s in (-2, 2)]
        refs = [b for b in bases for _ in (-2, 2)]
        scores = scorer.f1(variants, refs)
        assert min(scores) > threshold, (position, min(scores))


@pytest.mark.slow
def test_strong_register_variants_are_mostly_rejected(demo_filter: tuple) -> None:
    scorer, threshold = demo_filter
    bases = [p.prompt for p in builtin_prompts()]
    variants = [apply_register(b, 10, "global") for b in bases]
    scores = scorer.f1(variants, bases)
    assert sum(s > threshold for s in scores) / len(scores) < 0.2


@pytest.mark.slow
def test_bertscore_wiring_matches_a_direct_bert_score_call(demo_filter: tuple) -> None:
    from bert_score import score

    from sago_core.backends.model_source import resolve_bertscore_model

    scorer, _ = demo_filter
    pairs = [
        ("The capital of France is Paris.", "Paris is the capital of France."),
        ("It is Paris.", "The answer is Berlin."),
    ]
    ours = scorer.f1([c for c, _ in pairs], [r for _, r in pairs])
    _, _, direct = score(
        [c for c, _ in pairs],
        [r for _, r in pairs],
        model_type=resolve_bertscore_model("minilm-l6"),
        num_layers=6,
    )
    assert ours == pytest.approx(direct.tolist(), abs=1e-5)
    assert ours[0] > ours[1]
    assert scorer.f1(["same"], ["same"]) == [1.0] and scorer.f1([""], ["x"]) == [0.0]
