"""`sago export --format hf-results`: a run's results in the layout leaderboards read from the
Hub (lighteval's results file: `config_general`, `results` per task with each axis' SGS, its
stderr and interval; `all` the pooled row) plus the details, which `datasets` loads by the
README's configs. The run is written by hand; expected values are read off it or worked out
by hand (stderr of scores 0.2 and 0.4: sd 0.1414 / sqrt 2 = 0.1). The push needs the Hub and
is not exercised here."""

from __future__ import annotations

import importlib.util
import json
import math
import os
from pathlib import Path
from typing import Any

import polars as pl
import pytest
import yaml

from sago_core.artifacts.schemas import SCORES, SUMMARY, instances_schema
from sago_core.artifacts.store import write_parquet
from sago_core.errors import InputError
from sago_core.external.hub_results import export_hub_results
from sago_core.vocabulary import AXES

MODEL = "hf:smollm2-135m"
NO_MODEL = "external generations: no model given"
# per-prompt scores on bleu: truthfulqa 0.2 and 0.4 (mean 0.3, stderr 0.1), mmlu 0.5 alone
SCORE_ROWS = [("truthfulqa", "q1", 0.2), ("truthfulqa", "q2", 0.4), ("mmlu", "m1", 0.5)]
SGS = {"truthfulqa": 0.3, "mmlu": 0.5, "__pooled__": 0.4}


def _summary() -> pl.DataFrame:
    rows = []
    for dataset, sgs in SGS.items():
        for axis in ("bleu", "act"):
            row: dict[str, Any] = {c: None for c in SUMMARY}
            value = sgs if axis == "bleu" else None
            row.update(model=MODEL, dataset=dataset, axis=axis, sgs=value, n=2)
            row.update(missing_reason=None if value is not None else NO_MODEL)
            if value is not None:
                row.update(ci_low=value - 0.25, ci_high=value + 0.25)
            rows.append(row)
    return pl.DataFrame(rows, schema=SUMMARY)


def _instances() -> pl.DataFrame:
    rows = []
    for dataset, prompt, delta in SCORE_ROWS:
        row: dict[str, Any] = {c: None for c in instances_schema()}
        row.update(
            model=MODEL, dataset=dataset, prompt_id=prompt, variant_id="noise:spacing:5:global"
        )
        row.update(family="noise", subtype="spacing", strength=5.0, position="global")
        row.update(base_prompt="Q?", variant_prompt="Q ?", base_answer="A.", variant_answer="B.")
        for axis in AXES:
            row[f"reason_{axis}"] = NO_MODEL
        row.update(d_bleu=delta, reason_bleu=None)
        rows.append(row)
    return pl.DataFrame(rows, schema=instances_schema())


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "runs" / "demo-abc"
    write_parquet(_summary(), folder / "summary.parquet", SUMMARY)
    scores = pl.DataFrame(
        [
            {"model": MODEL, "dataset": d, "prompt_id": p, "axis": "bleu", "s": s, "n_variants": 1}
            for d, p, s in SCORE_ROWS
        ]
    ).with_columns(pl.lit(None).alias("missing_reason"), pl.lit(None).alias("floor"))
    write_parquet(scores, folder / "scores.parquet", SCORES)
    write_parquet(_instances(), folder / "instances.parquet", instances_schema())
    manifest = {
        "run_id": "demo-abc",
        "started_at": "2026-01-02T03:04:05+00:00",
        "config_hash": "abc123",
        "packages": {"sago": "0.1.0"},
        "models": {MODEL: {"spec": MODEL, "identity": "sha256:feed"}},
        "config": {"seed": 0},
    }
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return folder


def test_results_file_in_the_leaderboard_layout(run_dir: Path, tmp_path: Path) -> None:
    written = export_hub_results(run_dir, tmp_path / "hub")
    (results_file,) = [p for p in written if p.suffix == ".json"]
    assert results_file.parent.parent.name == "results"
    assert results_file.name == "results_2026-01-02T03-04-05.json"
    document = json.loads(results_file.read_text())
    general = document["config_general"]
    assert (general["model_name"], general["model_sha"]) == (MODEL, "sha256:feed")
    assert (general["run_id"], general["sago_version"]) == ("demo-abc", "0.1.0")
    results = document["results"]
    assert set(results) == {"sago|truthfulqa|0", "sago|mmlu|0", "all"}
    truthful = results["sago|truthfulqa|0"]
    assert truthful["sgs_bleu"] == 0.3
    assert truthful["sgs_bleu_stderr"] == pytest.approx(0.1, abs=1e-12)
    assert (truthful["sgs_bleu_ci_low"], truthful["sgs_bleu_ci_high"]) == (0.3 - 0.25, 0.3 + 0.25)
    assert "sgs_act" not in truthful
    assert document["missing"]["sago|truthfulqa|0"]["sgs_act"] == NO_MODEL
    # mmlu has one prompt: no stderr, said so; so the pooled row has none either
    assert "sgs_bleu_stderr" not in results["sago|mmlu|0"]
    assert "sgs_bleu_stderr" in document["missing"]["sago|mmlu|0"]
    assert results["all"]["sgs_bleu"] == 0.4 and "sgs_bleu_stderr" not in results["all"]
    assert document["versions"] == dict.fromkeys(results, 0)


