"""A user's own data file in ``sago run``: its dataset layout, or a per-file column mapping.

``--datasets 'a.csv#question=Question,b.jsonl#question=instruction'`` (or the same entries
in the config's ``datasets``) maps the columns of each file on its own: ``question`` (the
prompt), ``answer`` (reference answers), ``id`` and ``kind`` (harmful or harmless, for
refusal: data/safety.py; it keeps a detected layout, as ``answer`` alone does). Without a
mapping, a file whose columns match one of the six datasets' own layouts (TruthfulQA's
``Question``/``Best Answer``, AlpacaEval's ``instruction``, SimpleQA's ``problem``, ...) is
read by that dataset's reader, reference answers included (none for the Alpaca/AlpacaEval
layout: its ``output`` is another model's answer); any other file needs its question column
(``question`` or ``--question-column``). The dataset is named for the file's stem either
way. A mapping that names only ``answer`` keeps the detected layout and takes the gold
answers from that column (``alpaca_eval.json#answer=gold``); a known dataset's name takes
the same suffix (``alpaca#answer=COLUMN``, ``parse_named``).
"""

from __future__ import annotations

import difflib
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path

from sago_core.data.datasets import SOURCES, DatasetSource
from sago_core.data.records import Record, read_records
from sago_core.errors import ConfigError, InputError

MAPPABLE = ("question", "answer", "id", "kind")
USER_FILE_SUFFIXES = (".csv", ".jsonl", ".json", ".parquet")


@dataclass(frozen=True)
class FileEntry:
    path: Path
    mapping: tuple[tuple[str, str], ...] = ()

    def column(self, name: str) -> str | None:
        return dict(self.mapping).get(name)


def _is_file_name(text: str) -> bool:
    return Path(text.partition("#")[0]).suffix.lower() in USER_FILE_SUFFIXES


def parse_entry(entry: str) -> FileEntry | None:
    """A ``datasets`` entry that names a file (``path[#name=column,...]``), else None."""
    path, sep, spec = entry.partition("#")
    if not _is_file_name(path):
        return None
    mapping: list[tuple[str, str]] = []
    for item in spec.split(",") if sep else []:
        name, eq, column = (part.strip() for part in item.partition("="))
        if not eq or not name or not column:
            raise ConfigError(f"datasets entry {entry!r}: {item.strip()!r} is not NAME=COLUMN")
        if name not in MAPPABLE:
            raise ConfigError(
                f"datasets entry {entry!r}: {name!r} cannot be mapped (use {', '.join(MAPPABLE)})"
            )
        mapping.append((name, column))
    return FileEntry(Path(path.strip()), tuple(mapping))


def parse_named(entry: str) -> tuple[str, str | None]:
    """A known dataset's entry: (name, the gold column named by ``#answer=COLUMN`` or None).
    Only ``answer`` can be named for a known dataset (its reader knows its other columns)."""
    name, sep, spec = entry.partition("#")
    if not sep:
        return entry.strip(), None
    items = [item.strip() for item in spec.split(",") if item.strip()]
    pairs = [tuple(part.strip() for part in item.partition("=")[::2]) for item in items]
    if len(pairs) != 1 or pairs[0][0] != "answer" or not pairs[0][1]:
        raise ConfigError(
            f"datasets entry {entry!r}: a known dataset takes only '#answer=COLUMN' (its gold "
            "answers' column)"
        )
    return name.strip(), pairs[0][1]


def join_mapped_entries(items: list[str]) -> list[str]:
    """Entries split at every comma, mended: ``a.csv#question=Q``, ``answer=A`` is one entry
    (a name=column item that names no file belongs to the file before it)."""
    joined: list[str] = []
    for item in items:
        if joined and "#" in joined[-1] and "=" in item and not _is_file_name(item):
            joined[-1] = f"{joined[-1]},{item}"
        else:
            joined.append(item)
    return joined


def _is_list(value: object) -> bool:
    return isinstance(value, list | tuple)


# Each layout: does a record look like it (first record's columns and values)?
LAYOUTS: tuple[tuple[str, Callable[[Record], bool]], ...] = (
    ("truthfulqa", lambda r: {"Question", "Best Answer"} <= r.keys()),
    ("truthfulqa", lambda r: {"question", "best_answer"} <= r.keys()),
    ("simpleqa_verified", lambda r: {"problem", "answer"} <= r.keys()),
    ("alpaca", lambda r: "instruction" in r and "question" not in r),
    ("triviaqa", lambda r: {"Question", "Answer"} <= r.keys()),
    ("triviaqa", lambda r: "question" in r and isinstance(r.get("answer"), dict)),
    ("hotpotqa", lambda r: "question" in r and ("_id" in r or "supporting_facts" in r)),
    ("nq_open", lambda r: "question" in r and _is_list(r.get("answer"))),
)


def keeps_layout(entry: FileEntry) -> bool:
    """No mapping, or one that names only the gold answers' or the kind column: the layout
    is read."""
    return all(name in ("answer", "kind") for name, _ in entry.mapping)


def detect_layout(records: list[Record]) -> DatasetSource | None:
    """The dataset whose own layout the file's first record has, if any."""
    if not records:
        return None
    first = records[0]
    for name, matches in LAYOUTS:
        if matches(first):
            return SOURCES[name]
    return None


def read_with_layout(
    source: DatasetSource, path: Path, records: list[Record], gold: str | None = None
) -> list:
    """The file read by ``source``'s reader; ``gold``: the user's gold answers' column."""
    from sago_core.data.datasets import with_gold
    from sago_core.data.prompt import source_of

    return [
        replace(
            with_gold(source.to_prompt(rec, path, row), rec, gold),
            dataset=path.stem,
            source=source_of(str(path), row),
        )
        for row, rec in enumerate(records, 1)
    ]


def hint_for(name: str, present: set[str]) -> str:
    close = difflib.get_close_matches(name, sorted(present), n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def check_mapping(entry: FileEntry, records: list[Record]) -> None:
    present = set().union(*(r.keys() for r in records[:50])) if records else set()
    for name, column in entry.mapping:
        if column not in present:
            raise InputError(
                f"the mapping {name}={column} names a column the file does not have "
                f"(columns present: {sorted(present)}){hint_for(column, present)}",
                file=str(entry.path),
                column=column,
            )


def load_records(entry: FileEntry) -> list[Record]:
    records = read_records(entry.path)
    check_mapping(entry, records)
    return records
