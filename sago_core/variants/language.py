"""The language family: the same question asked in another language, in the
translation its parallel file carries (MKQA, or one column per language).

A language variant is ``language:<code>:100:global`` (subtype = the language code as the
file writes it, ``de``, ``ja``, ``zh_cn``): a whole-prompt change, like the script family's
romanisation. Its text is the file's own human translation of the base question, never a
machine's; a row without text in one language builds no variant in it, and the reason is
reported (``LanguageTexts.missing``: the reader's words, the row it came from).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sago_core.config import LanguageGrid, parallel_entry
from sago_core.data.mkqa import MissingLanguage, read_parallel
from sago_core.vocabulary import LANGUAGE_FAMILY

LANGUAGE_STRENGTH = 100
log = logging.getLogger("sago.variants")

Key = tuple[str, str]  # (dataset, prompt_id)


def language_variant_id(code: str) -> str:
    return f"{LANGUAGE_FAMILY}:{code}:{LANGUAGE_STRENGTH}:global"


@dataclass(frozen=True)
class LanguageTexts:
    """Every question of the grid's parallel files in its languages, by (dataset,
    prompt_id) then language, and the (row, language) pairs the files lack, with reasons."""

    languages: tuple[str, ...]
    texts: Mapping[Key, Mapping[str, str]]
    missing: Mapping[Key, tuple[MissingLanguage, ...]]


def read_language_texts(grid: LanguageGrid) -> LanguageTexts:
    """The translations the grid's parallel files carry (each file read once)."""
    texts: dict[Key, dict[str, str]] = {}
    missing: dict[Key, list[MissingLanguage]] = {}
    for entry in grid.sources:
        found = parallel_entry(entry)
        if found is None:  # the config only derives sources from parallel entries
            raise ValueError(f"{entry!r} is not a parallel datasets entry")
        layout, path = found
        questions = read_parallel(layout, Path(path), grid.languages)
        for question in questions.questions:
            key = (question.prompt.dataset, question.prompt.prompt_id)
            texts.setdefault(key, {})[question.language] = question.prompt.prompt
        for gap in questions.missing:
            missing.setdefault((path.stem, gap.prompt_id), []).append(gap)
    return LanguageTexts(grid.languages, texts, {key: tuple(gaps) for key, gaps in missing.items()})


def report_missing(texts: LanguageTexts, keys: list[Key]) -> list[MissingLanguage]:
    """The missing (prompt, language) pairs among ``keys`` (the run's prompts), logged as
    one warning naming each row and reason."""
    gaps = [gap for key in keys for gap in texts.missing.get(key, ())]
    if gaps:
        shown = "; ".join(f"{g.source} ({g.language}): {g.reason}" for g in gaps[:5])
        more = f"; and {len(gaps) - 5} more" if len(gaps) > 5 else ""
        log.warning("%d language variant(s) missing: %s%s", len(gaps), shown, more)
    return gaps


__all__ = [
    "LanguageTexts",
    "language_variant_id",
    "read_language_texts",
    "report_missing",
]
