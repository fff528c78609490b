"""Safety and refusal datasets: each prompt's kind, and the usual sets' own layouts.

A refusal evaluation asks two different questions, so every prompt says which it serves
(its ``kind``, ``Prompt.kind``): ``harmful``, a request the model should refuse (answering
it after a rewording is a *breach*), or ``harmless``, one that only looks harmful (XSTest's
"How do I kill a Python process?"; refusing it after a rewording is an *over-refusal*).

A user file names its kind column in its ``datasets`` entry (``file.csv#kind=label``;
``KIND_VALUES`` says which cell values mean what). HarmBench, StrongREJECT, XSTest and
MultiJail are read with their own columns (docs/guide/refusal.md, "Datasets", gives each
layout's prompt, kind and category); ``read_multijail`` gives MultiJail's questions per
language (``ParallelQuestions``, as ``mkqa.py`` does for MKQA). A run that measures refusal
needs every prompt's kind: the refusal stage refuses a prompt without one
(``refusal/verdicts.py``), naming the ``#kind=COLUMN`` remedy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

import polars as pl

from sago_core.data.parallel_questions import (
    LanguageQuestion,
    MissingLanguage,
    ParallelQuestions,
    check_languages,
)
from sago_core.data.prompt import Prompt, content_id, source_of
from sago_core.data.records import Record, read_records, require_text
from sago_core.errors import InputError

HARMFUL = "harmful"
HARMLESS = "harmless"
KINDS: tuple[str, ...] = (HARMFUL, HARMLESS)
# cell values (case-insensitive) a kind column may hold, and the kind each means
KIND_VALUES: dict[str, str] = {
    "harmful": HARMFUL,
    "unsafe": HARMFUL,
    "harmless": HARMLESS,
    "safe": HARMLESS,
    "benign": HARMLESS,
}
NO_GOLD_SAFETY = "a safety dataset: its prompts have no gold answers (refusal is judged instead)"


def parse_kind(value: object, *, file: Path | str, row: int, column: str) -> str:
    """A kind cell's kind, or an error naming file, row, column and the accepted values."""
    text = value.strip().casefold() if isinstance(value, str) else None
    if text in KIND_VALUES:
        return KIND_VALUES[text]
    shown = "empty" if value in (None, "") else repr(value)
    raise InputError(
        f"the prompt kind is {shown}; use one of {', '.join(sorted(KIND_VALUES))}",
        file=str(file),
        row=row,
        column=column,
    )


def with_kinds(
    prompts: list[Prompt], records: list[Record], column: str, path: Path
) -> list[Prompt]:
    """The prompts (one per record, in order) with their kind read from ``column``."""
    if records and all(column not in rec for rec in records[:50]):
        present = sorted(set().union(*(r.keys() for r in records[:50])))
        raise InputError(
            f"the mapping kind={column} names a column the file does not have (columns "
            f"present: {present})",
            file=str(path),
            column=column,
        )
    return [
        replace(prompt, kind=parse_kind(rec.get(column), file=path, row=row, column=column))
        for row, (prompt, rec) in enumerate(zip(prompts, records, strict=True), start=1)
    ]


def with_kinds_columns(frame: pl.DataFrame, prompts: Sequence[Prompt]) -> pl.DataFrame:
    """prompts.parquet's rows (``frame``, one per prompt, in order) with each prompt's
    ``kind`` and ``category`` (``artifacts.schemas.prompts_schema``) when any prompt has a
    kind; unchanged otherwise, so a run without a safety set writes what it always did."""
    if all(p.kind is None for p in prompts):
        return frame
    return frame.with_columns(
        pl.Series("kind", [p.kind for p in prompts], dtype=pl.String),
        pl.Series("category", [p.category for p in prompts], dtype=pl.String),
    )


def _text(rec: Record, column: str, path: Path, row: int) -> str:
    return require_text(rec, column, file=path, row=row)


def _harmbench(rec: Record, path: Path, row: int) -> Prompt:
    behaviour = _text(rec, "Behavior", path, row)
    context = rec.get("ContextString")
    context = context.strip() if isinstance(context, str) else ""
    text = f"{context}\n\n---\n\n{behaviour}" if context else behaviour
    native = str(rec.get("BehaviorID") or "").strip()
    functional = str(rec.get("FunctionalCategory") or "").strip()
    category = str(rec.get("SemanticCategory") or "").strip()
    if functional and functional != "standard":
        category = f"{category} ({functional})" if category else functional
    return Prompt(
        path.stem,
        native or content_id("harmbench", text),
        text,
        no_references=NO_GOLD_SAFETY,
        kind=HARMFUL,
        category=category or None,
    )


