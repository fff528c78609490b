"""The one prompt schema every loader normalises to."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field


@dataclass(frozen=True)
class Prompt:
    dataset: str
    prompt_id: str
    prompt: str
    references: tuple[str, ...] = field(default_factory=tuple)
    source: str = ""  # "file, row N" (or hub id): where an error about this prompt points


def content_id(prefix: str, text: str) -> str:
    """A stable id for records that carry none: the same question gets the same id anywhere."""
    return f"{prefix}-{hashlib.sha256(text.strip().encode('utf-8')).hexdigest()[:12]}"


def source_of(file: str, row: int) -> str:
    return f"{file}, row {row}"


def split_source(source: str) -> tuple[str, int | None]:
    """Inverse of ``source_of``: (file, row), row None for sources without one."""
    file, _, row = source.partition(", row ")
    return file, int(row) if row.isdigit() else None
