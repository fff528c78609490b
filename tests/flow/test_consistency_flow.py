"""sago consistency on two checkpoint families of a tiny model, under Prefect: the series
built when missing from a held-out training split, the matrix for both adjustments, the
heatmap, sign agreement, values equal to a recomputation from the scores, and a rerun that
reuses the series."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from sago_core.study.config import build_study_config

pytestmark = pytest.mark.slow

OODS = ["builtin_truthfulqa", "builtin_nq_open", "builtin_hotpotqa"]


def test_checkpoint_series_really_differ(tiny_model_dir: Path, tmp_path: Path) -> None:
    from safetensors.numpy import load_file

    from sago_core.backends.model_source import resolve_local_model
    from sago_core.checkpoints.series import finetune_series, quantize_series
    from sago_core.training.split import (
        SPLIT_FILE,
        TrainingSplit,
        builtin_training_prompts,
    )

    source = resolve_local_model(str(tiny_model_dir))
    split = TrainingSplit("builtin_train", tuple(builtin_training_prompts()))
    tuned = finetune_series(source, split, [0, 1], tmp_path / "ft", learning_rate=3e-3)
    quantised = quantize_series(source, [32, 4], tmp_path / "q")
    key = "model.layers.0.mlp.down_proj.weight"
    weights = [load_file(str(p / "model.safetensors"))[key] for p in tuned]
    assert not np.array_equal(weights[0], weights[1])  # one step moved the weights
    recorded = json.loads((tuned[1] / SPLIT_FILE).read_text())
    assert recorded["digest"] == split.digest() and len(recorded["rows"]) == 24
    four_bit = load_file(str(quantised[1] / "model.safetensors"))[key]
    assert all(len(np.unique(row)) <= 15 for row in four_bit)  # 2 * (2^3 - 1) + 1 levels


def test_consistency_flow_builds_the_series_matrix_heatmap_and_agreement(
    harness: None, tiny_model_dir: Path, tmp_path: Path
) -> None:
    from sago.flows.study import study as study_flow

    study = build_study_config(
        {
            "series": {
                "base": str(tiny_model_dir),
                "folder": str(tmp_path / "series"),
                "finetune_steps": [0, 1, 2, 3],
                "learning_rate": 3e-3,
                "quantize_bits": [32, 6, 4, 3],
            },
            "in_distribution": "builtin_triviaqa",
            "out_of_distribution": OODS,
            "evaluation": {
                "preset": "demo",
                "n": 2,
                "runs_dir": str(tmp_path / "runs"),
                "generation": {"max_new_tokens": 4, "batch_size": 32},
                "variants": {
                    "register": {"strengths": [2], "positions": ["suffix"]},
                    "noise": {
                        "spacing": [5],
                        "punctuation": [],
                        "capitalization": [],
                        "positions": ["global"],
                    },
                    "structural": None,
                },
            },
        },
        source="test",
    )
    run_dir = Path(study_flow(study))
    split = json.loads((run_dir / "training_split.json").read_text())
    assert split["series_split"]["name"] == "builtin_train"
    assert split["evaluation_prompts"] == 12  # six built-in styles x n = 2
    trained = [c for c in split["checkpoints"] if c["training_split"]]
    assert len(trained) == 4 and {c["series"] for c in trained} == {"finetune"}

    scores = pl.read_parquet(run_dir / "checkpoint_scores.parquet")
    assert scores.height == 8 * 6 * (2 + 6)  # checkpoints x datasets x metrics
    loglik = scores.filter(pl.col("metric") == "ref_loglik")
    assert loglik["value"].null_count() == 0 and loglik["value"].n_unique() > 8
    table = pl.read_parquet(run_dir / "partial_correlations.parquet")
    assert table.height == 2 * 8 * 3 * 2  # families x metrics x OOD pairs x adjustments
    assert table.filter(pl.col("r").is_null())["missing_reason"].null_count() == 0
    spline = table.filter(pl.col("method") == "spline")
    assert spline["r"].null_count() == spline.height  # 4 checkpoints: the spline needs 5
    linear = table.filter((pl.col("method") == "linear") & pl.col("r").is_not_null())
    assert linear["p_perm"].null_count() == linear.height  # 4 checkpoints: 2 blocks
    assert linear["perm_reason"].str.contains("at least 7 checkpoints").all()

    # Recompute one defined cell from the scores with the textbook recursion.
    cell = linear.filter((pl.col("metric") == "ref_loglik") & (pl.col("series") == "finetune"))
    cell = cell.row(0, named=True)
    wide = (
        scores.filter((pl.col("metric") == "ref_loglik") & (pl.col("series") == "finetune"))
        .pivot(on="dataset", index="position", values="value")
        .sort("position")
    )
    x, y, z = (wide[c].to_numpy() for c in (cell["ood_a"], cell["ood_b"], "builtin_triviaqa"))
    rxy, rxz, ryz = (np.corrcoef(a, b)[0, 1] for a, b in ((x, y), (x, z), (y, z)))
    expected = (rxy - rxz * ryz) / np.sqrt((1 - rxz**2) * (1 - ryz**2))
    assert cell["r"] == pytest.approx(expected, abs=1e-9) and cell["n"] == 4 and cell["df"] == 1

    agreement = pl.read_parquet(run_dir / "sign_agreement.parquet")
    assert agreement.height == 8 * 2 and set(agreement["series_a"]) == {"finetune"}
    page = (run_dir / "consistency.html").read_text()
    assert 'id="fig-partial-correlations"' in page and "Sign agreement" in page
    assert "Minimum detectable" in page and "builtin_train" in page

    weights = tmp_path / "series" / "finetune" / "step-0003" / "model.safetensors"
    built = weights.stat().st_mtime_ns
    again = Path(study_flow(study))  # a rerun reuses the series and every stage
    assert again == run_dir and weights.stat().st_mtime_ns == built
