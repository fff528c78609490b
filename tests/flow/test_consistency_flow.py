"""sago consistency on two checkpoint families of a tiny model, under Prefect: the matrix,
the heatmap, sign agreement, and values equal to a recomputation from the scores."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import polars as pl
import pytest

from sago_core.consistency.config import build_consistency_config

pytestmark = pytest.mark.slow

OODS = ["builtin_truthfulqa", "builtin_nq_open", "builtin_hotpotqa"]


@pytest.fixture(scope="module")
def families(tiny_model_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> dict:
    from sago_core.backends.model_source import resolve_local_model
    from sago_core.checkpoints.series import finetune_series, quantize_series
    from sago_core.data.builtin import builtin_prompts

    root = tmp_path_factory.mktemp("checkpoints")
    source = resolve_local_model(str(tiny_model_dir))
    pairs = [(p.prompt, p.references[0]) for p in builtin_prompts() if p.references]
    tuned = finetune_series(source, pairs, [0, 1, 2, 3], root / "ft", learning_rate=3e-3)
    quantised = quantize_series(source, [32, 6, 4, 3], root / "q")
    return {
        "finetune": [f"hf:{p}" for p in tuned],
        "quantize": [f"hf:{p}" for p in quantised],
    }


def test_checkpoint_series_really_differ(families: dict) -> None:
    from safetensors.numpy import load_file

    weights = [load_file(str(Path(m[3:]) / "model.safetensors")) for m in families["finetune"]]
    key = "model.layers.0.mlp.down_proj.weight"
    assert not np.array_equal(weights[0][key], weights[1][key])  # one step moved the weights
    four_bit = load_file(str(Path(families["quantize"][2][3:]) / "model.safetensors"))[key]
    assert all(len(np.unique(row)) <= 15 for row in four_bit)  # 2 * (2^3 - 1) + 1 levels


def test_consistency_flow_builds_the_matrix_heatmap_and_agreement(
    harness: None, families: dict, tiny_model_dir: Path, tmp_path: Path
) -> None:
    from flows.consistency import consistency

    study = build_consistency_config(
        {
            "families": families,
            "in_distribution": "builtin_triviaqa",
            "out_of_distribution": OODS,
            "evaluation": {
                "preset": "demo",
                "n": 3,
                "runs_dir": str(tmp_path / "runs"),
                "generation": {"max_new_tokens": 4, "batch_size": 32},
                "variants": {
                    "register": {"strengths": [2], "positions": ["suffix"]},
                    "noise": {
                        "spacing": [5],
                        "punctuation": [3],
                        "capitalization": [50],
                        "positions": ["global"],
                    },
                    "structural": None,
                },
            },
        },
        source="test",
    )
    run_dir = Path(consistency(study))
    scores = pl.read_parquet(run_dir / "checkpoint_scores.parquet")
    assert scores.height == 8 * 6 * (2 + 6)  # checkpoints x datasets x metrics
    loglik = scores.filter(pl.col("metric") == "ref_loglik")
    assert loglik["value"].null_count() == 0 and loglik["value"].n_unique() > 8
    table = pl.read_parquet(run_dir / "partial_correlations.parquet")
    assert table.height == 2 * 8 * 3  # families x metrics x OOD pairs
    assert table.filter(pl.col("r").is_null())["missing_reason"].null_count() == 0

    # Recompute one defined cell from the scores with the textbook recursion.
    cell = table.filter((pl.col("metric") == "ref_loglik") & (pl.col("family") == "finetune")).row(
        0, named=True
    )
    wide = (
        scores.filter((pl.col("metric") == "ref_loglik") & (pl.col("family") == "finetune"))
        .pivot(on="dataset", index="position", values="value")
        .sort("position")
    )
    x, y, z = (wide[c].to_numpy() for c in (cell["ood_a"], cell["ood_b"], "builtin_triviaqa"))
    rxy, rxz, ryz = (np.corrcoef(a, b)[0, 1] for a, b in ((x, y), (x, z), (y, z)))
    expected = (rxy - rxz * ryz) / np.sqrt((1 - rxz**2) * (1 - ryz**2))
    assert cell["r"] == pytest.approx(expected, abs=1e-9) and cell["n"] == 4

    agreement = pl.read_parquet(run_dir / "sign_agreement.parquet")
    assert agreement.height == 8 and set(agreement["family_a"]) == {"finetune"}
    page = (run_dir / "consistency.html").read_text()
    assert 'id="fig-partial-correlations"' in page and "Sign agreement" in page

    again = Path(consistency(study))  # a rerun reuses every stage
    assert again == run_dir
