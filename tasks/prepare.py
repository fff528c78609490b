"""Tasks: load prompts, build variant candidates, apply the semantic filter."""

from __future__ import annotations

from pathlib import Path

from sago_core.artifacts.schemas import PROMPTS, VARIANTS
from sago_core.artifacts.store import read_parquet, write_parquet
from sago_core.axes.text_similarity import get_bert_scorer
from sago_core.config import BertScoreSettings, RunConfig, VariantGrid
from sago_core.stages.prompts import prepare_prompts
from sago_core.stages.variants import build_variant_candidates, filter_variants
from tasks.stage import stage_task


@stage_task("load-prompts", retries=1)
def load_prompts_task(config: RunConfig, prompt_source_digest: str, out_dir: str) -> str:
    """``prompt_source_digest`` fingerprints the data files, so edited data is reloaded."""
    return str(write_parquet(prepare_prompts(config), Path(out_dir) / "prompts.parquet", PROMPTS))


@stage_task("build-variants")
def build_variants_task(prompts_path: str, grid: VariantGrid, seed: int, out_dir: str) -> str:
    frame = build_variant_candidates(read_parquet(prompts_path), grid, seed)
    return str(write_parquet(frame, Path(out_dir) / "variant_candidates.parquet", VARIANTS))


@stage_task("filter-variants")
def filter_variants_task(
    candidates_path: str, prompts_path: str, bertscore: BertScoreSettings, out_dir: str
) -> str:
    scorer = get_bert_scorer(bertscore.model, bertscore.num_layers, bertscore.batch_size)
    frame = filter_variants(
        read_parquet(candidates_path),
        read_parquet(prompts_path),
        scorer.f1,
        bertscore.semantic_threshold,
    )
    return str(write_parquet(frame, Path(out_dir) / "variants.parquet", VARIANTS))
