"""A run at T 0.7 with K = 3 samples per prompt text on the mock backend: it
finishes, writes samples, sampling_tests and variance_components, its deltas are the
excesses (Act kept from sample 0), and a replay's excess is near zero (the mock samples the
replay from the base's own distribution)."""

from __future__ import annotations

from pathlib import Path

import polars as pl
import pytest

from sago_core.config import RunConfig, build_config
from tests.grids import noise_only

pytestmark = pytest.mark.slow

K = 3


def _config(runs: Path) -> RunConfig:
    return build_config(
        "demo",
        {
            "models": ["mock:sampler"],
            "n": 1,
            "runs_dir": str(runs),
            "generation": {
                "max_new_tokens": 8,
                "batch_size": 16,
                "temperature": 0.7,
                "samples": K,
            },
            "variants": noise_only(),
        },
    )


def test_a_sampled_run_scores_the_excesses(harness: None, tmp_path: Path) -> None:
    from sago.flows.evaluate import evaluate

    run_dir = Path(evaluate(_config(tmp_path / "runs")))
    (model_dir,) = (run_dir / "models").iterdir()
    samples = pl.read_parquet(model_dir / "samples.parquet")
    generations = pl.read_parquet(run_dir / "generations.parquet")
    assert samples.height == K * generations.height
    assert sorted(samples["sample"].unique().to_list()) == list(range(K))
    assert (model_dir / "sample_analysis.parquet").is_file()

    tests = pl.read_parquet(run_dir / "sampling_tests.parquet")
    variants = generations.filter(pl.col("variant_id") != "base").height
    assert tests.height == variants * 5  # bleu, bert, prob, ent, mr
    assert tests.filter(pl.col("axis") == "bleu")["k_variant"].to_list() == [K] * variants

    # the run's deltas are the excesses': -E on the text axes, the share difference on MR
    deltas = pl.read_parquet(run_dir / "deltas.parquet")
    key = ["variant_id", "prompt_id", "dataset", "axis"]
    joined = deltas.join(tests, on=key, how="inner")
    text = joined.filter(pl.col("axis").is_in(["bleu", "bert"]) & pl.col("excess").is_not_null())
    assert text.height > 0
    assert ((text["delta_norm"] + text["excess"]).abs() < 1e-12).all()
    mr = joined.filter(pl.col("axis") == "mr")
    assert (mr["delta"] == mr["excess"]).all()
    # Act is a property of the prompt: sample 0's delta, unchanged
    first = pl.read_parquet(model_dir / "deltas.parquet").filter(pl.col("axis") == "act")
    act = deltas.filter(pl.col("axis") == "act").join(first, on=key, suffix="_0")
    assert act.height == variants and (act["delta"] == act["delta_0"]).all()
    # scores are computed from these deltas (replay left out, its |E| as the floor)
    scores = pl.read_parquet(run_dir / "scores.parquet")
    assert scores.filter(pl.col("axis") == "bleu")["floor"].is_not_null().all()

    replay = tests.filter((pl.col("family") == "replay") & pl.col("axis").is_in(["bleu", "bert"]))
    prompts = pl.read_parquet(run_dir / "prompts.parquet").height
    assert replay.height == 2 * prompts  # one replay per prompt, two text axes
    assert replay["excess"].abs().max() < 0.15
    assert abs(replay["excess"].mean()) < 0.05
    assert replay["p_value"].is_not_null().all()  # K = 3: an exact test, min p 1/10

    components = pl.read_parquet(run_dir / "variance_components.parquet")
    bleu = components.filter((pl.col("axis") == "bleu") & (pl.col("dataset") == "__pooled__"))
    assert bleu.height == 1 and bleu["n_prompts"][0] == prompts
    assert bleu["s2_sample"][0] is not None and bleu["s2_sample"][0] > 0
    assert components.filter(pl.col("axis") == "prob")["share"].is_null().all()
    page = (run_dir / "report.html").read_text(encoding="utf-8")
    assert '<section id="sampling"><h2>Stability under sampling</h2>' in page
    assert "Replay calibration" in page and "prompt-induced share" in page
