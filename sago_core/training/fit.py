"""One LoRA fine-tune from start (or its newest checkpoint) to the result folder: the
provenance first, then the model, the examples, the trainer, and the adapters and merged
model (``result.py`` says what the folder holds)."""

from __future__ import annotations

from pathlib import Path

from sago_core.training.config import TrainConfig
from sago_core.training.data import data_identity, load_examples
from sago_core.training.model import load_base, lora_config
from sago_core.training.result import begin, finish
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
    record = begin(
        config, base_identity=base_identity, data_identity=data_identity(config), code=code
    )
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
    return finish(model, tokenizer, config, record, losses)
