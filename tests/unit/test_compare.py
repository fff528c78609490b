"""sago compare: runs of the same model stay apart; rank reversals across datasets show up."""

from __future__ import annotations

import json
import re
from pathlib import Path

import polars as pl

from sago_cli.main import main
from sago_core.scoring.prompt_scores import score_prompts
from sago_core.scoring.summary import summarize
from tests.unit.test_report import _deltas


def _run(folder: Path, model: str, flip: bool) -> Path:
    deltas = _deltas().with_columns(pl.lit(model).alias("model"))
    if flip:  # more stable than the other run on d1, much less stable on d2
        factor = pl.when(pl.col("dataset") == "d2").then(3.0).otherwise(0.5)
        deltas = deltas.with_columns(pl.col("delta_norm") * factor)
    scores = score_prompts(deltas)
    folder.mkdir(parents=True)
    deltas.write_parquet(folder / "deltas.parquet")
    scores.write_parquet(folder / "scores.parquet")
    summarize(scores).write_parquet(folder / "summary.parquet")
    pl.DataFrame({"family": ["register"], "kept": [True]}).write_parquet(
        folder / "variants.parquet"
    )
    prompts = (
        scores.select("dataset", "prompt_id")
        .unique()
        .with_columns(pl.lit(["x"]).alias("references"))
    )
    prompts.write_parquet(folder / "prompts.parquet")
    prompts.select(
        pl.lit(model).alias("model"),
        "dataset",
        "prompt_id",
        pl.lit("base").alias("variant_id"),
        pl.lit("x").alias("response_text"),
    ).write_parquet(folder / "generations.parquet")
    (folder / "manifest.json").write_text(json.dumps({"models": {model: {"identity": "i"}}}))
    return folder


def test_compare_labels_repeated_models_and_finds_reversals(tmp_path: Path) -> None:
    a = _run(tmp_path / "run-a", "hf:m", flip=False)
    b = _run(tmp_path / "run-b", "hf:m", flip=True)
    out = tmp_path / "cmp.html"
    assert main(["compare", str(a), str(b), "--out", str(out)]) == 0
    page = out.read_text()
    assert "hf:m (run-a)" in page and "hf:m (run-b)" in page
    reversals = [int(n) for n in re.findall(r"(\d+) rank reversal\(s\)", page)]
    assert sum(reversals) > 0


def test_compare_refuses_an_unfinished_run(tmp_path: Path) -> None:
    (tmp_path / "half").mkdir()
    assert main(["compare", str(tmp_path / "half"), "--out", str(tmp_path / "x.html")]) == 2
