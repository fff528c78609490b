"""Read raw records from CSV (with or without BOM), JSON arrays, JSONL and Parquet.

Every failure is an ``InputError`` naming the file and, where it applies, the row (1-based,
counting data rows, not the CSV header) and the column.
"""

from __future__ import annotations

import csv
import difflib
import io
import json
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

from sago_core.data.jsonl import read_jsonl
from sago_core.data.placeholders import find_placeholders
from sago_core.errors import InputError

Record = dict[str, Any]


def _read_text(path: Path) -> str:
    try:
        raw = path.read_bytes()
    except FileNotFoundError as exc:
        raise InputError("does not exist", file=str(path)) from exc
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise InputError(
            f"is not valid UTF-8 (byte {exc.start}, line {line})", file=str(path)
        ) from exc


def read_records(path: Path) -> list[Record]:
    """Records of a data file, chosen by its suffix."""
    suffix = path.suffix.lower()
    if suffix == ".parquet":
        return read_parquet_records(path)
    text = _read_text(path)
    if suffix == ".csv":
        return list(csv.DictReader(io.StringIO(text, newline="")))
    if suffix == ".jsonl":
        return read_jsonl(text, str(path))
    if suffix == ".json":
        return _read_json(text, path)
    raise InputError(
        f"unsupported file type {suffix!r} (use .csv, .json, .jsonl or .parquet)", file=str(path)
    )


def _read_json(text: str, path: Path) -> list[Record]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as exc:
        raise InputError(f"is not valid JSON: {exc}", file=str(path)) from exc
    if isinstance(value, dict) and isinstance(value.get("Data"), list):
        value = value["Data"]  # the official TriviaQA layout
    if not isinstance(value, list):
        raise InputError("must hold a JSON array of records", file=str(path))
    for number, item in enumerate(value, start=1):
        if not isinstance(item, dict):
            raise InputError("is not a JSON object", file=str(path), row=number)
    return value


def read_parquet_records(path: Path) -> list[Record]:
    """A Parquet file's rows as records; a missing or broken file is an error naming it."""
    import pyarrow.parquet as pq

    try:
        table = pq.read_table(path)
    except FileNotFoundError as exc:
        raise InputError("does not exist", file=str(path)) from exc
    except Exception as exc:  # pyarrow raises several unrelated types for broken files
        raise InputError(f"is not a readable Parquet file ({exc})", file=str(path)) from exc
    return table.to_pylist()


def require_text(record: Record, column: str, *, file: Path, row: int) -> str:
    """A non-empty string field, or an error naming file, row and column."""
    bad = partial(InputError, file=str(file), row=row, column=column)
    if column not in record:
        close = difflib.get_close_matches(column, [str(k) for k in record], n=1, cutoff=0.6)
        hint = f"; did you mean {close[0]!r}?" if close else ""
        raise bad(f"missing column (columns present: {sorted(record)}){hint}")
    value = record[column]
    if not isinstance(value, str):
        raise bad(f"must be text, got {type(value).__name__}")
    if "\x00" in value:
        raise bad("contains a NUL byte")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise bad(f"holds a lone surrogate at character {exc.start} (not valid Unicode)") from exc
    if not value.strip():
        raise bad("is empty")
    return value.strip()


def text_list(value: Any, *, separator: str | None = None) -> tuple[str, ...]:
    """Reference answers as a tuple of non-empty strings."""
    if value is None:
        return ()
    if isinstance(value, str):
        parts = value.split(separator) if separator else [value]
        return tuple(p.strip() for p in parts if p.strip())
    if isinstance(value, list | tuple):
        return tuple(str(v).strip() for v in value if str(v).strip())
    return (str(value),)


@dataclass(frozen=True)
class PromptRules:
    """What a user's prompt may be (``max_prompt_chars``, ``allow_placeholders``,
    ``strict_placeholders`` in config)."""

    max_chars: int = 100_000
    allow_placeholders: bool = False
    strict_placeholders: bool = False  # placeholder-like text an error, not a warning


def check_prompt(text: str, rules: PromptRules, *, file: Path, row: int, column: str) -> str | None:
    """Raise for a prompt that cannot be used; return a warning (placeholder-like text,
    sago_core/data/placeholders.py) naming file, row and column, else None."""
    if len(text) > rules.max_chars:
        problem = f"is {len(text):,} characters long, over max_prompt_chars {rules.max_chars:,}"
        raise InputError(problem, file=str(file), row=row, column=column)
    found = [] if rules.allow_placeholders else find_placeholders(text)
    if not found:
        return None
    problem = f"holds placeholder-like text {found[0]!r} (an unfilled template field?)"
    if rules.strict_placeholders:
        problem += (
            " and strict_placeholders is on (set allow_placeholders: true if it is meant literally)"
        )
        raise InputError(problem, file=str(file), row=row, column=column)
    return f"file {file}, row {row}, column {column!r}: {problem}"
