"""Tasks that draw and analyse the sampled answers, K > 1 per prompt text: ``sample`` ->
samples.parquet, ``analyse-samples`` -> sample_analysis.parquet, one shard each. Their
statistics (the sampling tests, excesses, variance components) are ``tasks.sampling_statistics``.

A module of their own, beside ``tasks.models``: a task's code version covers its module and
everything it imports, so the generate and analyse stages keep their cache keys.
"""

from __future__ import annotations

from pathlib import Path

from sago.tasks.backends import backend_for
from sago.tasks.stage import stage_task
from sago_core.artifacts.layout import SAMPLE_ANALYSIS_FILE, SAMPLES_FILE, CacheLayout
from sago_core.artifacts.schemas import SAMPLE_ANALYSIS, SAMPLES
from sago_core.artifacts.store import read_parquet, write_parquet
from sago_core.backends.target import ModelTarget
from sago_core.config import AnalysisSettings, GenerationSettings
from sago_core.stages.generation import answer_cache
from sago_core.stages.samples import analyse_samples, sample_responses


@stage_task("sample", run_name="sample[{model} | {shard}]")
def sample_task(
    model: str,
    shard: str,
    target: ModelTarget,
    generations_path: str,
    settings: GenerationSettings,
    out_dir: str,
    cache_dir: str | None = None,
    ledger_file: str | None = None,
) -> str:
    frame = sample_responses(
        backend_for(target, cache_dir, ledger_file),
        model,
        read_parquet(generations_path),
        settings,
        answer_cache(CacheLayout(Path(cache_dir)).rows, target, settings) if cache_dir else None,
    )
    return str(write_parquet(frame, Path(out_dir) / SAMPLES_FILE, SAMPLES))


@stage_task("analyse-samples", run_name="analyse-samples[{model} | {shard}]")
def analyse_samples_task(
    model: str,
    shard: str,
    target: ModelTarget,
    samples_path: str,
    analysis_path: str,
    settings: AnalysisSettings,
    out_dir: str,
    cache_dir: str | None = None,
    ledger_file: str | None = None,
) -> str:
    frame = analyse_samples(
        backend_for(target, cache_dir, ledger_file),
        read_parquet(samples_path),
        read_parquet(analysis_path),
        settings,
    )
    return str(write_parquet(frame, Path(out_dir) / SAMPLE_ANALYSIS_FILE, SAMPLE_ANALYSIS))
