"""Where each dataset's reference (gold) answers come from, or why it has none.

Correctness and flip rates are judged against reference answers
(``sago_core.statistics.correctness``); a reference must be a gold answer, never another
model's output. ``reference_origins`` answers, per entry of a run's ``datasets``, which
column its references are read from (the reader's own choice, or the gold column the user
named with ``#answer=COLUMN``), or that it has none and why. The dry-run plan prints
``reference_lines``.

Per language: a ``language`` variant's answer is judged against the gold answers
in its own language, which only its parallel file carries (MKQA gives each question's
answers in every language). prompts.parquet records each prompt's file and row
(``source``); ``language_references`` reads each such file once more, in the languages the
run's variants were asked in, and answers per (dataset, prompt_id, language) with the
references in that language, or why there are none (the reader's words: "MKQA marks this
question unanswerable in de"; or the file can no longer be read). The base prompt keeps its
own (English) references from prompts.parquet.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import polars as pl

from sago_core.config import BUILTIN_DATASET, parallel_entry
from sago_core.data.datasets import SOURCES, DatasetSource, find_dataset_file
from sago_core.data.mkqa import read_parallel
from sago_core.data.prompt import split_source
from sago_core.data.records import Record, read_records
from sago_core.data.safety import is_multijail
from sago_core.data.user_files import detect_layout, keeps_layout, parse_entry, parse_named
from sago_core.errors import ConfigError, InputError

BUILTIN_REFERENCES = (
    "answers written by this project (sago_core/data/builtin.py); its open-ended prompts have none"
)
# A parallel file's references: the base prompt's in English, each language variant's in its
# own language (``language_references``).
PARALLEL_REFERENCES = {
    "mkqa": "MKQA's answers (texts and aliases) in each language: answers.en for the base "
    "prompts, answers.<lang> for each language variant; questions it marks unanswerable or "
    "answers only with a long passage have none",
    "parallel": "column answer for the base prompts, answer_<lang> for each language variant, "
    "where the file has them",
}
GENERIC_NONE = (
    "the file has no 'answers' or 'answer' column and none is mapped: correctness is not "
    "judged (map one with '#answer=COLUMN')"
)


@dataclass(frozen=True)
class ReferenceOrigin:
    dataset: str  # the ``datasets`` entry as given
    column: str | None  # where the references come from; None: there are none
    reason: str | None = None  # why there are none (column None)

    def describe(self) -> str:
        if self.column is None:
            return f"{self.dataset}: no reference answers ({self.reason})"
        return f"{self.dataset}: references from {self.column}"


def _from_layout(entry: str, source: DatasetSource, first: Record | None) -> ReferenceOrigin:
    if source.no_references is not None:
        return ReferenceOrigin(entry, None, source.no_references)
    if first is None:
        return ReferenceOrigin(entry, None, "the file holds no rows")
    column = source.reference_columns(first)
    label = f"column(s) {column} ({source.name} layout)"
    return ReferenceOrigin(entry, label if column else None, None if column else "none")


def _first(path: Path) -> Record | None:
    records = read_records(path)
    return records[0] if records else None


def reference_origin(
    entry: str, data_dir: Path | None, question_column: str = "question"
) -> ReferenceOrigin:
    """One ``datasets`` entry (a known name, ``builtin``, or a file with its mapping)."""
    if entry == BUILTIN_DATASET:
        return ReferenceOrigin(entry, BUILTIN_REFERENCES)
    parallel = parallel_entry(entry)
    if parallel is not None:
        return ReferenceOrigin(entry, PARALLEL_REFERENCES[parallel[0]])
    file = parse_entry(entry)
    if file is None:
        name, gold = parse_named(entry)
        if name not in SOURCES:
            raise ConfigError(f"unknown dataset {name!r}")
        if gold is not None:
            return ReferenceOrigin(entry, f"column {gold} (named by the user as gold)")
        source = SOURCES[name]
        if source.no_references is None and data_dir is None:
            return ReferenceOrigin(entry, f"the {name} reader's answer column(s) (no data_dir)")
        first = None if data_dir is None else _first(find_dataset_file(source, data_dir))
        return _from_layout(entry, source, first)
    gold = file.column("answer")
    if gold is not None:
        return ReferenceOrigin(entry, f"column {gold} (named by the user as gold)")
    if not file.path.is_file():
        raise InputError("does not exist", file=str(file.path))
    records = read_records(file.path)
    layout = (
        detect_layout(records) if keeps_layout(file) and question_column == "question" else None
    )
    if layout is not None:
        return _from_layout(entry, layout, records[0])
    present = set().union(*(r.keys() for r in records[:50])) if records else set()
    for column in ("answers", "answer"):
        if column in present:
            return ReferenceOrigin(entry, f"column {column}")
    return ReferenceOrigin(entry, None, GENERIC_NONE)


def reference_origins(
    datasets: tuple[str, ...], data_dir: Path | None, question_column: str = "question"
) -> list[ReferenceOrigin]:
    """Per ``datasets`` entry, in order: where its references come from (module doc)."""
    return [reference_origin(entry, data_dir, question_column) for entry in datasets]


def reference_lines(
    datasets: tuple[str, ...], data_dir: Path | None, question_column: str = "question"
) -> list[str]:
    """The plan's block: a heading, then one line per dataset."""
    origins = reference_origins(datasets, data_dir, question_column)
    return ["Reference answers (correctness, flip rates):", *(f"  {o.describe()}" for o in origins)]


