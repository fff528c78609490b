"""Tasks that run a model: generation and the teacher-forced scoring pass.

API models also get their settings (part of the cache key), the shared answer cache and the
run's spending ledger (locations, not inputs: outside the cache key).
"""

from __future__ import annotations

from pathlib import Path

from sago_core.artifacts.schemas import ANALYSIS, GENERATIONS
from sago_core.artifacts.store import read_parquet, write_parquet
from sago_core.config import AnalysisSettings, ApiSettings, GenerationSettings, VllmSettings
from sago_core.stages.analysis import analyse_pairs
from sago_core.stages.generation import generate_responses
from tasks.backends import backend_for
from tasks.stage import stage_task


@stage_task("generate", run_name="generate[{model} | {shard}]")
def generate_task(
    model: str,
    shard: str,
    model_identity: str,
    prompts_path: str,
    variants_path: str,
    settings: GenerationSettings,
    out_dir: str,
    api: ApiSettings | None = None,
    cache_dir: str | None = None,
    ledger_file: str | None = None,
    vllm: VllmSettings | None = None,
    trust_remote_code: bool = False,
) -> str:
    """``model_identity`` (weights digest, hub revision or API endpoint) is in the cache key."""
    frame = generate_responses(
        backend_for(model, api, cache_dir, ledger_file, vllm, trust_remote_code),
        model,
        read_parquet(prompts_path),
        read_parquet(variants_path),
        settings,
    )
    return str(write_parquet(frame, Path(out_dir) / "generations.parquet", GENERATIONS))


@stage_task("analyse", run_name="analyse[{model} | {shard}]")
def analyse_task(
    model: str,
    shard: str,
    model_identity: str,
    generations_path: str,
    settings: AnalysisSettings,
    out_dir: str,
    api: ApiSettings | None = None,
    cache_dir: str | None = None,
    ledger_file: str | None = None,
    vllm: VllmSettings | None = None,
    trust_remote_code: bool = False,
) -> str:
    backend = backend_for(model, api, cache_dir, ledger_file, vllm, trust_remote_code)
    frame = analyse_pairs(backend, read_parquet(generations_path), settings)
    return str(write_parquet(frame, Path(out_dir) / "analysis.parquet", ANALYSIS))
