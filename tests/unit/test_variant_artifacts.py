"""variants.parquet is byte-identical across runs and shard orders; the paper grid size."""

from __future__ import annotations

from pathlib import Path

import polars as pl

from sago_core.artifacts.schemas import VARIANTS
from sago_core.artifacts.store import write_parquet
from sago_core.config import build_config
from sago_core.stages.prompts import prepare_prompts
from sago_core.stages.variants import build_variant_candidates


def test_same_seed_gives_byte_identical_variants_in_any_shard_order(
    shared_data: Path, tmp_path: Path
) -> None:
    config = build_config("paper", {"data_dir": str(shared_data), "n": 4})
    prompts = prepare_prompts(config)
    grid = config.variants
    one = write_parquet(
        build_variant_candidates(prompts, grid, 0), tmp_path / "a.parquet", VARIANTS
    )
    two = write_parquet(
        build_variant_candidates(prompts, grid, 0), tmp_path / "b.parquet", VARIANTS
    )
    assert one.read_bytes() == two.read_bytes()
    half = prompts.height // 2
    shards = [prompts[half:], prompts[:half].reverse()]
    merged = pl.concat([build_variant_candidates(s, grid, 0) for s in shards]).sort(
        ["dataset", "prompt_id", "variant_id"]
    )
    three = write_parquet(merged, tmp_path / "c.parquet", VARIANTS)
    assert three.read_bytes() == one.read_bytes()


def test_paper_grid_has_every_family_subtype_strength_and_position(shared_data: Path) -> None:
    config = build_config("paper", {"data_dir": str(shared_data), "n": 1})
    candidates = build_variant_candidates(prepare_prompts(config), config.variants, 0)
    per_prompt = candidates.group_by("prompt_id").len()["len"].unique().to_list()
    # register 10 x 3 + noise 3 x 5 x 3 + the replay; structural 6 come apart
    assert per_prompt == [30 + 45 + 1]
    register = candidates.filter(pl.col("family") == "register")
    assert sorted(register["strength"].unique().to_list()) == [-10, -8, -6, -4, -2, 2, 4, 6, 8, 10]
    noise = candidates.filter(pl.col("family") == "noise")
    assert set(noise["subtype"]) == {"spacing", "punctuation", "capitalization"}
    assert set(candidates["position"]) == {"prefix", "suffix", "global"}
    structural = config.variants.structural
    assert structural is not None and structural.lengths == (0.25, 0.5, 1.5, 2.0, 3.0)
    assert structural.mood
