"""The files `sago export --training` writes load in TRL's own trainers unchanged: the run of
tests/unit/test_training_export.py exported, each file read by `datasets`' json builder (as
the card's front matter tells the Hub to), recognised by TRL as conversational, and one
SFTTrainer and one DPOTrainer step taken on the session's tiny model with a finite loss."""

from __future__ import annotations

import json
import math
from pathlib import Path

import polars as pl
import pytest

from sago_core.artifacts.schemas import instances_schema
from sago_core.artifacts.store import write_parquet
from sago_core.training.export import export_training
from tests.train_env import require_train
from tests.unit.test_training_export import ROWS


@pytest.fixture
def exported(tmp_path: Path) -> Path:
    run = tmp_path / "runs" / "demo-abc"
    schema = instances_schema()
    write_parquet(pl.DataFrame(ROWS, schema=schema), run / "instances.parquet", schema)
    (run / "manifest.json").write_text(json.dumps({"run_id": "demo-abc"}), encoding="utf-8")
    return export_training(run, tmp_path / "train", ["sft", "dpo", "consistency"])


@pytest.mark.slow
def test_the_exported_files_train_one_step_in_trls_sft_and_dpo_trainers(
    exported: Path, tiny_model_dir: Path, tmp_path: Path
) -> None:
    require_train()
    from datasets import load_dataset
    from transformers import AutoTokenizer
    from trl import DPOConfig, DPOTrainer, SFTConfig, SFTTrainer
    from trl.data_utils import is_conversational

    def dataset(kind: str) -> object:
        path = str(exported / f"{kind}.jsonl")
        return load_dataset("json", data_files=path, split="train", cache_dir=str(tmp_path))

    rows = {"sft": 2, "dpo": 1, "consistency": 2}  # test_training_export.py's expected examples
    for kind, n in rows.items():
        data = dataset(kind)
        assert data.num_rows == n, kind  # type: ignore[attr-defined]
        assert is_conversational(data[0]), kind  # type: ignore[index]
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    common = {
        "max_steps": 1,
        "per_device_train_batch_size": 2,
        "report_to": [],
        "save_strategy": "no",
        "use_cpu": True,
        "seed": 0,
        "dataloader_num_workers": 0,
    }
    sft = SFTTrainer(
        model=str(tiny_model_dir),
        train_dataset=dataset("sft"),
        args=SFTConfig(output_dir=str(tmp_path / "sft"), **common),
        processing_class=tokenizer,
    )
    assert sft.train_dataset.num_rows == 2
    assert math.isfinite(sft.train().training_loss)
    dpo = DPOTrainer(
        model=str(tiny_model_dir),
        train_dataset=dataset("dpo"),
        args=DPOConfig(output_dir=str(tmp_path / "dpo"), **common),
        processing_class=tokenizer,
    )
    assert dpo.train_dataset.num_rows == 1
    assert math.isfinite(dpo.train().training_loss)
