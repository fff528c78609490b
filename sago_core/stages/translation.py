"""Stage: machine-translated and round-trip variants from a translator model.

The same tool mechanism as the structural rewriter (``stages/tool_answers.py``): any backend,
API models included, greedy (T = 0), every answer cached by (translator identity,
instruction version, source and target language, token budget, text), so a rerun or
another run over the same prompts reproduces the translations without calling the model.
Two passes, each cached as soon as it returns (an API budget that runs out in the second
pass keeps the first): every prompt into every language, then every usable translation
back into English. The back-translation is both the round-trip variant and the
translation's back check: its BERTScore-F1 against the base prompt (the semantic filter's
scorer and threshold) must pass for the translation to be kept.

Every candidate is recorded, kept or not, with its reason; the artifact carries the
variant columns plus what the translator did (``TRANSLATED_CANDIDATES``): its identity, the
translation and the back-translation.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import polars as pl

from sago_core.artifacts.json_cache import JsonCache
from sago_core.artifacts.schemas import VARIANTS, Schema, conform
from sago_core.axes.language_id import identify_language
from sago_core.backends.protocol import Backend
from sago_core.config import TranslationSettings
from sago_core.data.prompt import split_source
from sago_core.stages.generation import Origin
from sago_core.stages.tool_answers import ToolAnswer, ToolRequest, ask_tool
from sago_core.variants.seeding import variant_seed
from sago_core.variants.translation import (
    INSTRUCTION_VERSION,
    ROUND_TRIP_FAMILY,
    TRANSLATION_STRENGTH,
    TranslationTask,
    check_translation,
    clean_translation,
    mt_subtype,
    round_trip_variant_id,
    translated_variant_id,
)
from sago_core.vocabulary import BASE_LANGUAGE, LANGUAGE_FAMILY

F1Fn = Callable[[Sequence[str], Sequence[str]], list[float]]
# The variant candidates' columns, then what the translator did.
TRANSLATED_CANDIDATES: Schema = {
    **VARIANTS,
    "translator": pl.String,  # the translator's identity (``behaviour_key``)
    "translation": pl.String,  # the prompt in the target language
    "back_translation": pl.String,  # that translation translated back into English
}


@dataclass(frozen=True)
class BackCheck:
    """The semantic filter's scorer and threshold, applied to back-translations."""

    f1: F1Fn
    threshold: float


@dataclass(frozen=True)
class Translated:
    """One (prompt, language): the translation and its back-translation, each with the
    reason it is unusable (None: usable; a back-translation not asked for is None/None)."""

    translation: str
    translation_reason: str | None
    back: str | None = None
    back_reason: str | None = None
    score: float | None = None


def translation_key(translator_identity: str, task: TranslationTask, max_new_tokens: int) -> str:
    """The cache key of one translation: who translated, the instruction's version, the
    languages, the token budget and the text."""
    return JsonCache.key(
        translator_identity,
        INSTRUCTION_VERSION,
        f"{task.source}->{task.target}",
        f"max_new_tokens={max_new_tokens}",
        task.text,
    )


def needs_back_translation(settings: TranslationSettings) -> bool:
    return settings.round_trip or settings.back_check


def forward_tasks(prompt: str, settings: TranslationSettings) -> list[TranslationTask]:
    return [TranslationTask(BASE_LANGUAGE, code, prompt) for code in settings.languages]


def language_reason(text: str, code: str, what: str = "translation") -> str | None:
    """A text py3langid reads as another language than ``code`` (too short to tell: no
    reason)."""
    found = identify_language(text, code)
    if found.matches == 0:
        return f"{what} is in {found.detected}, not {code} (py3langid)"
    return None


def _ask(
    backend: Backend,
    identity: str,
    cache: JsonCache,
    settings: TranslationSettings,
    jobs: list[tuple[TranslationTask, Origin]],
    check: Callable[[TranslationTask, str], str | None],
) -> list[ToolAnswer]:
    """One translator pass over ``jobs`` through the cache."""
    max_new = settings.max_new_tokens
    tasks = [task for task, _ in jobs]
    return ask_tool(
        lambda: backend,
        [
            ToolRequest(task.instruction, translation_key(identity, task, max_new), origin)
            for task, origin in jobs
        ],
        cache,
        max_new,
        settings.batch_size,
        clean=lambda i, raw: clean_translation(raw, tasks[i].text),
        check=lambda i, text: check(tasks[i], text),
        entry=lambda i, text: {
            "text": text,
            "translator": identity,
            "source": tasks[i].source,
            "target": tasks[i].target,
        },
        whole=True,
    )


def _forward_check(task: TranslationTask, text: str) -> str | None:
    return check_translation(task.text, text) or language_reason(text, task.target)


def _back_check(task: TranslationTask, text: str) -> str | None:
    """A round trip must come home in English (it keeps every English axis)."""
    return check_translation(task.text, text) or language_reason(text, task.target, "text")


def _origin(row: dict, what: str) -> Origin:
    file, line = split_source(row["source"] or row["dataset"])
    return file, line, f"prompt {row['prompt_id']} ({what})"