def _strongreject(rec: Record, path: Path, row: int) -> Prompt:
    text = _text(rec, "forbidden_prompt", path, row)
    category = str(rec.get("category") or "").strip() or None
    return Prompt(
        path.stem,
        content_id("strongreject", text),
        text,
        no_references=NO_GOLD_SAFETY,
        kind=HARMFUL,
        category=category,
    )


def _xstest(rec: Record, path: Path, row: int) -> Prompt:
    text = _text(rec, "prompt", path, row)
    native = str(rec.get("id") or "").strip()
    return Prompt(
        path.stem,
        f"xstest-{native}" if native else content_id("xstest", text),
        text,
        no_references=NO_GOLD_SAFETY,
        kind=parse_kind(rec.get("label"), file=path, row=row, column="label"),
        category=str(rec.get("type") or "").strip() or None,
    )


@dataclass(frozen=True)
class SafetyLayout:
    name: str
    columns: frozenset[str]  # a record with all of these is in this layout
    to_prompt: Callable[[Record, Path, int], Prompt]


LAYOUTS: tuple[SafetyLayout, ...] = (
    SafetyLayout("harmbench", frozenset({"Behavior", "BehaviorID"}), _harmbench),
    SafetyLayout("strongreject", frozenset({"forbidden_prompt", "category"}), _strongreject),
    SafetyLayout("xstest", frozenset({"prompt", "type", "label"}), _xstest),
)
MULTIJAIL_COLUMNS = frozenset({"id", "source", "tags", "en"})


def detect_safety_layout(records: list[Record]) -> SafetyLayout | None:
    """The safety layout the file's first record has, if any."""
    if not records:
        return None
    keys = records[0].keys()
    return next((layout for layout in LAYOUTS if layout.columns <= keys), None)


def read_safety(layout: SafetyLayout, path: Path, records: list[Record]) -> list[Prompt]:
    """The file's prompts by ``layout``'s reader, each pointing at its row."""
    return [
        replace(layout.to_prompt(rec, path, row), source=source_of(str(path), row))
        for row, rec in enumerate(records, start=1)
    ]


def is_multijail(records: list[Record]) -> bool:
    """Whether the file's first record is in MultiJail's layout (its metadata columns and
    ``en``, no ``question`` column of the generic one-column-per-language layout)."""
    return bool(records) and records[0].keys() >= MULTIJAIL_COLUMNS and "question" not in records[0]


def multijail_languages(records: list[Record]) -> tuple[str, ...]:
    """The language columns of a MultiJail file: every column but its metadata."""
    columns = set().union(*(r.keys() for r in records)) if records else set()
    return tuple(sorted(str(c) for c in columns - {"id", "source", "tags"}))


def read_multijail(path: Path, languages: Sequence[str] | None = None) -> ParallelQuestions:
    """A MultiJail file's questions in ``languages`` (None: every language it carries):
    one ``prompt_id`` (``multijail-<id>``) across languages, all harmful; a row without
    text in a language loses only that language, with its reason."""
    records = read_records(path)
    if records and not records[0].keys() >= MULTIJAIL_COLUMNS:
        missing = sorted(MULTIJAIL_COLUMNS - records[0].keys())
        raise InputError(f"not MultiJail's layout: no column(s) {missing}", file=str(path))
    carried = multijail_languages(records)
    asked = check_languages(languages, carried, file=path) if languages is not None else carried
    questions: list[LanguageQuestion] = []
    missing_rows: list[MissingLanguage] = []
    for row, rec in enumerate(records, start=1):
        native = str(rec.get("id") or "").strip()
        anchor = str(rec.get("en") or "")
        pid = f"multijail-{native}" if native else content_id("multijail", anchor)
        source = source_of(str(path), row)
        for language in asked:
            value = rec.get(language)
            if not isinstance(value, str) or not value.strip():
                reason = f"the row has no question in {language}"
                missing_rows.append(MissingLanguage(pid, language, reason, source))
                continue
            prompt = Prompt(
                path.stem,
                pid,
                value.strip(),
                source=source,
                no_references=NO_GOLD_SAFETY,
                kind=HARMFUL,
                category=str(rec.get("tags") or "").strip() or None,
            )
            questions.append(LanguageQuestion(language, prompt))
    return ParallelQuestions(carried, tuple(asked), tuple(questions), tuple(missing_rows))
