"""Shards: the model work of a run cut into (dataset, prompt range) pieces, and their
assignment to the workers that serve them.

Each shard gets its own input files (its prompts and their kept variants), so a shard's
cache key is the content of exactly its inputs: adding prompts to one dataset, or a crash in
one shard, never invalidates another. Prompts are ordered by (dataset, prompt_id) and cut
every ``shard_size`` prompts within a dataset; a label like ``builtin_alpaca-0000-0031``
names the prompt range (positions, inclusive).

With several workers each builds its engine once and serves a group of shards, so one
model's generation lasts as long as its heaviest group. What makes a group heavy is mostly
what no plan knows: how long the answers run, and that differs by dataset (a trivia answer
stops after a few words, an instruction runs to ``max_new_tokens``). So with W workers each
shard of the one-worker cut is cut again into W even parts (fewer where it has fewer
prompts; ``part_of`` names the shard they were cut from) and its parts go to W different
workers (``assign_shards``): whatever a dataset costs, each worker pays about 1/W of it.
Shards are dealt longest first by estimated tokens (prompt texts x ``max_new_tokens`` plus
their prompt tokens, counted as characters / ``CHARS_PER_TOKEN``: no tokenizer is loaded to
plan), each part to the least loaded of the workers that hold no part of its shard yet. One
worker is never cut further: a one-device run's shards, their files and their cache keys
do not depend on this. A run's plan is cut for the workers that serve its models, and they
are dealt their parts with ``assign_shards``; changing the number of workers changes the
shards (a resume with another count asks the row cache, not the model, for what it has).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import polars as pl

from sago_core.artifacts.layout import PROMPTS_FILE, SHARD_PLAN_FILE, VARIANTS_FILE
from sago_core.artifacts.schemas import PROMPTS, VARIANTS
from sago_core.artifacts.store import write_json, write_parquet

CHARS_PER_TOKEN = 4  # English text through a BPE tokenizer; only the balance uses it


@dataclass(frozen=True)
class Shard:
    label: str
    dataset: str
    start: int
    stop: int  # exclusive
    prompts_path: str
    variants_path: str
    # The plan's load estimate: prompt texts to answer (base and kept variants) and their
    # estimated prompt tokens. None: a plan written before they were recorded.
    requests: int | None = None
    prompt_tokens: int | None = None
    # The one-worker shard this one is a part of (its label). None: a plan written before
    # parts were recorded (each shard then stands alone).
    part_of: str | None = None


@dataclass(frozen=True)
class Piece:
    """A planned shard before its files are written: a prompt range and its load."""

    dataset: str
    start: int
    stop: int  # exclusive
    ids: tuple[str, ...]
    requests: int
    prompt_tokens: int
    part_of: str  # the label of the one-worker shard it is cut from

    @property
    def label(self) -> str:
        return shard_label(self.dataset, self.start, self.stop)

    def tokens(self, max_new_tokens: int) -> int:
        return self.requests * max_new_tokens + self.prompt_tokens


def shard_label(dataset: str, start: int, stop: int) -> str:
    """``dataset-FIRST-LAST`` (prompt positions, inclusive)."""
    return f"{dataset}-{start:04d}-{stop - 1:04d}"


def prompt_loads(prompts: pl.DataFrame, variants: pl.DataFrame | None) -> pl.DataFrame:
    """Per prompt (dataset, prompt_id): ``requests`` (the base and its kept variants) and
    their estimated ``prompt_tokens``."""
    texts = [prompts.select("dataset", "prompt_id", pl.col("prompt").alias("text"))]
    if variants is not None:
        texts.append(variants.filter(pl.col("kept")).select("dataset", "prompt_id", "text"))
    tokens = (pl.col("text").str.len_chars() + CHARS_PER_TOKEN - 1) // CHARS_PER_TOKEN
    return (
        pl.concat(texts)
        .group_by("dataset", "prompt_id")
        .agg(pl.len().alias("requests"), tokens.sum().alias("prompt_tokens"))
    )


def plan_pieces(
    prompts: pl.DataFrame,
    shard_size: int,
    variants: pl.DataFrame | None = None,
    workers: int = 1,
) -> list[Piece]:
    """The shards of a run in a stable order: every ``shard_size`` prompts of a dataset,
    each then cut into ``workers`` even parts (fewer where it has fewer prompts)."""
    loads = prompt_loads(prompts, variants)
    by_prompt = {
        (d, p): (r, t)
        for d, p, r, t in loads.select("dataset", "prompt_id", "requests", "prompt_tokens").rows()
    }
    pieces = []
    for dataset in sorted(prompts["dataset"].unique().to_list()):
        ids = sorted(prompts.filter(pl.col("dataset") == dataset)["prompt_id"].to_list())
        for start in range(0, len(ids), shard_size):
            chunk = ids[start : start + shard_size]
            whole = shard_label(dataset, start, start + len(chunk))
            for offset, part in even_parts(len(chunk), max(workers, 1)):
                mine = chunk[offset : offset + part]
                requests = sum(by_prompt[(dataset, i)][0] for i in mine)
                tokens = sum(by_prompt[(dataset, i)][1] for i in mine)
                first = start + offset
                pieces.append(
                    Piece(dataset, first, first + part, tuple(mine), requests, tokens, whole)
                )
    return pieces


def even_parts(count: int, parts: int) -> list[tuple[int, int]]:
    """(offset, size) of ``count`` items cut into ``parts`` runs whose sizes differ by at
    most one, the larger first (fewer, of one item each, where ``count`` < ``parts``)."""
    parts = min(parts, count)
    size, extra = divmod(count, parts) if parts else (0, 0)
    cuts, offset = [], 0
    for index in range(parts):
        length = size + (index < extra)
        cuts.append((offset, length))
        offset += length
    return cuts


def deal(loads: list[int], wholes: list[str], workers: int) -> list[list[int]]:
    """Indexes of ``loads`` per worker. The items of one whole (the parts of one shard) go
    to different workers, however their estimates differ; wholes by their total, items by
    their own load, the largest first (equal ones in plan order), each to the worker that
    carries least so far among those holding the fewest items of its whole (of equals, the
    lowest numbered)."""
    groups: list[list[int]] = [[] for _ in range(max(workers, 1))]
    carried = [0] * len(groups)
    totals: dict[str, int] = {}
    for whole, load in zip(wholes, loads, strict=True):
        totals[whole] = totals.get(whole, 0) + load
    for whole in sorted(totals, key=lambda w: (-totals[w], w)):
        held = [0] * len(groups)
        items = [i for i, w in enumerate(wholes) if w == whole]
        for index in sorted(items, key=lambda i: (-loads[i], i)):
            worker = min(range(len(groups)), key=lambda w: (held[w], carried[w], w))
            groups[worker].append(index)
            held[worker] += 1
            carried[worker] += loads[index]
    return groups


def shard_load(shard: Shard, max_new_tokens: int) -> int | None:
    """The shard's estimated tokens (None: its plan predates the estimate)."""
    if shard.requests is None or shard.prompt_tokens is None:
        return None
    return shard.requests * max_new_tokens + shard.prompt_tokens


