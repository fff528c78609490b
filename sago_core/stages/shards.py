"""Shards: the model work of a run cut into (dataset, prompt range) pieces.

Each shard gets its own input files (its prompts and their kept variants), so a shard's
cache key is the content of exactly its inputs: adding prompts to one dataset, or a crash in
one shard, never invalidates another. Prompts are ordered by (dataset, prompt_id) and cut
every ``shard_size`` prompts within a dataset; a label like ``builtin_alpaca-0000-0031``
names the prompt range (positions, inclusive).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from pathlib import Path

import polars as pl

from sago_core.artifacts.layout import PROMPTS_FILE, SHARD_PLAN_FILE, VARIANTS_FILE
from sago_core.artifacts.schemas import PROMPTS, VARIANTS
from sago_core.artifacts.store import write_json, write_parquet


@dataclass(frozen=True)
class Shard:
    label: str
    dataset: str
    start: int
    stop: int  # exclusive
    prompts_path: str
    variants_path: str


def plan_shards(prompts: pl.DataFrame, shard_size: int) -> list[tuple[str, int, int, list[str]]]:
    """(dataset, start, stop, prompt ids) per shard, in a stable order."""
    plan = []
    for dataset in sorted(prompts["dataset"].unique().to_list()):
        ids = sorted(prompts.filter(pl.col("dataset") == dataset)["prompt_id"].to_list())
        for start in range(0, len(ids), shard_size):
            chunk = ids[start : start + shard_size]
            plan.append((dataset, start, start + len(chunk), chunk))
    return plan


def write_shards(
    prompts: pl.DataFrame, variants: pl.DataFrame, shard_size: int, out_dir: Path
) -> Path:
    """Each shard's inputs as Parquet, and ``shards.json`` listing them (returned)."""
    shards = []
    for dataset, start, stop, ids in plan_shards(prompts, shard_size):
        label = f"{dataset}-{start:04d}-{stop - 1:04d}"
        folder = out_dir / label
        mine = (pl.col("dataset") == dataset) & pl.col("prompt_id").is_in(ids)
        prompts_path = write_parquet(prompts.filter(mine), folder / PROMPTS_FILE, PROMPTS)
        variants_path = write_parquet(variants.filter(mine), folder / VARIANTS_FILE, VARIANTS)
        shards.append(Shard(label, dataset, start, stop, str(prompts_path), str(variants_path)))
    return write_json([asdict(s) for s in shards], out_dir / SHARD_PLAN_FILE)


def read_shards(path: str | Path) -> list[Shard]:
    import json

    return [Shard(**s) for s in json.loads(Path(path).read_text(encoding="utf-8"))]
