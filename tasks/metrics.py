"""Tasks: pair scores, mirroring, deltas, per-prompt scores, summary, human summary."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from sago.tasks.stage import stage_task
from sago_core.artifacts.layout import (
    DELTAS_FILE,
    PAIRS_FILE,
    SCORES_FILE,
    SUMMARY_FILE,
    SUMMARY_MD_FILE,
    artifact_file,
)
from sago_core.artifacts.schemas import DELTAS, PAIRS, SCORES, SUMMARY
from sago_core.artifacts.store import read_parquet, read_text, write_parquet, write_text
from sago_core.axes.text_similarity import (
    get_bert_scorer,
    multilingual_encoder,
    skip_cross_language,
    without_cross_language,
)
from sago_core.backends.api_served import describe_drift, drifted
from sago_core.baselines.bertscore import rescaled, run_baseline
from sago_core.config import BertScoreSettings
from sago_core.report.summary_md import kept_counts, render_summary
from sago_core.scoring.deltas import compute_deltas
from sago_core.scoring.prompt_scores import score_prompts
from sago_core.scoring.summary import summarize
from sago_core.stages.pairs import score_pairs
from sago_core.stages.semantic_cache import cached_scorer


@stage_task("score-pairs", run_name="score-pairs[{model}]")
def score_pairs_task(
    model: str,
    generations_path: str,
    bertscore: BertScoreSettings,
    out_dir: str,
    cache_dir: str | None = None,
) -> str:
    """BLEU and BERTScore of every answer against its base answer; ``cache_dir``: the
    shared cache root, whose F1 of a pair scored before is read back."""
    scorer = get_bert_scorer(bertscore.model, bertscore.num_layers, bertscore.batch_size)
    raw = cached_scorer(scorer.f1, cache_dir, bertscore.model, bertscore.num_layers)
    generations = read_parquet(generations_path)
    multilingual = multilingual_encoder(bertscore.model, bertscore.multilingual)
    baseline = run_baseline(bertscore.model, bertscore.num_layers, bertscore.rescale_with_baseline)
    f1 = skip_cross_language(rescaled(raw, baseline), generations, multilingual)
    frame = without_cross_language(score_pairs(generations, f1), generations, multilingual)
    return str(write_parquet(frame, Path(out_dir) / PAIRS_FILE, PAIRS))


@stage_task("compute-deltas", run_name="compute-deltas[{model}]")
def compute_deltas_task(
    model: str,
    generations_path: str,
    analysis_path: str,
    pairs_path: str,
    mirroring_path: str,
    out_dir: str,
) -> str:
    frame = compute_deltas(
        read_parquet(generations_path),
        read_parquet(analysis_path),
        read_parquet(pairs_path),
        read_parquet(mirroring_path),
    )
    return str(write_parquet(frame, Path(out_dir) / DELTAS_FILE, DELTAS))


@stage_task("assemble", run_name="assemble[{name}]")
def assemble_task(name: str, part_paths: list[str], schema_name: str, out_dir: str) -> str:
    """Concatenate per-model artifacts into the run-level file of the same schema."""
    from sago_core.artifacts import schemas

    schema = getattr(schemas, schema_name)
    frame = pl.concat([read_parquet(p) for p in part_paths])
    return str(write_parquet(frame, Path(out_dir) / artifact_file(name), schema))


@stage_task("score-prompts")
def score_prompts_task(deltas_path: str, out_dir: str) -> str:
    frame = score_prompts(read_parquet(deltas_path))
    return str(write_parquet(frame, Path(out_dir) / SCORES_FILE, SCORES))


@stage_task("summarize")
def summarize_task(scores_path: str, test_against: str, out_dir: str) -> str:
    frame = summarize(read_parquet(scores_path), test_against)
    return str(write_parquet(frame, Path(out_dir) / SUMMARY_FILE, SUMMARY))


@stage_task("render-summary")
def render_summary_task(
    summary_path: str,
    variants_path: str,
    out_dir: str,
    generations_path: str | None = None,
    encoder: str | None = None,
    budget_path: str | None = None,
) -> str:
    """summary.md; ``budget_path``: a budgeted run's budget.json (its line on top)."""
    drift = describe_drift(drifted(read_parquet(generations_path))) if generations_path else None
    budget = json.loads(read_text(budget_path)) if budget_path else None
    text = render_summary(
        read_parquet(summary_path), kept_counts(read_parquet(variants_path)), drift, encoder, budget
    )
    return str(write_text(text, Path(out_dir) / SUMMARY_MD_FILE))
