"""``sago export <run> --out FILE``: a finished run's generations in the input schema of
``sago score`` (format by the file's extension: .csv, .jsonl or .parquet). Lists (references,
token ids) are JSON arrays in a CSV; a failed generation is exported with an empty response
and its ``failure_reason`` (read back as failed with that reason), a generation that succeeded
with a blank reason (read back as an answer, an empty one if it was empty)."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from sago_core.artifacts.layout import GENERATIONS_FILE, PROMPTS_FILE
from sago_core.artifacts.schemas import Schema
from sago_core.artifacts.store import read_parquet, write_parquet, write_text
from sago_core.errors import InputError
from sago_core.external.schema import COLUMNS

SUFFIXES = (".csv", ".jsonl", ".parquet")  # the file formats, by the output's suffix
EXPORT_SCHEMA: Schema = {
    "model": pl.String,
    "dataset": pl.String,
    "prompt_id": pl.String,
    "variant_id": pl.String,
    "family": pl.String,
    "subtype": pl.String,
    "strength": pl.Float64,
    "position": pl.String,
    "prompt_text": pl.String,
    "response_text": pl.String,
    "references": pl.List(pl.String),
    "response_token_ids": pl.List(pl.Int32),
    "failure_reason": pl.String,
}


def export_frame(run_dir: Path) -> pl.DataFrame:
    for name in (GENERATIONS_FILE, PROMPTS_FILE):
        if not (run_dir / name).exists():
            raise InputError(f"is not a finished run (no {name})", file=str(run_dir))
    generations = read_parquet(run_dir / GENERATIONS_FILE)
    prompts = read_parquet(run_dir / PROMPTS_FILE).select("dataset", "prompt_id", "references")
    frame = generations.join(
        prompts, on=["dataset", "prompt_id"], how="left", maintain_order="left"
    )
    return frame.select([pl.col(c).cast(t) for c, t in EXPORT_SCHEMA.items()])


def write_export(frame: pl.DataFrame, out: Path) -> Path:
    suffix = out.suffix.lower()
    assert set(frame.columns) <= set(COLUMNS)
    if suffix == ".parquet":
        return write_parquet(frame, out, EXPORT_SCHEMA)
    rows = frame.to_dicts()
    if suffix == ".jsonl":
        return write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), out)
    if suffix == ".csv":
        lists = ("references", "response_token_ids")
        flat = frame.with_columns(
            [
                pl.Series(
                    c,
                    [
                        None if v is None else json.dumps(v, ensure_ascii=False)
                        for v in frame[c].to_list()
                    ],
                    pl.String,
                )
                for c in lists
            ]
        )
        return write_text(flat.write_csv(), out)
    raise InputError(
        f"unsupported export type {suffix!r} (use .csv, .jsonl or .parquet)", file=str(out)
    )


def export_run(run_dir: Path, out: Path) -> Path:
    return write_export(export_frame(run_dir), out)
