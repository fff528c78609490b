"""`sago train` end to end (the Prefect flow on the session's tiny model): the result folder
(adapters, merged model, provenance, card), the merged model equal to base + adapters, and the
same command on the same folder resuming instead of starting over; the refusals before
anything loads, one line each."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from sago_cli.main import main
from tests.train_env import require_train, write_export


def _train(data: Path, model: str, out: Path, *extra: str) -> int:
    where = ["--out", str(out), "--runs-dir", str(out.parent)]
    return main(["train", str(data), "--model", model, *where, *extra])


@pytest.mark.slow
def test_sago_train_writes_a_model_that_loads_and_resumes(
    tiny_model_dir: Path, tmp_path: Path, harness: None, capsys: pytest.CaptureFixture[str]
) -> None:
    require_train()
    import torch
    from peft import PeftModel
    from transformers import AutoModelForCausalLM

    data = write_export(tmp_path / "export")
    out = tmp_path / "trained"
    options = (
        *("--steps", "3", "--batch-size", "2", "--checkpoint-every", "2", "--lora-r", "4"),
        *("--gradient-accumulation", "2", "--lr-schedule", "cosine", "--warmup-steps", "1"),
        *("--track", f"sqlite:///{tmp_path / 'mlflow.db'}"),
    )
    assert _train(data, f"hf:{tiny_model_dir}", out, *options) == 0
    assert f"evaluate it as hf:{out / 'model'}" in capsys.readouterr().out
    record = json.loads((out / "training.json").read_text(encoding="utf-8"))
    assert record["status"] == "done" and record["objective"] == "consistency"
    assert record["base_model"] == f"hf:{tiny_model_dir}"
    assert record["base_identity"].startswith("dir-sha256:")
    assert record["data_identity"].startswith("sha256:")
    assert record["settings"]["lora_r"] == 4 and record["settings"]["steps"] == 3
    assert record["settings"]["gradient_accumulation"] == 2
    assert record["settings"]["lr_schedule"] == "cosine"
    assert len(record["losses"]) == 3 and all(math.isfinite(x) for x in record["losses"])
    assert sorted(p.name for p in (out / "checkpoints").glob("checkpoint-*")) == [
        "checkpoint-2",
        "checkpoint-3",
    ]
    # the trainer reported each step's loss to the tracker named by --track
    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=f"sqlite:///{tmp_path / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("sago/train")
    assert experiment is not None
    (run,) = client.search_runs([experiment.experiment_id])
    logged = [m.value for m in client.get_metric_history(run.info.run_id, "loss")]
    assert logged == pytest.approx(record["losses"])
    card = (out / "README.md").read_text(encoding="utf-8")
    assert card.startswith(f"# LoRA consistency fine-tune of hf:{tiny_model_dir}")

    ids = torch.tensor([[1, 20, 300, 4000, 5]])
    merged = AutoModelForCausalLM.from_pretrained(out / "model").eval()
    base = AutoModelForCausalLM.from_pretrained(tiny_model_dir).eval()
    adapted = PeftModel.from_pretrained(base, out / "adapter").eval()
    with torch.no_grad():
        merged_logits = merged(input_ids=ids).logits
        adapted_logits = adapted(input_ids=ids).logits
        with adapted.disable_adapter():
            base_logits = adapted(input_ids=ids).logits
    assert torch.allclose(merged_logits, adapted_logits, atol=1e-5)
    assert not torch.allclose(merged_logits, base_logits, atol=1e-5)  # training moved it

    # The same command again: the training is complete, nothing is retrained.
    assert _train(data, f"hf:{tiny_model_dir}", out, *options) == 0
    again = json.loads((out / "training.json").read_text(encoding="utf-8"))
    assert again["losses"] == record["losses"]
    # Another setting on the same folder: refused.
    assert _train(data, f"hf:{tiny_model_dir}", out, "--steps", "5") == 2
    assert "holds another training (settings differs)" in capsys.readouterr().err


@pytest.mark.parametrize(
    ("model", "expected"),
    [
        ("litellm:openai/gpt-4o-mini", "an API model; sago train needs the model's weights"),
        ("hf:{tmp}/w.gguf", "a GGUF file holds quantised weights that LoRA cannot train"),
    ],
)
def test_refusals_come_before_anything_loads(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], model: str, expected: str
) -> None:
    (tmp_path / "w.gguf").write_bytes(b"GGUF")
    data = write_export(tmp_path / "export")
    assert _train(data, model.format(tmp=tmp_path), tmp_path / "out") == 2
    err = capsys.readouterr().err
    assert expected in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "out").exists()


def test_data_that_is_not_an_export_and_bad_settings_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "w.gguf").write_bytes(b"GGUF")
    model = f"hf:{tmp_path}"  # any folder with a config.json passes the weights check
    (tmp_path / "config.json").write_text("{}", encoding="utf-8")
    assert _train(tmp_path / "nowhere", model, tmp_path / "out") == 2
    assert "not a `sago export training` folder" in capsys.readouterr().err
    data = write_export(tmp_path / "export")
    (data / "consistency.jsonl").unlink()
    assert _train(data, model, tmp_path / "out") == 2
    assert "objective consistency reads consistency.jsonl" in capsys.readouterr().err
    assert _train(data, model, tmp_path / "out", "--objective", "sft", "--steps", "0") == 2
    assert capsys.readouterr().err.strip() == (
        "sago: error: --steps: Input should be greater than or equal to 1"
    )
