"""Tasks that run a model: generation and the teacher-forced scoring pass."""

from __future__ import annotations

from pathlib import Path

from sago_core.artifacts.schemas import ANALYSIS, GENERATIONS
from sago_core.artifacts.store import read_parquet, write_parquet
from sago_core.backends.factory import get_backend
from sago_core.config import AnalysisSettings, GenerationSettings
from sago_core.stages.analysis import analyse_pairs
from sago_core.stages.generation import generate_responses
from tasks.stage import stage_task


@stage_task("generate", run_name="generate[{model}]")
def generate_task(
    model: str,
    model_identity: str,
    prompts_path: str,
    variants_path: str,
    settings: GenerationSettings,
    out_dir: str,
) -> str:
    """``model_identity`` (weights digest or hub revision) is part of the cache key."""
    frame = generate_responses(
        get_backend(model),
        model,
        read_parquet(prompts_path),
        read_parquet(variants_path),
        settings,
    )
    return str(write_parquet(frame, Path(out_dir) / "generations.parquet", GENERATIONS))


@stage_task("analyse", run_name="analyse[{model}]")
def analyse_task(
    model: str, model_identity: str, generations_path: str, settings: AnalysisSettings, out_dir: str
) -> str:
    frame = analyse_pairs(get_backend(model), read_parquet(generations_path), settings)
    return str(write_parquet(frame, Path(out_dir) / "analysis.parquet", ANALYSIS))
