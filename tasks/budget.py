"""Tasks of a budgeted run (flows/budgeted.py): a round's inputs, and the scores read from
the design."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from sago_core.artifacts.layout import PROMPTS_FILE, SCORES_FILE, VARIANTS_FILE
from sago_core.artifacts.schemas import PROMPTS, SCORES, VARIANTS
from sago_core.artifacts.store import read_parquet, write_parquet
from sago_core.budget.run_cells import CELL_ID, round_inputs_of
from sago_core.scoring.budgeted_scores import design_scores
from tasks.stage import stage_task


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
