"""Several processes train one model: two CPU processes started by torch's launcher (what
`accelerate launch` starts on GPUs) talk over gloo, split every batch between them, and end
on the same adapters; each keeps its own generators' state in the checkpoint."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.train_env import require_train, write_export

_SCRIPT = """
import json, os, sys
from pathlib import Path
from sago_core.training.config import TrainConfig
from sago_core.training.data import load_examples
from sago_core.training.model import load_base, lora_config
from sago_core.training.trainers import train_adapters

model, data, out = sys.argv[1:]
config = TrainConfig(model=f"hf:{model}", data=Path(data), out=Path(out), steps=2,
                     batch_size=1, checkpoint_every=2, learning_rate=1e-2)
tokenizer, base = load_base(model)
trained, losses = train_adapters(base, tokenizer, load_examples(config), config,
                                 peft_config=lora_config(base, config))
lora = {n: p.detach().double().sum().item() for n, p in trained.named_parameters() if "lora_" in n}
result = {"world": int(os.environ["WORLD_SIZE"]), "lora": lora}
Path(out, f"result-{os.environ['RANK']}.json").write_text(json.dumps(result))
"""


@pytest.mark.slow
def test_two_cpu_processes_split_the_batches_and_agree(
    tiny_model_dir: Path, tmp_path: Path
) -> None:
    require_train()
    data = write_export(tmp_path / "export")
    script = tmp_path / "train.py"
    script.write_text(_SCRIPT, encoding="utf-8")
    out = tmp_path / "out"
    launcher = [sys.executable, "-m", "torch.distributed.run", "--nproc_per_node", "2"]
    root = Path(__file__).resolve().parents[2]
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(
        [*launcher, str(script), str(tiny_model_dir), str(data), str(out)],
        capture_output=True, text=True, timeout=600, env=env, cwd=root,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    results = [json.loads((out / f"result-{rank}.json").read_text()) for rank in (0, 1)]
    assert [r["world"] for r in results] == [2, 2]
    assert results[0]["lora"] == results[1]["lora"] and results[0]["lora"]
    checkpoint = out / "checkpoints" / "checkpoint-2"
    assert (checkpoint / "rng-0.safetensors").is_file()
    assert (checkpoint / "rng-1.safetensors").is_file()
    # three examples, one per process and step: a step takes two, so half an epoch (one
    # process alone would take a third)
    state = json.loads((checkpoint / "trainer_state.json").read_text(encoding="utf-8"))
    first = next(h for h in state["log_history"] if "loss" in h)
    assert first["epoch"] == pytest.approx(0.5)
