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


def content_id(prefix: str, text: str) -> str:
    """A stable id for records that carry none: the same question gets the same id anywhere."""
    return f"{prefix}-{hashlib.sha256(text.strip().encode('utf-8')).hexdigest()[:12]}"
