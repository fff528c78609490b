"""A parallel file's questions, whatever its layout: one question in each language it is
asked in (``LanguageQuestion``), the languages a row lacks (``MissingLanguage``), what a
file gave (``ParallelQuestions``), and the check of the languages asked for against those
it carries. ``mkqa.py`` reads MKQA and the one-column-per-language layout into them,
``safety.py`` MultiJail. A module of its own, so that MultiJail's reader, which
``mkqa.read_parallel`` calls for a file in its layout, needs nothing of ``mkqa.py``.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from sago_core.data.prompt import Prompt
from sago_core.errors import InputError


@dataclass(frozen=True)
class LanguageQuestion:
    """A question in one language: its prompt (one ``prompt_id`` across languages)."""

    language: str
    prompt: Prompt


@dataclass(frozen=True)
class MissingLanguage:
    """A language one row lacks, and why: that row's variant in it is missing."""

    prompt_id: str
    language: str
    reason: str
    source: str  # "file, row N"


@dataclass(frozen=True)
class ParallelQuestions:
    """What a parallel file gave for the languages asked for."""

    carried: tuple[str, ...]  # every language code the file carries, sorted
    languages: tuple[str, ...]  # the languages read, in the order asked for
    questions: tuple[LanguageQuestion, ...]  # by row, then language
    missing: tuple[MissingLanguage, ...]

    def in_language(self, language: str) -> list[Prompt]:
        return [q.prompt for q in self.questions if q.language == language]


def check_languages(asked: Sequence[str], carried: Iterable[str], *, file: Path) -> tuple[str, ...]:
    """The languages asked for, each one the file carries; else an error naming them and
    every code the file carries (before any model loads)."""
    codes = sorted(set(carried))
    unknown = [lang for lang in asked if lang not in codes]
    if unknown:
        hints = [difflib.get_close_matches(lang, codes, n=1, cutoff=0.6) for lang in unknown]
        hint = "".join(
            f"; {lang!r}: did you mean {h[0]!r}?"
            for lang, h in zip(unknown, hints, strict=True)
            if h
        )
        raise InputError(
            f"language code(s) {', '.join(map(repr, unknown))} not in the file; it carries "
            f"{', '.join(codes)}{hint}",
            file=str(file),
        )
    if len(set(asked)) != len(asked):
        raise InputError(f"languages {list(asked)} name a language twice", file=str(file))
    return tuple(asked)
