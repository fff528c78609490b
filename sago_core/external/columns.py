"""Column mapping: ``--columns prompt_text=question,response_text=output`` renames a file's
columns to the input schema's; a mapping to a column the file lacks is an error naming it."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from sago_core.errors import ConfigError, InputError

Record = dict[str, Any]


def parse_mapping(text: str | None, option: str = "--columns") -> tuple[tuple[str, str], ...]:
    """``a=b,c=d`` as ((a, b), (c, d)); an item without ``=`` or a key named twice is an error."""
    if not text:
        return ()
    pairs: list[tuple[str, str]] = []
    for item in text.split(","):
        key, sep, value = (part.strip() for part in item.partition("="))
        if not sep or not key or not value:
            raise ConfigError(f"{option}: {item.strip()!r} is not NAME=COLUMN")
        if key in dict(pairs):
            raise ConfigError(f"{option}: {key!r} is mapped twice")
        pairs.append((key, value))
    return tuple(pairs)


def hint(name: str, present: Iterable[str]) -> str:
    close = difflib.get_close_matches(name, [str(p) for p in present], n=1, cutoff=0.6)
    return f"; did you mean {close[0]!r}?" if close else ""


def require_columns(
    record: Record, required: Iterable[str], file: str, row: int, suggest: bool = False
) -> None:
    """An error naming the file, row and first missing column (with a close match named
    when ``suggest``)."""
    for column in required:
        if column not in record:
            near = hint(column, record) if suggest else ""
            raise InputError(
                f"missing column (columns present: {sorted(record)}){near}",
                file=file,
                row=row,
                column=column,
            )


def apply_mapping(
    records: list[Record], mapping: tuple[tuple[str, str], ...], known: tuple[str, ...], file: str
) -> list[Record]:
    """``records`` with each mapped file column renamed to its schema name."""
    if not mapping:
        return records
    present = set().union(*(r.keys() for r in records)) if records else set()
    for name, column in mapping:
        if name not in known:
            raise ConfigError(
                f"--columns: {name!r} is not a column of the input schema{hint(name, known)}"
            )
        if column not in present:
            raise InputError(
                f"--columns maps {name!r} to a column the file does not have "
                f"(columns present: {sorted(present)}){hint(column, present)}",
                file=file,
                column=column,
            )
    renames = {column: name for name, column in mapping}
    return [{renames.get(k, k): v for k, v in r.items()} for r in records]
