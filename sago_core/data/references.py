"""Where each dataset's reference (gold) answers come from, or why it has none.

Correctness and flip rates are judged against reference answers
(``sago_core.statistics.correctness``); a reference must be a gold answer, never another
model's output. ``reference_origins`` answers, per entry of a run's ``datasets``, which
column its references are read from (the reader's own choice, or the gold column the user
named with ``#answer=COLUMN``), or that it has none and why. The dry-run plan prints
``reference_lines``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sago_core.config import BUILTIN_DATASET, parallel_entry
from sago_core.data.datasets import SOURCES, DatasetSource, find_dataset_file
from sago_core.data.records import Record, read_records
from sago_core.data.user_files import detect_layout, keeps_layout, parse_entry, parse_named
from sago_core.errors import ConfigError, InputError

BUILTIN_REFERENCES = (
    "answers written by this project (sago_core/data/builtin.py); its open-ended prompts have none"
)
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
        return ReferenceOrigin(entry, f"the {parallel[0]} file's answers in each language")
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
