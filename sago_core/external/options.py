"""What ``sago score`` is told about a file of external generations (typed, parsed once)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

FormatName = Literal["generations", "sago-reference", "dove", "lm-eval", "inspect"]
FORMATS: tuple[FormatName, ...] = ("generations", "sago-reference", "dove", "lm-eval", "inspect")


class ExternalSource(BaseModel):
    """A file of externally generated responses and how to read it.

    ``columns``: (schema column, file column) pairs (``--columns prompt_text=question``);
    ``family``/``subtype``: what a file does not carry (the reference CSVs name the family
    only in their folder name); ``base_where``: (dimension, value) pairs that pick the base
    row of a DOVE sample; ``model``: the spec named for rows without a ``model`` column.
    """

    model_config = ConfigDict(extra="forbid", frozen=True)

    path: Path
    format: FormatName | None = None  # detected from the columns when None
    columns: tuple[tuple[str, str], ...] = ()
    family: str | None = None
    subtype: str | None = None
    base_where: tuple[tuple[str, str], ...] = ()
    model: str | None = None
    max_prompt_chars: int = Field(default=100_000, ge=1)
