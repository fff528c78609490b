"""Tasks that locate the instability inside a model: per-layer profiles of the
scoring pass' cosines (run level, no model) and activation patching (per model, after the
scoring pass; cached on its inputs, so turning it on for a finished run computes only it)."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from sago.tasks.backends import backend_for
from sago.tasks.stage import stage_task
from sago_core.artifacts.layout import LAYER_PROFILES_FILE, PATCHING_FILE
from sago_core.artifacts.schemas import LAYER_PROFILES, PATCHING
from sago_core.artifacts.store import read_parquet, write_parquet
from sago_core.backends.target import ModelTarget
from sago_core.config import AnalysisSettings, PatchingSettings
from sago_core.stages.patching import patch_variants
from sago_core.statistics.layer_profiles import run_layer_profiles


@stage_task("layer-profiles")
def layer_profiles_task(
    analysis_paths: list[str], generations_path: str, seed: int, out_dir: str
) -> str:
    """``analysis_paths``: every model's analysis.parquet; ``generations_path``: the run's."""
    analysis = pl.concat([read_parquet(p) for p in analysis_paths], how="diagonal_relaxed")
    frame = run_layer_profiles(analysis, read_parquet(generations_path), seed)
    return str(write_parquet(frame, Path(out_dir) / LAYER_PROFILES_FILE, LAYER_PROFILES))


@stage_task("patch", run_name="patch[{model}]")
def patching_task(
    model: str,
    target: ModelTarget,
    generations_path: str,
    analysis_path: str,
    settings: PatchingSettings,
    batches: AnalysisSettings,
    seed: int,
    out_dir: str,
    cache_dir: str | None = None,
    ledger_file: str | None = None,
) -> str:
    """``batches``: the scoring pass' batch limits (the patched forwards share them)."""
    frame = patch_variants(
        backend_for(target, cache_dir, ledger_file),
        model,
        read_parquet(generations_path),
        read_parquet(analysis_path),
        settings,
        seed,
        batches.batch_size,
        batches.max_batch_tokens,
    )
    return str(write_parquet(frame, Path(out_dir) / PATCHING_FILE, PATCHING))
