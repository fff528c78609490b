"""Every family through the real stages: one `sago run` from the command line over a tiny
random-weight model of each family (Gemma 3 multimodal and the softcapped Gemma 2 among
them) finishes, fills all six axes for every model, and records the effective decoding."""

from __future__ import annotations

import json
from pathlib import Path

import polars as pl
import pytest
import yaml

from tests.families import FAMILIES, build_family
from tests.grids import tiny_variants

pytestmark = [pytest.mark.slow, pytest.mark.conformance]

QUESTIONS = ("What is the capital of France?", "Name a planet with rings.")


@pytest.fixture(scope="module")
def family_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("families-e2e")
    return {name: build_family(name, root / name) for name in FAMILIES}


def test_every_family_runs_end_to_end_from_the_command_line(
    family_models: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    from sago_cli.main import main

    data = tmp_path / "questions.jsonl"
    data.write_text("".join(json.dumps({"question": q}) + "\n" for q in QUESTIONS))
    models = [f"hf:{folder}" for folder in family_models.values()]
    config = {
        "models": models,
        "datasets": [str(data)],
        "n": len(QUESTIONS),
        "runs_dir": str(tmp_path / "runs"),
        "generation": {"max_new_tokens": 8, "batch_size": 8},
        "analysis": {"batch_size": 4},
        "bertscore": {"model": "minilm-l6", "num_layers": 6, "semantic_threshold": 0.5},
        "variants": tiny_variants(),
    }
    file = tmp_path / "families.yaml"
    file.write_text(yaml.safe_dump(config))
    assert main(["run", "--config", str(file), "--run-id", "families"]) == 0
    first = capsys.readouterr().out.splitlines()[0]  # said before anything starts
    said = f"Run families: {len(QUESTIONS)} prompts, {len(models)} models, "
    assert first.startswith(said), first
    run_dir = tmp_path / "runs" / "families"

    summary = pl.read_parquet(run_dir / "summary.parquet").filter(pl.col("dataset") == "__pooled__")
    for model in models:
        rows = summary.filter(pl.col("model") == model)
        assert sorted(rows["axis"].to_list()) == ["act", "bert", "bleu", "ent", "mr", "prob"]
        assert rows["sgs"].null_count() == 0, (model, rows.select("axis", "missing_reason"))
        assert all(p == p for p in rows["p_reference"].to_list()), model  # no NaN

    generations = pl.read_parquet(run_dir / "generations.parquet")
    for model, folder in zip(models, family_models.values(), strict=True):
        engines = generations.filter(pl.col("model") == model)["engine"].unique().to_list()
        assert len(engines) == 1, model
        engine = json.loads(engines[0])
        decoding = json.loads(engine["decoding"])
        assert decoding.get("do_sample") in (False, None), (model, decoding)
        assert float(decoding.get("repetition_penalty", 1.0)) == 1.0, (model, decoding)
        config_json = json.loads((folder / "config.json").read_text())
        text = config_json.get("text_config", config_json)
        assert engine["layers"] == str(text["num_hidden_layers"]), model

    analysis = pl.concat(
        [pl.read_parquet(p) for p in sorted(run_dir.glob("models/*/analysis.parquet"))]
    )
    for model, folder in zip(models, family_models.values(), strict=True):
        config_json = json.loads((folder / "config.json").read_text())
        layers = config_json.get("text_config", config_json)["num_hidden_layers"]
        cosines = analysis.filter(pl.col("model") == model)["layer_cosines"].to_list()
        assert cosines and all(len(c) == layers for c in cosines), model
