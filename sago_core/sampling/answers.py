"""The K answers of every prompt text, grouped per prompt, and the text distances between
them, each unique pair of texts measured once.

``samples.parquet`` (``schemas.SAMPLES``) holds one row per (model, prompt, prompt text,
sample): the base, every variant and the replay answered K times. ``group_samples`` turns it
into one ``PromptSamples`` per (model, dataset, prompt): the base's answers and each
variant's, in sample order (``None`` where a sample has no answer: a failed request or a
reasoning block that never closed, ``absent`` says why).

``TextDistances`` measures a text axis over every pair a prompt's variants need: the base's
within pairs once per prompt (shared by all its variants), each variant's within and cross
pairs. BLEU is not symmetric, so it is taken once per ordered pair of distinct texts;
BERTScore-F1 is, so once per unordered pair; identical texts are at distance 0 without a
call (the scorers say so too). The measures are passed in (``sago_core.axes`` holds them),
so this module stays free of the model libraries.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field

import numpy as np
import polars as pl

from sago_core.axes.reasoning import UNCLOSED_REASONING, with_answers
from sago_core.sampling.distances import PairDistances, measure_distances, pairwise
from sago_core.vocabulary import BASE_VARIANT_ID, MODEL_PROMPT_KEY, ROW_KEY, VARIANT_COLUMNS

# (hypotheses, references) -> similarities, one per pair, on the axis' own scale
Similarity = Callable[[Sequence[str], Sequence[str]], list[float]]


@dataclass(frozen=True)
class TextSamples:
    """The K answers of one prompt text, in sample order; ``absent[i]`` says why
    ``answers[i]`` is None."""

    answers: tuple[str | None, ...]
    absent: tuple[str | None, ...]

    @property
    def complete(self) -> bool:
        return all(a is not None for a in self.answers)

    def gap(self, side: str) -> str | None:
        """Why these samples cannot be compared (the first sample without an answer)."""
        for i, reason in enumerate(self.absent):
            if reason is not None:
                return f"{side} sample {i} has no answer: {reason}"
        return None

    def texts(self) -> list[str]:
        return [a for a in self.answers if a is not None]


@dataclass(frozen=True)
class PromptSamples:
    model: str
    dataset: str
    prompt_id: str
    base: TextSamples
    variants: dict[str, TextSamples]  # variant_id -> its samples, in the file's order
    rows: dict[str, dict] = field(default_factory=dict)  # variant_id -> family, ... prompt_text


def _why_absent(row: dict) -> str | None:
    if row["answer_text"] is not None:
        return None
    if row["response_text"] is None:
        return f"generation failed: {row['failure_reason'] or 'no reason recorded'}"
    return UNCLOSED_REASONING


def _samples(rows: list[dict]) -> TextSamples:
    ordered = sorted(rows, key=lambda r: r["sample"])
    return TextSamples(
        tuple(r["answer_text"] for r in ordered), tuple(_why_absent(r) for r in ordered)
    )


def group_samples(samples: pl.DataFrame) -> list[PromptSamples]:
    """One ``PromptSamples`` per (model, dataset, prompt) that has base samples, in the
    file's sorted order; a variant without base samples is an error (the file is broken)."""
    frame = with_answers(samples).sort([*ROW_KEY, "sample"])
    out: list[PromptSamples] = []
    for key, part in frame.group_by(MODEL_PROMPT_KEY, maintain_order=True):
        model, dataset, prompt_id = (str(k) for k in key)
        by_text: dict[str, list[dict]] = {}
        for row in part.iter_rows(named=True):
            by_text.setdefault(row["variant_id"], []).append(row)
        base = by_text.pop(BASE_VARIANT_ID, None)
        if base is None:
            raise ValueError(
                f"samples: prompt {dataset}/{prompt_id} of model {model} has no "
                f"'{BASE_VARIANT_ID}' samples"
            )
        variant_rows = {
            vid: {c: rows[0][c] for c in (*VARIANT_COLUMNS, "prompt_text")}
            for vid, rows in by_text.items()
        }
        out.append(
            PromptSamples(
                model,
                dataset,
                prompt_id,
                _samples(base),
                {vid: _samples(rows) for vid, rows in by_text.items()},
                variant_rows,
            )
        )
    return out


class TextDistances:
    """d = 1 - similarity / scale between texts, each unique pair measured once.

    ``symmetric``: the similarity of (a, b) is that of (b, a) (BERTScore-F1), so a pair is
    measured in one order only. ``need`` collects pairs; ``measure`` scores all collected
    pairs in one call; ``pair`` then reads a (prompt text, base) matrix set."""

    def __init__(self, similarity: Similarity, scale: float, symmetric: bool) -> None:
        if not scale > 0:
            raise ValueError(f"scale: must be > 0, got {scale}")
        self.similarity, self.scale, self.symmetric = similarity, scale, symmetric
        self._wanted: set[tuple[str, str]] = set()
        self._distance: dict[tuple[str, str], float] = {}

    def _key(self, hypothesis: str, reference: str) -> tuple[str, str]:
        if self.symmetric and reference < hypothesis:
            return reference, hypothesis
        return hypothesis, reference

    def need(self, texts: Iterable[str], references: Iterable[str] | None = None) -> None:
        """Every ordered pair of distinct texts among ``texts`` (``references`` None), or
        every pair between ``texts`` and ``references`` in both orders."""
        first = list(dict.fromkeys(texts))
        second = first if references is None else list(dict.fromkeys(references))
        for a in first:
            for b in second:
                if a != b:
                    self._wanted.add(self._key(a, b))
                    self._wanted.add(self._key(b, a))

    @property
    def measured(self) -> int:
        """Pairs scored so far (the similarity function saw each once)."""
        return len(self._distance)

    def measure(self) -> None:
        todo = sorted(self._wanted - self._distance.keys())
        if not todo:
            return
        values = self.similarity([h for h, _ in todo], [r for _, r in todo])
        if len(values) != len(todo):
            raise ValueError(f"similarity: {len(values)} values for {len(todo)} pairs")
        for pair, value in zip(todo, values, strict=True):
            self._distance[pair] = 1.0 - float(value) / self.scale
        self._wanted.clear()

    def distance(self, hypothesis: str, reference: str) -> float:
        if hypothesis == reference:
            return 0.0
        return self._distance[self._key(hypothesis, reference)]

    def square(self, texts: Sequence[str]) -> np.ndarray:
        """d(texts[i], texts[j]) for every ordered pair; the diagonal 0."""
        return pairwise(texts, self.distance)

    def pair(self, variant: Sequence[str], base: Sequence[str]) -> PairDistances:
        """The checked matrices of one (prompt text, base) pair (distances.py)."""
        return measure_distances(variant, base, self.distance)
