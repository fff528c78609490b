"""`sago export --format inspect`: a run's instances as inspect_ai eval logs, one per (model,
dataset), read back with inspect_ai's own `read_eval_log` (tests/inspect_env.py): as many
samples as instances.parquet has rows, each axis' delta as the sample's score (a missing
one "NA" with its reason), the texts and the variant's cell in the metadata, the SGS and its
interval as the eval's metrics. The run here is written by hand; expected values are read
off it."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import polars as pl
import pytest

from sago_core.artifacts.schemas import SUMMARY, instances_schema
from sago_core.artifacts.store import write_parquet
from sago_core.errors import ConfigError, InputError
from sago_core.external.inspect_export import export_inspect
from sago_core.vocabulary import AXES
from tests.inspect_env import read_eval_logs

MODEL = "hf:smollm2-135m"
NO_MODEL = "external generations: no model given"


def _instance(dataset: str, prompt: str, variant: str, bleu: float, bert: float) -> dict:
    row: dict[str, Any] = {c: None for c in instances_schema()}
    row.update(
        model=MODEL,
        dataset=dataset,
        prompt_id=prompt,
        variant_id=variant,
        family=variant.split(":")[0],
        subtype=variant.split(":")[1],
        strength=float(variant.split(":")[2]),
        position=variant.split(":")[3],
        base_prompt=f"Question {prompt}?",
        variant_prompt=f"Question  {prompt}?",
        base_answer=f"Answer {prompt}.",
        variant_answer=f"Answer {prompt} again.",
        base_correct=True,
        correct_missing_reason="no answer",
    )
    for axis in AXES:
        row[f"reason_{axis}"] = NO_MODEL
    row.update(d_bleu=bleu, d_bert=bert, reason_bleu=None, reason_bert=None)
    return row


INSTANCES = [
    _instance("truthfulqa", "q1", "noise:spacing:5:global", 0.25, 0.125),
    _instance("truthfulqa", "q2", "noise:spacing:5:global", 0.5, 0.0625),
    _instance("truthfulqa", "q1", "register:politeness:2:suffix", 0.75, 0.25),
    _instance("mmlu", "m1", "noise:punctuation:3:global", 1.5, 0.375),
]
SGS = {("truthfulqa", "bleu"): 0.6123, ("truthfulqa", "bert"): 0.25, ("mmlu", "bleu"): 1.5}


def _summary() -> pl.DataFrame:
    rows = []
    for dataset in ("truthfulqa", "mmlu"):
        for axis in AXES:
            row: dict[str, Any] = {c: None for c in SUMMARY}
            sgs = SGS.get((dataset, axis))
            row.update(model=MODEL, dataset=dataset, axis=axis, sgs=sgs, n=2)
            row.update(missing_reason=None if sgs is not None else NO_MODEL)
            if sgs is not None:
                row.update(ci_low=sgs - 0.125, ci_high=sgs + 0.125)
            rows.append(row)
    return pl.DataFrame(rows, schema=SUMMARY)


@pytest.fixture
def run_dir(tmp_path: Path) -> Path:
    folder = tmp_path / "runs" / "demo-abc"
    frame = pl.DataFrame(INSTANCES, schema=instances_schema())
    write_parquet(frame, folder / "instances.parquet", instances_schema())
    write_parquet(_summary(), folder / "summary.parquet", SUMMARY)
    manifest = {"started_at": "2026-01-02T03:04:05+00:00", "packages": {"sago": "0.1.0"}}
    (folder / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    return folder


def test_inspect_reads_every_instance_with_its_deltas(run_dir: Path, tmp_path: Path) -> None:
    paths = export_inspect(run_dir, tmp_path / "logs")
    logs = read_eval_logs(paths)
    instances = pl.read_parquet(run_dir / "instances.parquet")
    assert len(logs) == 2  # one per (model, dataset)
    assert sum(len(log["samples"]) for log in logs) == instances.height
    for log in logs:
        assert log["status"] == "success" and log["model"] == MODEL
        dataset = log["task"].removeprefix("sago/")
        rows = instances.filter(pl.col("dataset") == dataset)
        assert len(log["samples"]) == rows.height
        for row in rows.iter_rows(named=True):
            (sample,) = [
                s for s in log["samples"] if s["id"] == f"{row['prompt_id']}/{row['variant_id']}"
            ]
            assert sample["input"] == row["variant_prompt"]
            assert sample["target"] == row["base_answer"]
            assert sample["completion"] == row["variant_answer"]
            meta = sample["metadata"]
            assert meta["base_prompt"] == row["base_prompt"]
            cell = [meta[k] for k in ("family", "subtype", "strength", "position")]
            assert cell == [row[k] for k in ("family", "subtype", "strength", "position")]
            for axis in AXES:
                value, why = sample["scores"][axis]
                if row[f"d_{axis}"] is None:
                    assert (value, why) == ("NA", row[f"reason_{axis}"])
                else:
                    assert value == row[f"d_{axis}"]
        for axis in AXES:
            sgs = SGS.get((dataset, axis))
            metrics = log["metrics"][axis]
            if sgs is None:
                assert "sgs" not in metrics
            else:
                assert metrics["sgs"] == sgs
                assert (metrics["ci_low"], metrics["ci_high"]) == (sgs - 0.125, sgs + 0.125)


def test_refuses_a_folder_in_use_and_an_unfinished_run(run_dir: Path, tmp_path: Path) -> None:
    used = tmp_path / "used"
    used.mkdir()
    (used / "x").write_text("x")
    with pytest.raises(ConfigError, match="not an empty folder"):
        export_inspect(run_dir, used)
    (run_dir / "instances.parquet").unlink()
    with pytest.raises(InputError, match=r"instances\.parquet"):
        export_inspect(run_dir, tmp_path / "fresh")


def test_a_local_model_is_named_by_its_folder_not_this_machines_path(
    run_dir: Path, tmp_path: Path
) -> None:
    local = f"hf:{tmp_path / 'models' / 'm1'}"
    for name in ("instances.parquet", "summary.parquet"):
        frame = pl.read_parquet(run_dir / name).with_columns(pl.lit(local).alias("model"))
        frame.write_parquet(run_dir / name)
    paths = export_inspect(run_dir, tmp_path / "logs")
    for path in paths:
        assert str(tmp_path) not in path.read_text(encoding="utf-8")
        assert str(tmp_path) not in path.name
    assert {json.loads(p.read_text())["eval"]["model"] for p in paths} == {"hf:m1"}