LANGUAGE_REFERENCES: dict[str, pl.DataType | type[pl.DataType]] = {
    "dataset": pl.String,
    "prompt_id": pl.String,
    "language": pl.String,
    "references": pl.List(pl.String),
    "reference_missing_reason": pl.String,  # why there are none in that language
}
NO_PARALLEL_SOURCE = (
    "no references in the variant's language: the prompt's dataset carries no translations "
    "(only a parallel file, mkqa:PATH or parallel:PATH, has answers per language)"
)
UNREADABLE_PARALLEL = "its parallel file can no longer be read for references in {lang} ({error})"
NOT_IN_PARALLEL = "its parallel file holds no question {prompt_id} in {lang}"
# (a file not in a parallel layout: NO_PARALLEL_SOURCE)


def parallel_layout(records: list[Record]) -> str | None:
    """``mkqa`` when the first record holds a ``queries`` mapping, ``parallel`` when it has
    a ``question_<lang>`` column or is in MultiJail's layout, else None (not a parallel
    file): ``read_parallel``'s layouts."""
    first = records[0] if records else {}
    if isinstance(first.get("queries"), dict):
        return "mkqa"
    if is_multijail(records):
        return "parallel"
    return "parallel" if any(str(k).startswith("question_") for k in first) else None


def _file_references(
    file: str, wanted: list[tuple[str, str, str]]
) -> list[tuple[str, str, str, list[str], str | None]]:
    """References in each (dataset, prompt_id, language) of ``wanted`` from one file."""
    path = Path(file)
    try:
        records = read_records(path)
        layout = parallel_layout(records)
        questions = None if layout is None else read_parallel(layout, path)
    except (InputError, OSError) as exc:
        return [
            (d, p, lang, [], UNREADABLE_PARALLEL.format(lang=lang, error=exc))
            for d, p, lang in wanted
        ]
    if questions is None:
        return [(d, p, lang, [], NO_PARALLEL_SOURCE) for d, p, lang in wanted]
    found = {(q.prompt.prompt_id, q.language): q.prompt for q in questions.questions}
    gaps = {(m.prompt_id, m.language): m.reason for m in questions.missing}
    out: list[tuple[str, str, str, list[str], str | None]] = []
    for dataset, prompt_id, language in wanted:
        prompt = found.get((prompt_id, language))
        if prompt is None:
            why = gaps.get((prompt_id, language))
            reason = why or NOT_IN_PARALLEL.format(prompt_id=prompt_id, lang=language)
            out.append((dataset, prompt_id, language, [], reason))
        else:
            refs = list(prompt.references)
            out.append((dataset, prompt_id, language, refs, None if refs else prompt.no_references))
    return out


def language_references(prompts: pl.DataFrame, asked: pl.DataFrame) -> pl.DataFrame:
    """Per row of ``asked`` (``dataset``, ``prompt_id``, ``language``: the run's language
    variants), the gold answers in that language from the prompt's parallel file (module
    doc); ``LANGUAGE_REFERENCES`` columns, one row per distinct asked row."""
    wanted = asked.select("dataset", "prompt_id", "language").unique().sort(pl.all())
    sources = prompts.select("dataset", "prompt_id", "source").unique(
        ["dataset", "prompt_id"], keep="first"
    )
    by_file: dict[str, list[tuple[str, str, str]]] = {}
    rows: list[tuple[str, str, str, list[str], str | None]] = []
    for dataset, prompt_id, language, source in wanted.join(
        sources, on=["dataset", "prompt_id"], how="left"
    ).iter_rows():
        file, row = split_source(source or "")
        if not file or row is None:
            rows.append((dataset, prompt_id, language, [], NO_PARALLEL_SOURCE))
        else:
            by_file.setdefault(file, []).append((dataset, prompt_id, language))
    for file, keys in by_file.items():
        rows.extend(_file_references(file, keys))
    return pl.DataFrame(rows, schema=LANGUAGE_REFERENCES, orient="row")