def assign_shards(shards: list[Shard], workers: int, max_new_tokens: int) -> list[list[Shard]]:
    """One group per worker (``deal``: the parts of a shard to different workers, longest
    first by estimated tokens; a plan written before the estimate: by prompt count). Empty
    groups are dropped."""
    estimates = [shard_load(s, max_new_tokens) for s in shards]
    known = None not in estimates
    loads = [
        e if known and e is not None else s.stop - s.start
        for s, e in zip(shards, estimates, strict=True)
    ]
    groups = deal(loads, [s.part_of or s.label for s in shards], workers)
    return [[shards[i] for i in group] for group in groups if group]


def write_shards(
    prompts: pl.DataFrame,
    variants: pl.DataFrame,
    shard_size: int,
    out_dir: Path,
    workers: int = 1,
) -> Path:
    """Each shard's inputs as Parquet, and ``shards.json`` listing them (returned)."""
    shards = []
    for p in plan_pieces(prompts, shard_size, variants, workers):
        folder = out_dir / p.label
        mine = (pl.col("dataset") == p.dataset) & pl.col("prompt_id").is_in(list(p.ids))
        prompts_path = write_parquet(prompts.filter(mine), folder / PROMPTS_FILE, PROMPTS)
        variants_path = write_parquet(variants.filter(mine), folder / VARIANTS_FILE, VARIANTS)
        shards.append(
            Shard(
                p.label,
                p.dataset,
                p.start,
                p.stop,
                str(prompts_path),
                str(variants_path),
                p.requests,
                p.prompt_tokens,
                p.part_of,
            )
        )
    return write_json([asdict(s) for s in shards], out_dir / SHARD_PLAN_FILE)


def read_shards(path: str | Path) -> list[Shard]:
    return [Shard(**s) for s in json.loads(Path(path).read_text(encoding="utf-8"))]
