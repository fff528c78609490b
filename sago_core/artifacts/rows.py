"""A frame built from row dicts: the one place a stage turns its rows into an artifact."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import polars as pl

from sago_core.artifacts.schemas import Schema, conform, empty


def from_rows(rows: Sequence[Mapping[str, Any]], schema: Schema) -> pl.DataFrame:
    """Row dicts, each free to leave out optional keys, as a frame of ``schema``: every key of
    every row is read (polars infers a frame's columns from its first 100 rows by default, so
    a key first set after row 100 was dropped, silently), a key a row lacks is null, and the
    frame is cast to the schema in its order."""
    if not rows:
        return empty(schema)
    frame = pl.DataFrame(
        rows, schema_overrides=dict(schema.items()), infer_schema_length=None, strict=False
    )
    absent = [pl.lit(None, dtype=t).alias(c) for c, t in schema.items() if c not in frame.columns]
    return conform(frame.with_columns(absent) if absent else frame, schema)
