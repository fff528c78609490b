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
    # why its data gives it no reference answers (the reader's reason; ``missing_reason``)
    no_references: str | None = None
    kind: str | None = None  # harmful / harmless, for refusal (data/safety.py); None: unsaid
    category: str | None = None  # a safety set's own category of the prompt, where it has one


NO_REFERENCE_CELL = "no reference answers for this prompt: its answer cell is empty"
# a run's prompts.parquet written before it held ``reference_missing_reason``
NO_REASON_RECORDED = "no reference answers (prompts.parquet records no reason)"


def reference_missing_reason(prompt: Prompt) -> str | None:
    """Why correctness (and so flip rates) is missing for ``prompt``: None when it has
    reference answers; else its reader's reason (``no_references``: a dataset with no gold
    answers, a file without an answer column, an open-ended built-in prompt), or an empty
    answer cell. prompts.parquet's ``reference_missing_reason``."""
    if prompt.references:
        return None
    return prompt.no_references or NO_REFERENCE_CELL


def content_id(prefix: str, text: str) -> str:
    """A stable id for records that carry none: the same question gets the same id anywhere."""
    return f"{prefix}-{hashlib.sha256(text.strip().encode('utf-8')).hexdigest()[:12]}"


def source_of(file: str, row: int) -> str:
    return f"{file}, row {row}"


def split_source(source: str) -> tuple[str, int | None]:
    """Inverse of ``source_of``: (file, row), row None for sources without one."""
    file, _, row = source.partition(", row ")
    return file, int(row) if row.isdigit() else None
