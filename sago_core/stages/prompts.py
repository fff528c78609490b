"""Stage: load prompts -> prompts.parquet."""

from __future__ import annotations

import polars as pl

from sago_core.artifacts.schemas import PROMPTS, conform
from sago_core.config import RunConfig
from sago_core.data.loading import load_run_prompts
from sago_core.data.prompt import reference_missing_reason
from sago_core.data.safety import with_kinds_columns


def prepare_prompts(config: RunConfig) -> pl.DataFrame:
    prompts = load_run_prompts(config)
    frame = pl.DataFrame(
        {
            "dataset": [p.dataset for p in prompts],
            "prompt_id": [p.prompt_id for p in prompts],
            "prompt": [p.prompt for p in prompts],
            "references": [list(p.references) for p in prompts],
            "source": [p.source for p in prompts],
            "reference_missing_reason": [reference_missing_reason(p) for p in prompts],
        },
        schema=PROMPTS,
    )
    return with_kinds_columns(conform(frame, PROMPTS), prompts)
