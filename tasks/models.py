"""Tasks that run a model: generation and the teacher-forced scoring pass.

The model comes as a ``ModelTarget`` (its identity and its own backend's options are part of
the cache key); ``cache_dir`` (the shared caches) and ``ledger_file`` (the run's spending)
are locations, outside the key.
"""

from __future__ import annotations

from pathlib import Path

from sago.tasks.backends import backend_for
from sago.tasks.stage import stage_task
from sago_core.artifacts.layout import ANALYSIS_FILE, GENERATIONS_FILE, CacheLayout
from sago_core.artifacts.schemas import ANALYSIS, GENERATIONS
from sago_core.artifacts.store import read_parquet, write_parquet
from sago_core.backends.target import ModelTarget
from sago_core.config import AnalysisSettings, GenerationSettings
from sago_core.stages.analysis import analyse_pairs, measure_cache
from sago_core.stages.generation import answer_cache, generate_responses


@stage_task("generate", run_name="generate[{model} | {shard}]")
def generate_task(
    model: str,
    shard: str,
    target: ModelTarget,
    prompts_path: str,
    variants_path: str,
    settings: GenerationSettings,
    out_dir: str,
    cache_dir: str | None = None,
    ledger_file: str | None = None,
) -> str:
    frame = generate_responses(
        backend_for(target, cache_dir, ledger_file),
        model,
        read_parquet(prompts_path),
        read_parquet(variants_path),
        settings,
        answer_cache(CacheLayout(Path(cache_dir)).rows, target, settings) if cache_dir else None,
    )
    return str(write_parquet(frame, Path(out_dir) / GENERATIONS_FILE, GENERATIONS))


@stage_task("analyse", run_name="analyse[{model} | {shard}]")
def analyse_task(
    model: str,
    shard: str,
    target: ModelTarget,
    generations_path: str,
    settings: AnalysisSettings,
    out_dir: str,
    cache_dir: str | None = None,
    ledger_file: str | None = None,
) -> str:
    backend = backend_for(target, cache_dir, ledger_file)
    reuse = measure_cache(CacheLayout(Path(cache_dir)).rows, target) if cache_dir else None
    frame = analyse_pairs(backend, read_parquet(generations_path), settings, reuse)
    return str(write_parquet(frame, Path(out_dir) / ANALYSIS_FILE, ANALYSIS))
