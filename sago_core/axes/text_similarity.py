"""Response similarity to the base response: sentence BLEU (sacrebleu) and BERTScore-F1.

Identical strings score exactly BLEU 100 and F1 1 without calling a scorer: a response equal
to the base response is no instability, and float noise must not say otherwise. An empty
string against a non-empty one scores BLEU 0 and F1 0 (bert-score cannot embed an empty
string under transformers 5, and there is no content to match).
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import lru_cache
from typing import Any

from sago_core.backends.model_source import resolve_bertscore_model


def sentence_bleu(hypothesis: str, reference: str) -> float:
    """sacrebleu sentence BLEU with effective order, on the 0..100 scale."""
    if hypothesis == reference:
        return 100.0
    if not hypothesis.strip() or not reference.strip():
        return 0.0
    import sacrebleu

    return float(sacrebleu.sentence_bleu(hypothesis, [reference], use_effective_order=True).score)


class BertScorer:
    """One persistent BERTScore model; all pairs in one call; each distinct pair scored once."""

    def __init__(self, model: str, num_layers: int, batch_size: int = 64) -> None:
        from bert_score import BERTScorer

        self.model = model
        self.num_layers = num_layers
        self.batch_size = batch_size
        self._scorer: Any = BERTScorer(
            model_type=model, num_layers=num_layers, batch_size=batch_size, lang=None
        )

    def f1(self, candidates: Sequence[str], references: Sequence[str]) -> list[float]:
        if len(candidates) != len(references):
            raise ValueError("candidates and references differ in length")
        scores: dict[tuple[str, str], float] = {}
        todo: list[tuple[str, str]] = []
        for pair in zip(candidates, references, strict=True):
            cand, ref = pair
            if pair in scores:
                continue
            if cand == ref:
                scores[pair] = 1.0
            elif not cand.strip() or not ref.strip():
                scores[pair] = 0.0
            else:
                scores[pair] = float("nan")
                todo.append(pair)
        if todo:
            _, _, f1 = self._scorer.score([c for c, _ in todo], [r for _, r in todo])
            for pair, value in zip(todo, f1.tolist(), strict=True):
                scores[pair] = float(value)
        return [scores[pair] for pair in zip(candidates, references, strict=True)]


@lru_cache(maxsize=2)
def get_bert_scorer(model: str, num_layers: int, batch_size: int = 64) -> BertScorer:
    """The process-wide BERTScore model (the alias ``minilm-l6`` is the embedded scorer)."""
    return BertScorer(resolve_bertscore_model(model), num_layers, batch_size)
