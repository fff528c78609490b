"""One LoRA fine-tune from start (or its newest checkpoint) to the result folder: the
provenance first, then the model, the examples, the loop, and the adapters and merged model
(``result.py`` says what the folder holds)."""

from __future__ import annotations

from pathlib import Path

from sago_core.training.config import TrainConfig
from sago_core.training.data import data_identity, load_examples
from sago_core.training.loop import StepHook, train_adapters
from sago_core.training.model import encode, load_base, with_lora
from sago_core.training.result import begin, finish


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
    model = with_lora(model, config)
    encoded = [encode(tokenizer, e, config.max_length) for e in examples]
    losses = train_adapters(model, encoded, config, config.out, on_step)
    return finish(model, tokenizer, config, record, losses)
