"""The shared workload: built-in prompts, a fixed variant grid, a fixed seed and length."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from pathlib import Path

import polars as pl

from sago_core.artifacts.schemas import PROMPTS, VARIANTS
from sago_core.artifacts.store import read_parquet, write_parquet
from sago_core.config import VariantGrid, build_config
from sago_core.stages.prompts import prepare_prompts
from sago_core.stages.variants import build_variant_candidates

MODEL = "hf:smollm2-135m"
BERTSCORE = ("minilm-l6", 6)
GRID = {
    "register": {"strengths": [-2, 2], "positions": ["prefix", "suffix"]},
    "noise": {
        "spacing": [5],
        "punctuation": [3],
        "capitalization": [50],
        "positions": ["prefix", "global"],
    },
    "structural": None,
    "replay": False,  # the naive baseline has no noise floor; compare like with like
}


@dataclass(frozen=True)
class Workload:
    n: int
    max_new_tokens: int
    seed: int = 0
    limit: int | None = None  # keep only the first ``limit`` prompts (smoke-sized runs)
    per_family: int | None = None  # keep only the first variants of each family and prompt
    model: str = MODEL  # both pipelines' model (the smoke test gives a tiny random one)

    def save(self, folder: Path) -> None:
        """Write prompts.parquet, variants.parquet and workload.json into ``folder``."""
        folder.mkdir(parents=True, exist_ok=True)
        config = build_config("demo", {"n": self.n, "seed": self.seed, "variants": GRID})
        prompts = prepare_prompts(config)
        if self.limit is not None:
            prompts = prompts.head(self.limit)
        variants = build_variant_candidates(prompts, VariantGrid.model_validate(GRID), self.seed)
        if self.per_family is not None:
            rank = pl.int_range(pl.len()).over("dataset", "prompt_id", "family")
            variants = variants.filter(rank < self.per_family)
        write_parquet(prompts, folder / "prompts.parquet", PROMPTS)
        write_parquet(variants, folder / "variants.parquet", VARIANTS)
        (folder / "workload.json").write_text(json.dumps(asdict(self)))

    @staticmethod
    def load(folder: Path) -> tuple[Workload, pl.DataFrame, pl.DataFrame]:
        spec = Workload(**json.loads((folder / "workload.json").read_text()))
        return (
            spec,
            read_parquet(folder / "prompts.parquet"),
            read_parquet(folder / "variants.parquet"),
        )
