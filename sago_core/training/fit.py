"""One LoRA fine-tune from start (or its newest checkpoint) to the result folder: the
provenance first, then the model, the examples, the trainer, and the adapters and merged
model (``result.py`` says what the folder holds)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sago_core.training.config import TrainConfig
from sago_core.training.data import data_identity, load_examples
from sago_core.training.model import load_base, lora_config
from sago_core.training.result import begin, finish, model_dir
from sago_core.training.trainers import StepHook, train_adapters


def fit(
    config: TrainConfig,
    base: str,
    base_identity: str,
    code: str,
    on_step: StepHook | None = None,
) -> Path:
    """Train ``config`` on the weights at ``base`` (a folder or hub id); the merged model's
    folder."""
    from accelerate import PartialState

    # under `accelerate launch` every process trains; the first checks and writes the folder
    processes = PartialState()
    record: dict[str, Any] = {}
    if processes.is_main_process:
        identity = data_identity(config)
        record = begin(config, base_identity=base_identity, data_identity=identity, code=code)
    processes.wait_for_everyone()
    examples = load_examples(config)
    tokenizer, model = load_base(base)
    model, losses = train_adapters(
        model,
        tokenizer,
        examples,
        config,
        peft_config=lora_config(model, config),
        on_step=on_step,
    )
    if not processes.is_main_process:
        return model_dir(config.out)
    return finish(model, tokenizer, config, record, losses)
