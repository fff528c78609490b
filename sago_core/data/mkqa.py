"""Parallel questions: one question asked in several languages, from the data's own translations.

Two layouts (the ``language`` family's parallel data):

- **MKQA** (``read_mkqa``): one JSON record per question, ``queries: {lang: text}`` and
  ``answers: {lang: [{type, text, aliases, ...}]}``, 26 languages (codes as MKQA writes
  them: ``en``, ``de``, ``ja``, ``zh_cn``, ...). MKQA translates Natural Questions, so its
  English queries pair with ``nq_open``.
- **One column per language** (``read_language_columns``): ``question`` holds the base
  language's text (English unless told otherwise), ``question_de``, ``question_ja``, ...
  the others; ``answer`` / ``answer_de`` ... their gold answers, where there are any.
- **MultiJail** (``data/safety.read_multijail``): ``id``, ``source``, ``tags``, then one
  column per language named by its code (``en``, ``zh``, ``it``, ...); a ``parallel:PATH``
  file in this layout is read so, every question harmful and without gold answers.

A question keeps one ``prompt_id`` in every language, so a language variant pairs with its
base by a join. A language the file does not carry at all is refused, naming the codes it
does carry; a row without text in one language loses only that language, which is
reported (``ParallelQuestions.missing``) with its reason. References: MKQA's answer texts
and aliases in that language; a question MKQA marks unanswerable, or answers only with a
long passage, has none, and says so (``Prompt.no_references``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from sago_core.data.parallel_questions import (
    LanguageQuestion,
    MissingLanguage,
    ParallelQuestions,
    check_languages,
)
from sago_core.data.prompt import Prompt, content_id, source_of
from sago_core.data.records import Record, read_records, text_list
from sago_core.data.safety import is_multijail, read_multijail
from sago_core.errors import InputError

MKQA_NO_SHORT_ANSWER = {
    "unanswerable": "MKQA marks this question unanswerable in {lang}",
    "long_answer": "MKQA answers this question in {lang} only with a long passage (no short gold "
    "answer)",
}
NO_ANSWERS = "the file gives this question no answers in {lang}"
NO_ANSWER_COLUMN = "the file has no answer column for {lang} ({column})"


@dataclass(frozen=True)
class _Row:
    number: int
    prompt_id: str
    texts: Mapping[str, Any]  # language -> its text (or what the file holds instead)
    references: Mapping[str, tuple[tuple[str, ...], str | None]]  # -> (texts, reason if none)


def _question(row: _Row, language: str, path: Path, column: str) -> LanguageQuestion | str:
    """The row's question in ``language``, or why it has none."""
    value = row.texts.get(language)
    if value is None:
        return f"the row has no question in {language}"
    if not isinstance(value, str):
        raise InputError(
            f"must be text, got {type(value).__name__}",
            file=str(path),
            row=row.number,
            column=column,
        )
    if not value.strip():
        return f"the row's question in {language} is empty"
    refs, reason = row.references.get(language, ((), NO_ANSWERS.format(lang=language)))
    prompt = Prompt(
        path.stem,
        row.prompt_id,
        value.strip(),
        refs,
        source=source_of(str(path), row.number),
        no_references=None if refs else reason,
    )
    return LanguageQuestion(language, prompt)


def _collect(
    rows: list[_Row],
    carried: Iterable[str],
    languages: Sequence[str] | None,
    path: Path,
    column_of: Callable[[str], str],
) -> ParallelQuestions:
    codes = tuple(sorted(set(carried)))
    asked = check_languages(languages, codes, file=path) if languages is not None else codes
    questions: list[LanguageQuestion] = []
    missing: list[MissingLanguage] = []
    for row in rows:
        for language in asked:
            got = _question(row, language, path, column_of(language))
            if isinstance(got, str):
                source = source_of(str(path), row.number)
                missing.append(MissingLanguage(row.prompt_id, language, got, source))
            else:
                questions.append(got)
    return ParallelQuestions(codes, asked, tuple(questions), tuple(missing))


def _mapping(rec: Record, key: str, path: Path, row: int) -> Mapping[str, Any]:
    value = rec.get(key)
    if not isinstance(value, dict):
        found = "missing" if value is None else f"a {type(value).__name__}"
        raise InputError(
            f"must be a mapping of language code to text (MKQA layout), got {found}",
            file=str(path),
            row=row,
            column=key,
        )
    return value