def test_pooled_stderr_of_equal_weight_datasets(run_dir: Path, tmp_path: Path) -> None:
    scores = pl.read_parquet(run_dir / "scores.parquet")
    extra = scores.filter(pl.col("dataset") == "mmlu").with_columns(
        pl.lit("m2").alias("prompt_id"), pl.lit(0.7).alias("s")
    )
    write_parquet(pl.concat([scores, extra]), run_dir / "scores.parquet", SCORES)
    written = export_hub_results(run_dir, tmp_path / "hub")
    results = json.loads(next(p for p in written if p.suffix == ".json").read_text())["results"]
    # mmlu 0.5 and 0.7: stderr 0.1 as well; pooled sqrt(0.1^2 + 0.1^2) / 2
    assert results["sago|mmlu|0"]["sgs_bleu_stderr"] == pytest.approx(0.1, abs=1e-12)
    assert results["all"]["sgs_bleu_stderr"] == pytest.approx(math.sqrt(0.02) / 2, abs=1e-12)


def test_datasets_loads_the_details(run_dir: Path, tmp_path: Path) -> None:
    if importlib.util.find_spec("datasets") is None:
        if os.environ.get("SAGO_REQUIRE_TRAIN") == "1":
            pytest.fail("SAGO_REQUIRE_TRAIN=1 but datasets (the train extra) is not installed")
        pytest.skip("datasets is not installed (the train or hub extra)")
    import datasets

    out = tmp_path / "hub"
    export_hub_results(run_dir, out)
    front = (out / "README.md").read_text().split("---")[1]
    configs = [c["config_name"] for c in yaml.safe_load(front)["configs"]]
    assert len(configs) == 2  # one per (model, dataset)
    instances = pl.read_parquet(run_dir / "instances.parquet")
    loaded = 0
    for name in configs:
        split = datasets.load_dataset(str(out), name=name, split="latest")
        frame = pl.DataFrame(split.to_list())
        dataset = frame["dataset"][0]
        expected = instances.filter(pl.col("dataset") == dataset)
        assert frame["d_bleu"].to_list() == expected["d_bleu"].to_list()
        assert frame["prompt_id"].to_list() == expected["prompt_id"].to_list()
        loaded += frame.height
    assert loaded == instances.height


def test_an_unfinished_run_is_refused(run_dir: Path, tmp_path: Path) -> None:
    (run_dir / "scores.parquet").unlink()
    with pytest.raises(InputError, match=r"scores\.parquet"):
        export_hub_results(run_dir, tmp_path / "hub")


def test_the_exported_folder_names_no_path_of_this_machine(run_dir: Path, tmp_path: Path) -> None:
    """A run of a local model, with its runs folder, dataset file, data and encoder folders
    and an API address with credentials in its config: what would be pushed holds none of
    them, the model by its folder's name."""
    local = f"hf:{tmp_path / 'models' / 'm1'}"
    for name in ("summary.parquet", "scores.parquet", "instances.parquet"):
        frame = pl.read_parquet(run_dir / name).with_columns(pl.lit(local).alias("model"))
        frame.write_parquet(run_dir / name)
    manifest = json.loads((run_dir / "manifest.json").read_text())
    manifest["models"] = {local: {"spec": local, "identity": "dir-sha256:feed"}}
    manifest["config"] = {
        "seed": 0,
        "models": [local],
        "runs_dir": str(tmp_path / "runs"),
        "prefect_home": str(tmp_path / "prefect"),
        "data_dir": str(tmp_path / "data"),
        "datasets": [f"{tmp_path / 'private' / 'q.csv'}#answer=gold"],
        "bertscore": {"model": str(tmp_path / "encoders" / "minilm")},
        "api": {"base_url": "https://u:SECRET@h/v1?key=SECRET"},
        "tracking": {"mlflow": {"tracking_uri": "https://u:SECRET@mlflow"}},
    }
    (run_dir / "manifest.json").write_text(json.dumps(manifest))
    out = tmp_path / "hub"
    written = export_hub_results(run_dir, out)
    for path in written:
        if path.suffix == ".parquet":
            text = str(pl.read_parquet(path).select(pl.col(pl.String)).to_dicts())
        else:
            text = path.read_text(encoding="utf-8")
        assert str(tmp_path) not in text and "SECRET" not in text, path
    assert str(tmp_path) not in str(written[0].relative_to(tmp_path))
    (results_file,) = [p for p in written if p.suffix == ".json"]
    general = json.loads(results_file.read_text())["config_general"]
    assert (general["model_name"], general["model_sha"]) == ("hf:m1", "dir-sha256:feed")
    config = general["config"]
    assert (
        config["datasets"] == ["q.csv#answer=gold"] and config["api"]["base_url"] == "https://h/v1"
    )
    assert not {"runs_dir", "prefect_home", "tracking"} & set(config)
