"""``sampling_tests.parquet`` (``schemas.SAMPLING_TESTS``): per (model, prompt, variant,
sampled axis) the excess of the variant over resampling its base, with its permutation test,
and per (prompt, variant) the flips beyond the base's self-flip rate and the semantic spread.

The rule of each axis at K > 1 (``SAMPLED_AXES``; docs/tutorials/sampling.md, "What the
numbers mean"): ``bleu``/``bert`` the excess E (``excess.excess``) tested by relabelling the
pooled samples (``permutation.permutation_test``), a language variant without them as at
K = 1; ``mr`` the detectors' flagged-share difference (``excess.mirroring_excess``) tested
by relabelling, NA for a family the LLM judge reads (it is not asked about K x K pairs);
``prob``/``ent`` every base sample teacher-forced under both prompts
(``excess.teacher_forced_delta``) tested by sign flips. ``act`` is a property of the prompt
and stays as at K = 1 (``excess_deltas``).

The per-sample scores the variance decomposition reads (``cell_scores``) score every cell
of a prompt, its base included, against one held-out half of the base samples, so the
prompt-induced share is 0 in expectation when the wording does nothing. Missing data is NA
with a reason, never 0.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import polars as pl

from sago_core.artifacts.rows import from_rows
from sago_core.artifacts.schemas import SAMPLING_TESTS
from sago_core.axes.mirroring import detect_mirroring
from sago_core.sampling.answers import (
    PromptSamples,
    Similarity,
    TextDistances,
    TextSamples,
    group_samples,
)
from sago_core.sampling.excess import excess, mirroring_excess, teacher_forced_delta
from sago_core.sampling.flips import flip_excess
from sago_core.sampling.permutation import (
    PermutationTest,
    permutation_test,
    share_permutation_test,
    sign_flip_test,
)
from sago_core.sampling.spread import DEFAULT_THRESHOLD, compare_spread
from sago_core.statistics.correctness import is_correct
from sago_core.statistics.intervals import stable_seed
from sago_core.vocabulary import BASE_VARIANT_ID, LANGUAGE_FAMILY, SCALES, VARIANT_COLUMNS

TEXT_AXES = ("bleu", "bert")
TEACHER_FORCED = {"prob": "logprob", "ent": "mean_entropy"}  # axis -> sample_analysis column
SAMPLED_AXES = (*TEXT_AXES, "prob", "ent", "mr")
JUDGED = "mirroring judged by the LLM judge: the judge is not asked about K x K sample pairs"
NOT_GRADED = "a language variant's answers are not graded against the prompt's references"
NOT_MEASURED = "not measured by the backend"
# text axis -> why a language variant's answers are not comparable with its base's (None: they are)
CrossLanguage = Mapping[str, str | None]


def _text_distances(bleu: Similarity, bert_f1: Similarity) -> dict[str, TextDistances]:
    return {
        "bleu": TextDistances(bleu, SCALES["bleu"], symmetric=False),
        "bert": TextDistances(bert_f1, SCALES["bert"], symmetric=True),
    }


def _cross_language(axis: str, family: str, cross_language: CrossLanguage) -> str | None:
    return cross_language.get(axis) if family == LANGUAGE_FAMILY else None


def _collect(
    prompts: list[PromptSamples], texts: dict[str, TextDistances], cross_language: CrossLanguage
) -> None:
    """Every pair the text axes will read, so each is measured once in one call per axis."""
    for prompt in prompts:
        base = prompt.base.texts()
        for axis, distances in texts.items():
            distances.need(base)
            for vid, variant in prompt.variants.items():
                distances.need(variant.texts())
                if _cross_language(axis, prompt.rows[vid]["family"], cross_language) is None:
                    distances.need(variant.texts(), base)
    for distances in texts.values():
        distances.measure()


def _test_fields(test: PermutationTest) -> dict[str, Any]:
    return {
        "p_value": test.p_value,
        "p_method": test.method,
        "min_p": test.min_p,
        "p_missing_reason": test.missing_reason,
    }


def held_out(k_base: int) -> int:
    """How many of the K base samples form the base's own cell (the first K // 2); the
    others are the reference every cell of the prompt is scored against."""
    return k_base // 2


def cell_scores(
    cross: np.ndarray, within_base: np.ndarray
) -> tuple[list[float], list[float] | None]:
    """Per-sample scores of one prompt text and of its base (``components.py`` decomposes
    them): each sample's mean over the reference half of the base samples (the last
    K - K // 2) of ``cross[i, j]`` (variant sample i against base sample j) or
    ``within_base[i, j]`` (base sample i of the first half against base sample j).

    Every cell, the base's included, is scored against the same held-out reference, so with
    every text drawn from the base's distribution the scores of all cells are exchangeable
    and the prompt-induced share is 0 in expectation. Scoring a base sample against the
    *other* base samples and a variant sample against *all* of them (the rule before issue
    39) shrank the base cell's spread and shifted its mean by a term of its own samples:
    measured mean share 0.045 with the interval excluding 0 in 17% of null runs at K = 4,
    0.016 and 2% with this rule (``tests/unit/test_sampling_variance.py``). None for the
    base at K = 1: no reference is left to score its one sample against."""
    h = held_out(cross.shape[1])
    variant = [float(v) for v in cross[:, h:].mean(axis=1)]
    base = [float(v) for v in within_base[:h, h:].mean(axis=1)] if h else None
    return variant, base


def _scores(cross: np.ndarray, within_base: np.ndarray) -> dict[str, Any]:
    variant, base = cell_scores(cross, within_base)
    return {"sample_scores": variant, "base_sample_scores": base}


def _missing(reason: str, k_variant: int, k_base: int) -> dict[str, Any]:
    return {"missing_reason": reason, "k_variant": k_variant, "k_base": k_base}


def _text_row(
    axis: str,
    distances: TextDistances,
    variant: TextSamples,
    base: TextSamples,
    family: str,
    cross_language: CrossLanguage,
    seed: int,
) -> dict[str, Any]:
    k_v, k_b = len(variant.answers), len(base.answers)
    reason = (
        variant.gap("variant") or base.gap("base") or _cross_language(axis, family, cross_language)
    )
    if reason:
        return _missing(reason, k_v, k_b)
    pair = distances.pair(variant.texts(), base.texts())
    value = excess(pair)
    return {
        "k_variant": k_v,
        "k_base": k_b,
        "cross": value.cross,
        "within_base": value.within_base,
        "within_variant": value.within_variant,
        "excess": value.value,
        "missing_reason": value.missing_reason,
        **_test_fields(permutation_test(pair, seed)),
        **_scores(pair.cross, pair.within_base),
    }


def _mirroring_row(
    row: dict, variant: TextSamples, base: TextSamples, judged: bool, seed: int
) -> dict[str, Any]:
    k_v, k_b = len(variant.answers), len(base.answers)
    reason = variant.gap("variant") or base.gap("base") or (JUDGED if judged else None)
    if reason:
        return _missing(reason, k_v, k_b)
    pooled = [*variant.texts(), *base.texts()]
    flags = np.zeros((len(pooled), len(pooled)))
    for i, response in enumerate(pooled):
        for j, reference in enumerate(pooled):
            if i == j and not (k_b == 1 and i == k_v):
                continue  # a sample against itself only for the single base sample (K = 1)
            verdict = detect_mirroring(
                row["family"],
                row["subtype"],
                row["strength"],
                response,
                reference,
                row["prompt_text"],
            )
            if verdict.m_variant is None:
                return _missing(verdict.missing_reason or "no mirroring verdict", k_v, k_b)
            flags[i, j] = verdict.m_variant
    cross = flags[:k_v, k_v:]
    within = flags[k_v:, k_v:]
    base_pairs = (
        [bool(within[0, 0])]
        if k_b == 1
        else [bool(within[i, j]) for i in range(k_b) for j in range(k_b) if i != j]
    )
    value = mirroring_excess([bool(f) for f in cross.ravel()], base_pairs)
    return {
        "k_variant": k_v,
        "k_base": k_b,
        "mean_variant": value.share_variant,
        "mean_base": value.share_base,
        "excess": value.value,
        "missing_reason": value.missing_reason,
        **_test_fields(share_permutation_test(flags, k_v, seed)),
        **_scores(cross, within),
    }


TeacherForcedValues = dict[tuple[str, str, str, str], dict[int, tuple[float | None, str | None]]]


def _teacher_forced(sample_analysis: pl.DataFrame, column: str) -> TeacherForcedValues:
    """(model, dataset, prompt_id, variant_id) -> {base sample: (value, missing reason)}."""
    out: TeacherForcedValues = {}
    for row in sample_analysis.iter_rows(named=True):
        key = (row["model"], row["dataset"], row["prompt_id"], row["variant_id"])
        value = row[column]
        finite = value is not None and np.isfinite(value)
        reason = None if finite else (row["missing_reason"] or "non-finite measurement")
        out.setdefault(key, {})[int(row["sample"])] = (value if finite else None, reason)
    return out


def _teacher_forced_row(
    axis: str, values: TeacherForcedValues, prompt: PromptSamples, vid: str, seed: int
) -> dict[str, Any]:
    k_b = len(prompt.base.answers)
    key = (prompt.model, prompt.dataset, prompt.prompt_id)
    under_variant = values.get((*key, vid), {})
    under_base = values.get((*key, BASE_VARIANT_ID), {})
    for side, found in (("variant", under_variant), ("base", under_base)):
        for j in range(k_b):
            value, reason = found.get(j, (None, NOT_MEASURED))
            if value is None:
                return _missing(f"base sample {j} under the {side} prompt: {reason}", k_b, k_b)
    variant_values = [under_variant[j][0] for j in range(k_b)]
    base_values = [under_base[j][0] for j in range(k_b)]
    delta = teacher_forced_delta(variant_values, base_values)
    if delta.value is None:
        return _missing(delta.missing_reason or NOT_MEASURED, k_b, k_b)
    differences = np.array(variant_values, dtype=np.float64) - np.array(base_values)
    return {
        "k_variant": k_b,
        "k_base": k_b,
        "mean_variant": delta.mean_variant_prompt,
        "mean_base": delta.mean_base_prompt,
        "excess": delta.value / SCALES[axis],
        **_test_fields(sign_flip_test(differences, seed)),
    }


def _verdicts(samples: TextSamples, references: Sequence[str]) -> list[bool | None]:
    return [is_correct(a, references) for a in samples.answers]


def _flip_fields(
    prompt: PromptSamples, vid: str, references: Sequence[str] | None, no_references: str
) -> dict[str, Any]:
    variant, family = prompt.variants[vid], prompt.rows[vid]["family"]
    reason = None
    if not references:
        reason = no_references
    elif family == LANGUAGE_FAMILY:
        reason = NOT_GRADED
    else:
        reason = variant.gap("variant") or prompt.base.gap("base")
    if reason:
        return {"flip_missing_reason": reason}
    assert references is not None
    base_correct = _verdicts(prompt.base, references)
    variant_correct = _verdicts(variant, references)
    flips = flip_excess(base_correct, variant_correct)
    if flips.missing_reason:
        return {"flip_missing_reason": flips.missing_reason}
    return {
        "share_right_variant": float(np.mean([bool(v) for v in variant_correct])),
        "share_right_base": float(np.mean([bool(v) for v in base_correct])),
        "flip_right_to_wrong": flips.right_to_wrong,
        "flip_wrong_to_right": flips.wrong_to_right,
        "self_flip": flips.self_right_to_wrong,
        "flip_right_to_wrong_excess": flips.right_to_wrong_excess,
        "flip_wrong_to_right_excess": flips.wrong_to_right_excess,
    }


def _spread_fields(
    bert: TextDistances,
    prompt: PromptSamples,
    vid: str,
    cross_language: CrossLanguage,
    threshold: float,
) -> dict[str, Any]:
    variant, family = prompt.variants[vid], prompt.rows[vid]["family"]
    reason = (
        variant.gap("variant")
        or prompt.base.gap("base")
        or _cross_language("bert", family, cross_language)
    )
    if reason:
        return {"spread_missing_reason": reason}
    spread = compare_spread(
        1.0 - bert.square(prompt.base.texts()), 1.0 - bert.square(variant.texts()), threshold
    )
    return {
        "clusters_base": spread.base.clusters,
        "clusters_variant": spread.variant.clusters,
        "entropy_base": spread.base.entropy,
        "entropy_variant": spread.variant.entropy,
    }


def _references(prompts: pl.DataFrame) -> dict[tuple[str, str], tuple[list[str], str]]:
    out = {}
    for row in prompts.iter_rows(named=True):
        reason = row.get("reference_missing_reason") or "no reference answers"
        out[(row["dataset"], row["prompt_id"])] = (list(row["references"] or []), reason)
    return out


def sampling_tests(
    samples: pl.DataFrame,
    sample_analysis: pl.DataFrame,
    prompts: pl.DataFrame,
    bleu: Similarity,
    bert_f1: Similarity,
    cross_language: CrossLanguage | None = None,
    judged_families: frozenset[str] = frozenset(),
    spread_threshold: float = DEFAULT_THRESHOLD,
) -> pl.DataFrame:
    """The table of one model's samples (or several models'). ``bleu`` and ``bert_f1``:
    (hypotheses, references) -> similarities (BLEU 0..100, F1 0..1), each called once on
    all the pairs they are needed for; ``cross_language``: per text axis, why a language
    variant's answers cannot be compared with its base's (``axes/text_similarity.py``
    says: BLEU never, BERTScore not with an English-only encoder; the semantic spread
    follows BERTScore), absent or None when they can; ``judged_families``: families
    whose mirroring verdicts come from the LLM judge in this run."""
    cross_language = cross_language or {}
    grouped = group_samples(samples)
    texts = _text_distances(bleu, bert_f1)
    _collect(grouped, texts, cross_language)
    forced = {axis: _teacher_forced(sample_analysis, c) for axis, c in TEACHER_FORCED.items()}
    references = _references(prompts)
    rows: list[dict[str, Any]] = []
    for prompt in grouped:
        refs, no_refs = references.get((prompt.dataset, prompt.prompt_id), ([], "no prompt row"))
        for vid, variant in prompt.variants.items():
            row = prompt.rows[vid]
            common = {
                "model": prompt.model,
                "dataset": prompt.dataset,
                "prompt_id": prompt.prompt_id,
                "variant_id": vid,
                **{c: row[c] for c in VARIANT_COLUMNS},
                **_flip_fields(prompt, vid, refs, no_refs),
                **_spread_fields(texts["bert"], prompt, vid, cross_language, spread_threshold),
            }
            for axis in SAMPLED_AXES:
                seed = stable_seed(prompt.model, prompt.dataset, prompt.prompt_id, vid, axis)
                if axis in TEXT_AXES:
                    fields = _text_row(
                        axis,
                        texts[axis],
                        variant,
                        prompt.base,
                        row["family"],
                        cross_language,
                        seed,
                    )
                elif axis in TEACHER_FORCED:
                    fields = _teacher_forced_row(axis, forced[axis], prompt, vid, seed)
                else:
                    judged = row["family"] in judged_families
                    fields = _mirroring_row(row, variant, prompt.base, judged, seed)
                rows.append({**common, "axis": axis, **fields})
    key = ["model", "dataset", "prompt_id", "variant_id", "axis"]
    return from_rows(rows, SAMPLING_TESTS).sort(key)