def _mkqa_references(answers: Any) -> tuple[tuple[str, ...], str | None]:
    """MKQA answers in one language: (texts and aliases, why there are none)."""
    if not isinstance(answers, list) or not answers:
        return (), None
    refs: list[str] = []
    kinds: list[str] = []
    for answer in answers:
        if not isinstance(answer, dict):
            continue
        kinds.append(str(answer.get("type")))
        refs += text_list(answer.get("text")) + text_list(answer.get("aliases"))
    if refs:
        return tuple(dict.fromkeys(refs)), None
    known = [MKQA_NO_SHORT_ANSWER[k] for k in kinds if k in MKQA_NO_SHORT_ANSWER]
    return (), known[0] if known else None


def read_mkqa(path: Path, languages: Sequence[str] | None = None) -> ParallelQuestions:
    """The MKQA file's questions in ``languages`` (None: every language it carries)."""
    records = read_records(path)
    rows: list[_Row] = []
    carried: set[str] = set()
    for number, rec in enumerate(records, start=1):
        queries = _mapping(rec, "queries", path, number)
        raw_answers = rec.get("answers")
        answers = raw_answers if isinstance(raw_answers, dict) else {}
        carried |= set(queries)
        native = rec.get("example_id")
        english = queries.get("en") or rec.get("query") or ""
        pid = f"mkqa-{native}" if native not in (None, "") else content_id("mkqa", str(english))
        references: dict[str, tuple[tuple[str, ...], str | None]] = {}
        for language in queries:
            refs, reason = _mkqa_references(answers.get(language))
            fallback = NO_ANSWERS if reason is None else reason
            references[language] = (refs, fallback.format(lang=language))
        rows.append(_Row(number, pid, queries, references))
    return _collect(rows, carried, languages, path, lambda lang: f"queries.{lang}")


def _language_of(column: str, prefix: str, base: str) -> str | None:
    """``question`` -> the base language, ``question_zh_cn`` -> ``zh_cn``, else None."""
    if column == prefix:
        return base
    code = column.removeprefix(f"{prefix}_")
    return code if code != column and code else None


def read_language_columns(
    path: Path,
    languages: Sequence[str] | None = None,
    *,
    base_language: str = "en",
    question: str = "question",
    answer: str = "answer",
    id_column: str = "id",
) -> ParallelQuestions:
    """A user file with one question column per language: ``question`` (``base_language``),
    ``question_de``, ``question_ja``, ...; answers in ``answer``, ``answer_de``, ... An
    ``id`` column names each question; without one, its base-language text does."""
    records = read_records(path)
    columns = set().union(*(r.keys() for r in records)) if records else set()
    column_of: dict[str, str] = {}
    for column in sorted(columns):
        language = _language_of(str(column), question, base_language)
        if language is not None:
            column_of[language] = str(column)
    if not column_of:
        raise InputError(
            f"no question column ({question!r}, {question + '_<lang>'!r}; columns present: "
            f"{sorted(columns)})",
            file=str(path),
        )
    rows: list[_Row] = []
    for number, rec in enumerate(records, start=1):
        texts = {lang: rec.get(column) for lang, column in column_of.items()}
        native = rec.get(id_column)
        first = next((t for _, t in sorted(texts.items()) if isinstance(t, str) and t.strip()), "")
        anchor = texts.get(base_language) or first
        pid = str(native) if native not in (None, "") else content_id(path.stem, str(anchor))
        references: dict[str, tuple[tuple[str, ...], str | None]] = {}
        for language in column_of:
            key = answer if language == base_language else f"{answer}_{language}"
            if key not in columns:
                references[language] = ((), NO_ANSWER_COLUMN.format(lang=language, column=key))
            else:
                references[language] = (text_list(rec.get(key)), NO_ANSWERS.format(lang=language))
        rows.append(_Row(number, pid, texts, references))
    return _collect(rows, column_of, languages, path, column_of.__getitem__)


def read_parallel(
    layout: str, path: Path, languages: Sequence[str] | None = None
) -> ParallelQuestions:
    """A parallel file in its layout (``config.PARALLEL_LAYOUTS``: ``mkqa`` or ``parallel``,
    one column per language), refused if it does not exist."""
    if not path.is_file():
        raise InputError("does not exist", file=str(path))
    if layout == "mkqa":
        return read_mkqa(path, languages)
    if layout == "parallel":
        if is_multijail(read_records(path)):
            return read_multijail(path, languages)
        return read_language_columns(path, languages)
    raise InputError(f"unknown parallel layout {layout!r} (mkqa or parallel)", file=str(path))
