"""Response similarity to the base response: sentence BLEU (sacrebleu) and BERTScore-F1.

Identical strings score exactly BLEU 100 and F1 1 without calling a scorer: a response equal
to the base response is no instability, and float noise must not say otherwise. An empty
string against a non-empty one scores BLEU 0 and F1 0 (bert-score cannot embed an empty
string under transformers 5, and there is no content to match).

Across languages: a ``language`` variant's answer and its English base answer are
in different languages. BLEU counts shared n-grams, so it has no meaning there: missing with
``CROSS_LANGUAGE_BLEU``. BERTScore compares embeddings, which is meaningful only with an
encoder trained on both languages (``multilingual_encoder``); an English-only encoder (the
embedded MiniLM, roberta-large) gives those pairs no score (``without_cross_language``)
and the axis says why (``ENGLISH_ONLY_ENCODER``), never a misleading number. Those pairs
never reach the encoder either (``skip_cross_language`` wraps the scorer's F1): with an
English-only encoder a language variant costs no BERTScore time.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any

import polars as pl

from sago_core.axes.base_pairing import beside_base
from sago_core.axes.reasoning import unanswered
from sago_core.backends.model_source import resolve_bertscore_model
from sago_core.progress import counted
from sago_core.vocabulary import LANGUAGE_FAMILY, ROW_KEY

CROSS_LANGUAGE_BLEU = "answers in different languages: BLEU is not comparable"
ENGLISH_ONLY_ENCODER = (
    "answers in different languages: the BERTScore encoder is English-only (set "
    "bertscore.model to a multilingual encoder, or bertscore.multilingual: true)"
)
# Words in a model's name that say it was trained on many languages (hub ids and folders:
# xlm-roberta-large, bert-base-multilingual-cased, LaBSE, paraphrase-multilingual-*, bge-m3,
# mdeberta-v3-base, multilingual-e5-*). Anything else is taken to be English-only.
MULTILINGUAL_NAME_MARKS = ("multilingual", "xlm", "labse", "mdeberta", "bge-m3", "mbert", "mt5")


def sentence_bleu(hypothesis: str, reference: str) -> float:
    """sacrebleu sentence BLEU with effective order, on the 0..100 scale."""
    if hypothesis == reference:
        return 100.0
    if not hypothesis.strip() or not reference.strip():
        return 0.0
    return float(_sentence_bleu_metric().sentence_score(hypothesis, [reference]).score)


@lru_cache(maxsize=1)
def _sentence_bleu_metric() -> Any:
    """``sacrebleu.sentence_bleu``'s own metric (default tokenizer, exponential smoothing,
    effective order), built once: sacrebleu builds it again on every call."""
    from sacrebleu.metrics import BLEU

    return BLEU(effective_order=True)


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
            for pair, value in zip(todo, self._f1_in_fixed_batches(todo), strict=True):
                scores[pair] = value
        return [scores[pair] for pair in zip(candidates, references, strict=True)]

    def _f1_in_fixed_batches(self, pairs: list[tuple[str, str]]) -> list[float]:
        """bert-score's F1 with batches composed the same way in every process.

        ``bert_cos_score_idf`` embeds ``sorted(set(refs + hyps), key=word count)``: ties keep
        the set's order, which follows the string hash seed, so the texts that share a
        batch (and its padding) differ between processes and F1 moves by ~1e-7. Here the
        texts are ordered by (word count, text) and embedded in batches of that order; the
        greedy matching is bert-score's own, in the caller's pair order.
        """
        import torch
        from bert_score.utils import get_bert_embedding, greedy_cos_idf
        from torch.nn.utils.rnn import pad_sequence

        scorer = self._scorer
        tokenizer = scorer._tokenizer
        idf: dict[int, float] = defaultdict(lambda: 1.0)
        idf[tokenizer.sep_token_id] = 0.0
        idf[tokenizer.cls_token_id] = 0.0
        texts = sorted({t for pair in pairs for t in pair}, key=lambda t: (-len(t.split(" ")), t))
        stats: dict[str, tuple[Any, Any]] = {}
        with torch.no_grad():
            batches = [
                texts[i : i + self.batch_size] for i in range(0, len(texts), self.batch_size)
            ]
            for batch in counted(batches, len(texts)):
                emb, mask, padded_idf = get_bert_embedding(
                    batch, scorer._model, tokenizer, idf, device=scorer.device
                )
                for i, text in enumerate(batch):
                    length = int(mask[i].sum().item())
                    stats[text] = (emb[i, :length].cpu(), padded_idf[i, :length].cpu())

            def padded(batch: list[str]) -> tuple[Any, Any, Any]:
                embs, idfs = zip(*(stats[t] for t in batch), strict=True)
                lengths = torch.tensor([e.size(0) for e in embs])
                mask = torch.arange(int(lengths.max())).expand(len(batch), -1) < lengths[:, None]
                device = scorer.device
                return (
                    pad_sequence(list(embs), batch_first=True, padding_value=2.0).to(device),
                    mask.to(device),
                    pad_sequence(list(idfs), batch_first=True).to(device),
                )

            out: list[float] = []
            for start in range(0, len(pairs), self.batch_size):
                chunk = pairs[start : start + self.batch_size]
                _, _, f1 = greedy_cos_idf(
                    *padded([r for _, r in chunk]), *padded([c for c, _ in chunk])
                )
                out.extend(float(v) for v in f1.tolist())
        return out


@lru_cache(maxsize=2)
def get_bert_scorer(model: str, num_layers: int, batch_size: int = 64) -> BertScorer:
    """The process-wide BERTScore model (the alias ``minilm-l6`` is the embedded scorer)."""
    return BertScorer(resolve_bertscore_model(model), num_layers, batch_size)


def multilingual_encoder(model: str, declared: bool | None = None) -> bool:
    """Whether the BERTScore encoder ``model`` embeds languages beyond English:
    ``declared`` (``bertscore.multilingual``) when set, else read from its name (a hub id or
    a local folder's name; the alias ``minilm-l6`` is English-only)."""
    if declared is not None:
        return declared
    name = Path(model.rstrip("/")).name.lower() or model.lower()
    return any(mark in name for mark in MULTILINGUAL_NAME_MARKS)


def cross_language() -> pl.Expr:
    """True on a row whose variant is asked in another language than its base."""
    return pl.col("family") == LANGUAGE_FAMILY


def without_cross_language(
    pairs: pl.DataFrame, generations: pl.DataFrame, multilingual: bool
) -> pl.DataFrame:
    """``pairs`` with the BERTScore of every cross-language pair null when the encoder is
    English-only (``generations`` says each variant's family); unchanged otherwise, and
    unchanged for a run without language variants."""
    families = generations.select(*ROW_KEY, "family").filter(cross_language())
    if multilingual or families.is_empty():
        return pairs
    marked = pairs.join(families, on=ROW_KEY, how="left")
    bert = pl.when(cross_language()).then(None).otherwise(pl.col("bert_f1"))
    return marked.with_columns(bert.cast(pl.Float64).alias("bert_f1")).select(pairs.columns)


F1Fn = Callable[[Sequence[str], Sequence[str]], list[float]]


def cross_language_texts(generations: pl.DataFrame) -> set[tuple[str, str]]:
    """The (variant answer, base answer) pairs that only cross-language rows hold: the
    pairs an English-only encoder need never embed (a pair a same-language row also holds
    is still scored for that row)."""
    pairs = (
        beside_base(generations)
        .filter(pl.col("answer_text").is_not_null() & pl.col("base_answer").is_not_null())
        .select(cross_language().alias("_cross"), "answer_text", "base_answer")
    )
    same = set(pairs.filter(~pl.col("_cross")).select("answer_text", "base_answer").iter_rows())
    cross = set(pairs.filter(pl.col("_cross")).select("answer_text", "base_answer").iter_rows())
    return cross - same


def skip_cross_language(f1: F1Fn, generations: pl.DataFrame, multilingual: bool) -> F1Fn:
    """``f1`` that gives NaN, without calling the encoder, to every pair only cross-language
    rows hold when the encoder is English-only (``without_cross_language`` then nulls those
    rows); ``f1`` itself with a multilingual encoder or without language variants."""
    skipped = set() if multilingual else cross_language_texts(generations)
    if not skipped:
        return f1

    def scored(candidates: Sequence[str], references: Sequence[str]) -> list[float]:
        keep = [
            i
            for i, pair in enumerate(zip(candidates, references, strict=True))
            if pair not in skipped
        ]
        values = f1([candidates[i] for i in keep], [references[i] for i in keep]) if keep else []
        out = [float("nan")] * len(candidates)
        for i, value in zip(keep, values, strict=True):
            out[i] = value
        return out

    return scored


def bleu_delta_rule() -> tuple[pl.Expr, pl.Expr]:
    """The BLEU axis (registry/axes.py): BLEU against the base answer minus 100; missing
    for a pair in two languages (``CROSS_LANGUAGE_BLEU``)."""
    value = pl.when(cross_language()).then(None).otherwise(pl.col("bleu") - 100.0)
    reason = pl.coalesce(
        unanswered(),
        pl.when(cross_language()).then(pl.lit(CROSS_LANGUAGE_BLEU)),
        pl.lit("no BLEU for this pair"),
    )
    return value, reason


def bert_delta_rule() -> tuple[pl.Expr, pl.Expr]:
    """The BERT axis: BERTScore F1 against the base answer minus 1; a cross-language pair
    left unscored by an English-only encoder is missing with ``ENGLISH_ONLY_ENCODER``."""
    reason = pl.coalesce(
        unanswered(),
        pl.when(cross_language()).then(pl.lit(ENGLISH_ONLY_ENCODER)),
        pl.lit("no BERTScore for this pair"),
    )
    return pl.col("bert_f1") - 1.0, reason
