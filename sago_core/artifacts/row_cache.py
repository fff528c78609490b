"""Answers and teacher-forced measurements cached one row at a time, shared by every run
under one runs folder.

A stage's own cache is keyed by its whole input (a shard's prompts and variants), so two
runs that ask overlapping but different rows share nothing: a budgeted run's second round
(its shards hold the first round's cells and the new ones), a full run after a budgeted one,
a budgeted run over a finished full run. Here each row has a key of its own, the sha256 of
what determines it: the model (its target, less where its files are), the settings that
change an answer (not the batch sizes), the prompt text, the row's role (the replay of a
base is asked apart, so it is a row of its own) and, when sampled, its seed. A stage asks the
model only for the rows no run asked before and stores them.

What is stored is what the model returned, never a failure (a failed row is asked again).
The rows of one scope (model x settings) are Parquet parts below
``<runs_dir>/.cache/rows/<table>/<scope>/``, one part per stage that asked something, written
atomically; two writers racing on one row store equal values, and a reader keeps the first.
On a runs folder attached to an object store only the parts on this machine are read: a
part another machine wrote is a miss, asked again, never a wrong value.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

import polars as pl

from sago_core.artifacts.schemas import Schema
from sago_core.artifacts.store import write_parquet

KEY = "row_key"
PART_GLOB = "part-*.parquet"


def digest(payload: Any) -> str:
    text = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


_KEYS_OF: dict[Path, frozenset[str]] = {}  # a part's keys, read once per process


def _part_keys(part: Path) -> frozenset[str] | None:
    """The keys a part holds (None: unreadable now, e.g. being written: a miss)."""
    if part not in _KEYS_OF:
        try:
            _KEYS_OF[part] = frozenset(pl.read_parquet(part, columns=[KEY])[KEY].to_list())
        except (OSError, pl.exceptions.ComputeError, pl.exceptions.ColumnNotFoundError):
            return None
    return _KEYS_OF[part]


class RowCache:
    """The cached rows of one table (``generations``, ``analysis``) and one scope."""

    def __init__(self, root: Path, table: str, scope: Any, schema: Schema) -> None:
        self.folder = root / table / digest(scope)[:24]
        self.schema: Schema = {KEY: pl.String, **schema}

    def get(self, keys: list[str]) -> pl.DataFrame:
        """The cached rows among ``keys`` (one per key; none for a miss). A part's keys are
        read once per process (a part is named by its content and never changes), and only
        the parts holding a wanted key are read whole: a stage's lookup does not grow with
        every part the run wrote before it."""
        parts = sorted(self.folder.glob(PART_GLOB)) if self.folder.is_dir() else []
        if not parts or not keys:
            return pl.DataFrame(schema=self.schema)
        wanted_keys = set(keys)
        wanted = pl.Series(KEY, sorted(wanted_keys), dtype=pl.String)
        frames = []
        for part in parts:
            held = _part_keys(part)
            if held is None or held.isdisjoint(wanted_keys):
                continue
            try:
                frame = pl.read_parquet(part)
            except (OSError, pl.exceptions.ComputeError):
                continue  # a part being written elsewhere or damaged: its rows are misses
            if set(self.schema) <= set(frame.columns):
                frames.append(frame.select(list(self.schema)).filter(pl.col(KEY).is_in(wanted)))
        if not frames:
            return pl.DataFrame(schema=self.schema)
        return pl.concat(frames, how="vertical_relaxed").unique(KEY, keep="first")

    def put(self, rows: pl.DataFrame) -> None:
        """Store ``rows`` (a ``row_key`` column and the table's columns)."""
        if rows.is_empty():
            return
        name = f"part-{digest(sorted(rows[KEY].to_list()))[:32]}.parquet"
        write_parquet(rows.select(list(self.schema)), self.folder / name, self.schema)
