"""Tasks: load prompts, build variant candidates, apply the semantic filter."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from sago.tasks.backends import backend_for
from sago.tasks.stage import stage_task
from sago_core.artifacts.json_cache import JsonCache
from sago_core.artifacts.layout import (
    PROMPTS_FILE,
    STRUCTURAL_CANDIDATES_FILE,
    TRANSLATED_CANDIDATES_FILE,
    VARIANT_CANDIDATES_FILE,
    VARIANTS_FILE,
    CacheLayout,
)
from sago_core.artifacts.schemas import VARIANTS, conform, empty, prompts_schema
from sago_core.artifacts.store import read_parquet, write_parquet
from sago_core.axes.text_similarity import get_bert_scorer
from sago_core.backends.target import ModelTarget, behaviour_key
from sago_core.config import (
    BertScoreSettings,
    RunConfig,
    StructuralGrid,
    TranslationSettings,
    VariantGrid,
)
from sago_core.stages.prompts import prepare_prompts
from sago_core.stages.semantic_cache import cached_scorer
from sago_core.stages.shards import write_shards
from sago_core.stages.structural import rewrite_structural
from sago_core.stages.translation import (
    TRANSLATED_CANDIDATES,
    BackCheck,
    needs_back_translation,
    translate_prompts,
)
from sago_core.stages.variants import build_variant_candidates, filter_variants


@stage_task("load-prompts", retries=1)
def load_prompts_task(config: RunConfig, prompt_source_digest: str, out_dir: str) -> str:
    """``prompt_source_digest`` fingerprints the data files, so edited data is reloaded."""
    prompts = prepare_prompts(config)
    return str(write_parquet(prompts, Path(out_dir) / PROMPTS_FILE, prompts_schema(prompts)))


@stage_task("plan-shards")
def plan_shards_task(
    prompts_path: str, variants_path: str, shard_size: int, out_dir: str, workers: int = 1
) -> str:
    """Each shard's own input files and ``shards.json`` listing them, cut for ``workers``."""
    prompts, variants = read_parquet(prompts_path), read_parquet(variants_path)
    return str(write_shards(prompts, variants, shard_size, Path(out_dir), workers))


@stage_task("build-variants")
def build_variants_task(prompts_path: str, grid: VariantGrid, seed: int, out_dir: str) -> str:
    frame = build_variant_candidates(read_parquet(prompts_path), grid, seed)
    return str(write_parquet(frame, Path(out_dir) / VARIANT_CANDIDATES_FILE, VARIANTS))


@stage_task("rewrite-structural")
def rewrite_structural_task(
    prompts_path: str,
    grid: StructuralGrid | None,
    rewriter: ModelTarget | None,
    seed: int,
    cache_dir: str,
    out_dir: str,
    ledger_file: str | None = None,
) -> str:
    """Length and mood variants from the rewriter (any backend, API models included); an
    empty artifact when none are asked for. ``cache_dir``: the shared cache root."""
    path = Path(out_dir) / STRUCTURAL_CANDIDATES_FILE
    if grid is None or rewriter is None:
        return str(write_parquet(empty(VARIANTS), path, VARIANTS))
    frame = rewrite_structural(
        read_parquet(prompts_path),
        grid,
        lambda: backend_for(rewriter, cache_dir, ledger_file),  # only if a rewrite is missing
        behaviour_key(rewriter),
        JsonCache(CacheLayout(Path(cache_dir)).rewrites),
        seed,
    )
    return str(write_parquet(frame, path, VARIANTS))


@stage_task("translate-prompts")
def translate_prompts_task(
    prompts_path: str,
    settings: TranslationSettings | None,
    translator: ModelTarget | None,
    bertscore: BertScoreSettings,
    seed: int,
    cache_dir: str,
    out_dir: str,
    ledger_file: str | None = None,
) -> str:
    """Machine-translated and round-trip variants from the translator (any backend, API
    models included), back-translations scored by the semantic filter's scorer; an empty
    artifact when none are asked for. ``cache_dir``: the shared cache root."""
    path = Path(out_dir) / TRANSLATED_CANDIDATES_FILE
    if settings is None or translator is None:
        return str(write_parquet(empty(TRANSLATED_CANDIDATES), path, TRANSLATED_CANDIDATES))
    check = None
    if needs_back_translation(settings):
        scorer = get_bert_scorer(bertscore.model, bertscore.num_layers, bertscore.batch_size)
        check = BackCheck(scorer.f1, bertscore.semantic_threshold)
    frame = translate_prompts(
        read_parquet(prompts_path),
        settings,
        backend_for(translator, cache_dir, ledger_file),
        behaviour_key(translator),
        JsonCache(CacheLayout(Path(cache_dir)).rewrites),
        seed,
        check,
    )
    return str(write_parquet(frame, path, TRANSLATED_CANDIDATES))


@stage_task("filter-variants")
def filter_variants_task(
    candidates_paths: list[str],
    prompts_path: str,
    bertscore: BertScoreSettings,
    out_dir: str,
    cache_dir: str | None = None,
) -> str:
    """Every candidate artifact's variant columns (the translated candidates carry more),
    through the semantic filter; ``cache_dir``: the shared cache root, whose scores any
    earlier run of the same texts and scorer left (the scorer loads only for the rest)."""
    scorer = get_bert_scorer(bertscore.model, bertscore.num_layers, bertscore.batch_size)
    f1 = cached_scorer(scorer.f1, cache_dir, bertscore.model, bertscore.num_layers)
    frame = filter_variants(
        pl.concat([conform(read_parquet(p), VARIANTS) for p in candidates_paths]),
        read_parquet(prompts_path),
        f1,
        bertscore.semantic_threshold,
    )
    return str(write_parquet(frame, Path(out_dir) / VARIANTS_FILE, VARIANTS))