def translate_all(
    prompts: pl.DataFrame,
    settings: TranslationSettings,
    backend: Backend,
    translator_identity: str,
    cache: JsonCache,
    check: BackCheck | None,
) -> dict[tuple[int, str], Translated]:
    """Per (prompt row, language): the translation, its back-translation and the
    back-translation's semantic score against the base prompt."""
    if check is None and needs_back_translation(settings):
        raise ValueError("back-translations need the semantic filter's scorer (BackCheck)")
    rows = list(prompts.iter_rows(named=True))
    jobs = [(i, t) for i, row in enumerate(rows) for t in forward_tasks(row["prompt"], settings)]
    forward = _ask(
        backend,
        translator_identity,
        cache,
        settings,
        [(t, _origin(rows[i], f"translation into {t.target}")) for i, t in jobs],
        _forward_check,
    )
    done = {
        (i, t.target): Translated(a.text, a.reason) for (i, t), a in zip(jobs, forward, strict=True)
    }
    if check is None or not needs_back_translation(settings):
        return done
    back_jobs = [(key, d) for key, d in done.items() if d.translation_reason is None]
    back = _ask(
        backend,
        translator_identity,
        cache,
        settings,
        [
            (
                TranslationTask(key[1], BASE_LANGUAGE, d.translation),
                _origin(rows[key[0]], f"back-translation from {key[1]}"),
            )
            for key, d in back_jobs
        ],
        _back_check,
    )
    scored = [(key, a.text) for (key, _), a in zip(back_jobs, back, strict=True) if not a.reason]
    scores = (
        check.f1([text for _, text in scored], [rows[key[0]]["prompt"] for key, _ in scored])
        if scored
        else []
    )
    score_of = {key: s for (key, _), s in zip(scored, scores, strict=True)}
    for (key, d), a in zip(back_jobs, back, strict=True):
        reason = None if a.reason is None else f"back-translation: {a.reason}"
        done[key] = Translated(d.translation, None, a.text, reason, score_of.get(key))
    return done


def _semantic_reason(score: float | None, threshold: float) -> str | None:
    """The semantic filter's words for a score at or below its threshold."""
    if score is not None and score <= threshold:
        return f"semantic score {round(score, 4)} <= threshold {threshold}"
    return None


def _translated_record(d: Translated, settings: TranslationSettings, threshold: float) -> dict:
    reason = d.translation_reason
    if reason is None and settings.back_check:
        semantic = _semantic_reason(d.score, threshold)
        reason = d.back_reason or (f"back-translation {semantic}" if semantic else None)
    return {
        "text": d.translation,
        "semantic_score": d.score if settings.back_check else None,
        "kept": reason is None,
        "reject_reason": reason,
    }


def _round_trip_record(d: Translated, prompt: str, code: str, threshold: float) -> dict:
    if d.translation_reason is not None:
        reason: str | None = (
            f"no translation into {code} to translate back ({d.translation_reason})"
        )
    elif d.back is not None and d.back_reason is None and d.back.strip() == prompt.strip():
        reason = "round trip returned the prompt unchanged (the replay measures that)"
    else:
        reason = d.back_reason or _semantic_reason(d.score, threshold)
    return {
        "text": d.back or "",
        "semantic_score": d.score,
        "kept": reason is None,
        "reject_reason": reason,
    }


def translate_prompts(
    prompts: pl.DataFrame,
    settings: TranslationSettings,
    backend: Backend,
    translator_identity: str,
    cache: JsonCache,
    seed: int,
    check: BackCheck | None,
) -> pl.DataFrame:
    """The translated (``language``, ``mt:xx``) and round-trip (``round_trip``, ``xx``)
    candidates of every prompt, kept or not, in ``TRANSLATED_CANDIDATES``' columns.
    ``check`` is required when back-translations are asked for (round trips or the back
    check)."""
    done = translate_all(prompts, settings, backend, translator_identity, cache, check)
    threshold = check.threshold if check is not None else 0.0
    records = []
    for i, row in enumerate(prompts.iter_rows(named=True)):
        for code in settings.languages:
            d = done[(i, code)]
            variants = [
                (
                    LANGUAGE_FAMILY,
                    mt_subtype(code),
                    translated_variant_id(code),
                    _translated_record(d, settings, threshold),
                ),
            ]
            if settings.round_trip:
                variants.append(
                    (
                        ROUND_TRIP_FAMILY,
                        code,
                        round_trip_variant_id(code),
                        _round_trip_record(d, row["prompt"], code, threshold),
                    )
                )
            for family, subtype, vid, verdict in variants:
                records.append(
                    {
                        "dataset": row["dataset"],
                        "prompt_id": row["prompt_id"],
                        "variant_id": vid,
                        "family": family,
                        "subtype": subtype,
                        "strength": float(TRANSLATION_STRENGTH),
                        "position": "global",
                        "seed": variant_seed(seed, row["dataset"], row["prompt_id"], vid),
                        "word_ratio": None,
                        **verdict,
                        "translator": translator_identity,
                        "translation": d.translation,
                        "back_translation": d.back,
                    }
                )
    frame = pl.DataFrame(records, schema=TRANSLATED_CANDIDATES)
    return conform(frame, TRANSLATED_CANDIDATES).sort(["dataset", "prompt_id", "variant_id"])
