"""Tasks of a budgeted run (flows/budgeted.py): a round's inputs, the scores read from the
design, and the summary whose verdicts are the stopping rule's."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl

from sago.tasks.stage import stage_task
from sago_core.artifacts.layout import PROMPTS_FILE, SCORES_FILE, SUMMARY_FILE, VARIANTS_FILE
from sago_core.artifacts.schemas import PROMPTS, SCORES, SUMMARY, VARIANTS
from sago_core.artifacts.store import read_parquet, read_text, write_parquet
from sago_core.budget.run_cells import CELL_ID, round_inputs_of
from sago_core.scoring.budgeted_scores import design_scores
from sago_core.scoring.summary import summarize, with_budget_verdicts


@stage_task("budget-round")
def budget_round_task(
    prompts_path: str,
    variants_path: str,
    cells: list[list[str]],
    prompts: list[list[str]],
    out_dir: str,
) -> str:
    """The round's variants.parquet (the sampled prompts' replays and the ``cells`` asked
    so far, as [dataset, prompt_id, variant_id]), beside its prompts.parquet (the sampled
    prompts)."""
    asked = pl.DataFrame(cells, schema=dict.fromkeys(CELL_ID, pl.String), orient="row")
    sampled = {(d, p) for d, p in prompts}
    round_prompts, round_variants = round_inputs_of(
        read_parquet(prompts_path), read_parquet(variants_path), asked, sampled
    )
    write_parquet(round_prompts, Path(out_dir) / PROMPTS_FILE, PROMPTS)
    return str(write_parquet(round_variants, Path(out_dir) / VARIANTS_FILE, VARIANTS))


@stage_task("budget-scores")
def budget_scores_task(deltas_path: str, budget_prompts_path: str, out_dir: str) -> str:
    """scores.parquet of a budgeted run: the design-based per-prompt scores."""
    frame = design_scores(read_parquet(deltas_path), read_parquet(budget_prompts_path))
    return str(write_parquet(frame, Path(out_dir) / SCORES_FILE, SCORES))


@stage_task("budget-summary")
def budget_summary_task(
    scores_path: str,
    budget_path: str,
    budget_estimates_path: str,
    test_against: str,
    out_dir: str,
) -> str:
    """summary.parquet of a budgeted run: its SGS and intervals the design's estimates, its
    p-values and marks the stopping rule's."""
    tests = json.loads(read_text(budget_path)).get("tests", [])
    summary = summarize(read_parquet(scores_path), test_against)
    frame = with_budget_verdicts(summary, tests, read_parquet(budget_estimates_path))
    return str(write_parquet(frame, Path(out_dir) / SUMMARY_FILE, SUMMARY))
